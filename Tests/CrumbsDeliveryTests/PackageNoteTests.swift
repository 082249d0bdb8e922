// PackageNoteTests.swift — the executable's `.note.package` (systemd's package metadata) in the
// report's resource (issue 41): a copy of the test child given the note crashes, and the OTLP body
// sent for it, decoded by opentelemetry-proto, carries the package's name, version and commit.
// And the note a linker writes (`-Xlinker --package-metadata=`, gold and bfd here; `-Wl,` would
// split the JSON at its commas) reads the same.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct PackageNoteTests {
  static let json =
    #"{"type":"deb","name":"shop-server","version":"4.5.6","os":"debian","commit":"0123abcd"}"#

  @Test func aCrashedBinaryWithAPackageNoteSendsItsPackageInTheResource() throws {
    let directory = TestDirectory()
    let app = directory.file("app")
    let (status, errors) = try PackageNote.add(Self.json, to: ChildProcess.testChild, output: app)
    #expect(status == 0, "\(errors)")
    let readelf = try Subprocess.run("/usr/bin/readelf", ["-n", app], timeoutMilliseconds: 60_000)
    #expect(String(decoding: readelf.standardOutput, as: UTF8.self).contains("shop-server"))

    let crumbs = directory.file("crumbs")
    let child = try Subprocess(
      app, ["null-deref", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"], standardOutput: .discard)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV)
    let store = try ReportStore(directory: crumbs)
    _ = PostMortemProcessor(directory: try RingDirectory(path: crumbs), store: store).run()
    let stored = try #require(store.list(.pending).reports.first)
    #expect(stored.report.resource["crumbs.package.name"] == "shop-server")

    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let uploader = ReportUploader(store: store, destinations: [OTLPDestination(endpoint: server.baseURL)])
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
    let decoded = try decodeOTLP(try #require(server.requests.first).body)
    let resource = try #require(decoded["resource"] as? [String: Any])
    #expect(resource["crumbs.package.name"] as? String == "shop-server")
    #expect(resource["crumbs.package.version"] as? String == "4.5.6")
    #expect(resource["crumbs.package.commit"] as? String == "0123abcd")
    #expect(resource["crumbs.package.type"] as? String == "deb")
    // The test child sets no version of its own: the note's is the service's.
    #expect(resource["service.version"] as? String == "4.5.6")
  }

  @Test(.enabled(if: Syscall.fileExists("/usr/bin/cc"), "no C compiler"), arguments: ["gold", "bfd"])
  func aLinkersNoteReadsTheSame(_ linker: String) throws {
    let directory = TestDirectory()
    let source = directory.file("main.c")
    try Syscall.writeFileAtomically(source, Array("int main(void) { return 0; }\n".utf8))
    let binary = directory.file("main")
    let linked = try Subprocess.run(
      "/usr/bin/cc",
      [source, "-o", binary, "-fuse-ld=\(linker)", "-Xlinker", "--package-metadata=\(Self.json)"],
      timeoutMilliseconds: 120_000)
    #expect(linked.exitStatus == 0, "\(String(decoding: linked.standardError, as: UTF8.self))")
    let image = try ELFImage.read(path: binary, symbols: false)
    guard case .success(let note)? = image.packageNote else {
      Issue.record("no note: \(String(describing: image.packageNote))")
      return
    }
    #expect(note.name == "shop-server" && note.version == "4.5.6" && note.commit == "0123abcd")
  }

  @Test func badNotesAreRefusedWithAReason() {
    let good = PackageNote.sectionBytes(Self.json)
    #expect(
      PackageNote.parse(notes: good, alignment: 4)
        == .success(
          PackageNote(fields: [
            "type": "deb", "name": "shop-server", "version": "4.5.6", "os": "debian", "commit": "0123abcd",
          ])))
    #expect(
      PackageNote.parse(notes: Array(good.prefix(20)), alignment: 4)
        == .failure(.init("a note's descriptor runs past the section")))
    #expect(
      PackageNote.parse(notes: PackageNote.sectionBytes("[1, 2]"), alignment: 4)
        == .failure(.init("the package note is not a JSON object")))
    #expect(
      PackageNote.parse(notes: PackageNote.sectionBytes("{\"n\": 1}"), alignment: 4)
        == .failure(.init("the package note names nothing")))
    var huge = PackageNote.sectionBytes("{}")
    huge[4] = 0xff
    huge[5] = 0xff
    huge[6] = 0xff
    huge[7] = 0x7f
    #expect(
      PackageNote.parse(notes: huge, alignment: 4)
        == .failure(.init("a note's descriptor runs past the section")))
    #expect(PackageNote.parse(notes: [], alignment: 4) == .failure(.init("no FDO package note")))
  }
}
