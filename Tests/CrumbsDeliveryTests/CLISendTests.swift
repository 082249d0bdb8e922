// CLISendTests.swift — `crumbs reports send / list / show` and `crumbs report decode` run as a
// real process against a store and a loopback server.

import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct CLISendTests {
  @Test func cliSendsWithAProgressLineAndListsAndDecodes() throws {
    let fixture = try ReportFixture(count: 2)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL, "--secret-header",
      "Authorization: Bearer s3cret-cli",
    ])
    #expect(send.status == 0)
    let lines = send.stdout.split(separator: "\n").map(String.init)
    #expect(lines.contains("[1/2] sent \(fixture.ids[0].prefix(8))… → 200"))
    #expect(lines.contains("[2/2] sent \(fixture.ids[1].prefix(8))… → 200"))
    #expect(!(send.stdout + send.stderr).contains("s3cret-cli"))
    #expect(server.requests.allSatisfy { $0.headers["authorization"] == "Bearer s3cret-cli" })

    let list = try CLIProcess.run(["reports", "list", "--dir", fixture.directory.path, "--json"])
    let listed = try #require(
      try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
    #expect(listed.map { $0["state"] as? String } == ["sent", "sent"])

    let show = try CLIProcess.run([
      "reports", "show", String(fixture.ids[0].prefix(8)), "--dir", fixture.directory.path,
    ])
    #expect(show.status == 0)
    #expect(show.stdout.contains("otlp: 1 attempt(s), delivered"))

    let sent = try fixture.store.load(id: fixture.ids[0])
    let decoded = try CLIProcess.run(["report", "decode", sent.attachmentPath(TrailAttachment.name)])
    let trail = try LZ4Frame.decompress(try Syscall.readFile(sent.attachmentPath(TrailAttachment.name)))
    #expect(decoded.stdout == String(decoding: trail, as: UTF8.self))
    let pretty = try CLIProcess.run(["report", "decode", sent.reportPath])
    #expect(pretty.status == 0)
    #expect(try ReportStore.decode(Array(pretty.stdout.utf8)) == sent.report)
  }
}
