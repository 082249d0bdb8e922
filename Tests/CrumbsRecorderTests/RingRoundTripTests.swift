import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

@Suite struct RingRoundTripTests {
  @Test func appendedBreadcrumbsReadBackInOrderWithAttributes() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    ring.append("first", level: .info, type: .navigation, attributes: ["screen": "home"])
    ring.append("second", level: .warning, type: .http, attributes: ["url": "/x", "status": "500"])
    ring.append("third")
    let live = ring.snapshot()
    #expect(live.breadcrumbs.map(\.message) == ["first", "second", "third"])
    #expect(
      live.breadcrumbs[1].attributes == [.init(key: "url", value: "/x"), .init(key: "status", value: "500")])
    #expect(live.breadcrumbs[1].level == .warning)
    #expect(live.breadcrumbs[0].type == .navigation)
    #expect(live.counts.valid == 3)
    ring.close(clean: false)
    let offline = try RingReader.read(file: directory.file("a.ring"))
    #expect(offline.breadcrumbs.map(\.message) == ["first", "second", "third"])
    #expect(offline.header.state == .running)
    #expect(
      offline.breadcrumbs.map(\.threadSequence)
        == [0, 1, 2].map { $0 + offline.breadcrumbs[0].threadSequence })
  }
}
