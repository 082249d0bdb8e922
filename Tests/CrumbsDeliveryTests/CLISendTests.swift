// CLISendTests.swift — `crumbs reports send / list / show` and `crumbs report decode` run as a
// real process against a store and a loopback server; and both the CLI and a client where
// libcurl is missing (hidden from dlopen with CRUMBS_LIBCURL naming a file that is not there,
// then a link to the real one put there).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
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

  /// Where the test process's libcurl is (loaded here for that).
  static func realLibcurl() throws -> String {
    try #require(CurlTransport.missingTransport() == nil, "libcurl is needed to run this test")
    let maps = String(decoding: try Syscall.readFile("/proc/self/maps", limit: 16 << 20), as: UTF8.self)
    let line = try #require(maps.split(separator: "\n").first { $0.contains("/libcurl.so.4") })
    return String(line[try #require(line.firstIndex(of: "/"))...])
  }

  /// Without libcurl, `reports send` attempts nothing — however often it runs (the old code used
  /// up the retry limit in three runs and dropped the report) — and says in one line what is
  /// missing and how to install it, as `reports list` does; once libcurl is there, it delivers.
  @Test func withoutLibcurlReportsStayPendingUncountedUntilItIsInstalled() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let libraries = TestDirectory()
    // Plain http needs no libcurl: CRUMBS_PLAIN_HTTP=libcurl sends it through libcurl, as https.
    let hidden = ["CRUMBS_LIBCURL": libraries.file("libcurl.so.4"), "CRUMBS_PLAIN_HTTP": "libcurl"]
    for run in 1...4 {
      let send = try CLIProcess.run(
        ["reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL], environment: hidden)
      #expect(send.status == 1, "run \(run): \(send.stdout)\(send.stderr)")
      #expect(send.stderrLines.count == 1, "\(send.stderr)")
      #expect(
        send.stderr.hasPrefix("crumbs reports send: libcurl is missing (cannot load "), "\(send.stderr)")
      #expect(send.stderr.contains("apt-get install libcurl4"), "\(send.stderr)")
      #expect(send.stdout.contains("0 sent, 0 dropped, 1 still pending"), "\(send.stdout)")
    }
    #expect(server.requestsStarted == 0)
    let stored = try fixture.store.load(id: fixture.ids[0])
    #expect(stored.state == .pending)
    #expect(stored.deliveryState().destinations.isEmpty, "a missing transport counted an attempt")

    let list = try CLIProcess.run(["reports", "list", "--dir", fixture.directory.path], environment: hidden)
    #expect(list.status == 0)
    #expect(list.stdout.contains("\(fixture.ids[0])  pending"), "\(list.stdout)")
    #expect(list.stderrLines.count == 1, "\(list.stderr)")
    #expect(list.stderr.hasPrefix("crumbs reports list: libcurl is missing"), "\(list.stderr)")

    // Installed: the same command delivers it.
    #expect(symlink(try Self.realLibcurl(), libraries.file("libcurl.so.4")) == 0)
    let send = try CLIProcess.run(
      ["reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL], environment: hidden)
    #expect(send.status == 0, "\(send.stdout)\(send.stderr)")
    #expect(send.stderr.isEmpty, "\(send.stderr)")
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .sent)
    #expect(try fixture.store.load(id: fixture.ids[0]).deliveryState().destinations["otlp"]?.attempts == 1)
    let listed = try CLIProcess.run(
      ["reports", "list", "--dir", fixture.directory.path], environment: hidden)
    #expect(listed.stderr.isEmpty, "\(listed.stderr)")
  }

  /// A client without libcurl: its report stays pending, uncounted, and `problems` says in one
  /// line what is missing; the next launch with libcurl delivers it.
  @Test func aClientWithoutLibcurlKeepsItsReportsAndSaysWhy() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let libraries = TestDirectory()
    // Plain http needs no libcurl: CRUMBS_PLAIN_HTTP=libcurl sends it through libcurl, as https.
    let hidden = ["CRUMBS_LIBCURL": libraries.file("libcurl.so.4"), "CRUMBS_PLAIN_HTTP": "libcurl"]
    let first = try ChildProcess(
      ChildProcess.testChild, ["client-cli-flush", directory.path, server.baseURL + "/v1/logs", "60"],
      environment: hidden)
    let flushed = first.value(after: "flushed ", seconds: 120)
    let problems = first.readRemaining(seconds: 60).split(separator: "\n").filter { $0.hasPrefix("problem ") }
    first.wait(seconds: 60)
    #expect(first.shellStatus == 0)
    #expect(flushed == "delivered=0 pending=1 timed-out=false busy=false", "\(flushed ?? "no line")")
    #expect(problems.count == 1, "\(problems)")
    #expect(problems.first?.hasPrefix("problem libcurl is missing (cannot load ") == true, "\(problems)")
    #expect(problems.first?.contains("apt-get install libcurl4") == true, "\(problems)")
    #expect(server.requestsStarted == 0)
    let store = try ReportStore(directory: directory.path)
    #expect(store.list(.pending).reports.map { $0.deliveryState().destinations.isEmpty } == [true])

    #expect(symlink(try Self.realLibcurl(), libraries.file("libcurl.so.4")) == 0)
    let second = try ChildProcess(
      ChildProcess.testChild, ["client-cli-flush", directory.path, server.baseURL + "/v1/logs", "60"],
      environment: hidden)
    let delivered = second.value(after: "flushed ", seconds: 120)
    let later = second.readRemaining(seconds: 60)
    second.wait(seconds: 60)
    // Both reports: the first launch's, and this one's (the client's own thread may have sent
    // them before the flush did).
    #expect(delivered?.hasSuffix("pending=0 timed-out=false busy=false") == true, "\(delivered ?? "no line")")
    #expect(!later.contains("libcurl"), "\(later)")
    #expect(store.list(.pending).reports.isEmpty)
    #expect(
      server.requests.filter { String(decoding: $0.body, as: UTF8.self).contains("cli step failed") }.count
        == 2)
  }
}
