// HostileInputTests.swift — bytes we did not write, through the paths that read them inside a
// user's app: a server's Retry-After header, a stored report folder's trail, and settings out of
// every range (a command line's --timeout, a client's configuration). Each case runs `crumbs
// reports send` or the test child as a child process, so a trap shows as a crash exit status
// (128 + signal) instead of killing the test process.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct HostileInputTests {
  /// Retry-After values a server (or something in the middle) may send: dates whose year does
  /// not fit `tm_year`, fields that overflow, seconds out of any range.
  static let hostileRetryAfter = [
    "Sun, 06 Nov -2147483648 08:49:37 GMT",
    "Sun, 06 Nov 2147483647 08:49:37 GMT",
    "Sun, 06 Nov 99999 08:49:37 GMT",
    "Sun, 2147483647 Nov 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 2147483647:2147483647:2147483647 GMT",
    "Sun, 06 Nov 1994 -2147483648:00:00 GMT",
    "99999999999999999999999999999999",
    "1e309",
    "-5",
    "-0",
    "nan",
    "-inf",
  ]

  @Test(arguments: hostileRetryAfter)
  func aHostileRetryAfterPausesTheDestinationAndNeverTraps(_ value: String) throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 429, headers: ["Retry-After": value])
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL,
    ])
    // 1: the report stays pending (throttled). A trap would be 128 + SIGTRAP or SIGILL.
    #expect(send.status == 1, "Retry-After: \(value): \(send.stderr)")
    #expect(send.stdout.contains("→ 429, server asks to wait "), "\(send.stdout)")
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .pending)
  }

  /// `--timeout` values no request can wait (each trapped with SIGILL before): refused as a
  /// usage error that says what is allowed, before anything is attempted.
  @Test(arguments: ["inf", "nan", "1e300", "0", "-1"])
  func aTimeoutOutOfRangeIsAUsageErrorNotATrap(_ value: String) throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL, "--timeout=\(value)",
    ])
    #expect(send.status == 64, "--timeout \(value): \(send.status) \(send.stderr)")
    #expect(
      send.stderr.contains("--timeout is seconds: a number above 0 and at most 86400"), "\(send.stderr)")
    #expect(server.requests.isEmpty)
    #expect(try fixture.store.load(id: fixture.ids[0]).deliveryState().destinations.isEmpty)
  }

  /// A client configured with a request timeout of infinity, retry intervals of 1e300 and
  /// infinity and NaN jitter (each trapped with SIGILL before, in the transport or in `now +
  /// backoff`): it sends, the failed report waits (the longest wait, not a trap), and the
  /// timeout it could not use is named in `problems`.
  @Test func aClientWithSettingsOutOfRangeSendsAndNeverTraps() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 503)
    defer { server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-hostile-settings", directory.path, server.baseURL + "/v1/logs"])
    let flushed = child.value(after: "flushed ", seconds: 120)
    let rest = child.readRemaining(seconds: 60)
    child.wait(seconds: 60)
    #expect(child.shellStatus == 0, "ended \(child.shellStatus.map(String.init) ?? "?"): \(rest)")
    #expect(flushed == "delivered=0 pending=1", "\(flushed ?? "no line")")
    #expect(
      rest.contains("problem requestTimeout inf is not a positive number of seconds up to 86400"), "\(rest)")
    #expect(
      server.requests.contains { String(decoding: $0.body, as: UTF8.self).contains("settings out of range") })
    let store = try ReportStore(directory: directory.path)
    let pending = try #require(store.list(.pending).reports.first)
    let history = try #require(pending.deliveryState().destinations["otlp"])
    #expect(history.attempts == 1)
    #expect(history.lastError == "HTTP 503")
    // Retried after the longest wait (about 31 years), a time that fits.
    #expect(
      history.nextAttemptUnixNano > UInt64(Date().timeIntervalSince1970 * 1e9) + 900_000_000 * 1_000_000_000)
  }

  /// Trail lines whose timestamps lie beyond what nanoseconds since 1970 hold in 64 bits
  /// (2554-07-21T23:34:33Z), around one that does.
  static let farFutureTrail =
    [
      #"{"timestamp":"2555-01-01T00:00:00.000000Z","id":1,"seq":1,"thread":7,"level":"info","#
        + #""type":"manual","message":"year 2555","attributes":{}}"#,
      #"{"timestamp":"2026-11-22T04:10:11.123456Z","id":2,"seq":2,"thread":7,"level":"info","#
        + #""type":"manual","message":"today","attributes":{}}"#,
      #"{"timestamp":"9999-12-31T23:59:59.999999999Z","id":3,"seq":3,"thread":7,"level":"error","#
        + #""type":"manual","message":"year 9999","attributes":{}}"#,
      #"{"timestamp":"2554-07-21T23:34:33.709551616Z","id":4,"seq":4,"thread":7,"level":"info","#
        + #""type":"manual","message":"one past UInt64.max","attributes":{}}"#,
    ].joined(separator: "\n") + "\n"

  /// A report folder whose trail has `farFutureTrail` in place of the one the fixture wrote.
  static func farFutureFixture() throws -> ReportFixture {
    let fixture = try ReportFixture()
    try Syscall.writeFileAtomically(
      fixture.reports[0].attachmentPath(TrailAttachment.name),
      try LZ4Frame.compress(Array(farFutureTrail.utf8)))
    return fixture
  }

  @Test func aTrailFromTheFarFutureIsSentToBacktraceWithoutItsTimes() throws {
    let fixture = try Self.farFutureFixture()
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", fixture.directory.path, "--backtrace", server.baseURL, "--token", "t",
    ])
    #expect(send.status == 0, "\(send.stdout)\(send.stderr)")
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .sent)

    let request = try #require(server.requests.first)
    let boundary = try #require(request.headers["content-type"]?.components(separatedBy: "boundary=").last)
    let part = try #require(
      multipartParts(request.body, boundary: boundary).first {
        $0.name == BacktraceDestination.breadcrumbsPartName
      })
    let crumbs = try #require(try JSONSerialization.jsonObject(with: Data(part.body)) as? [[String: Any]])
    #expect(
      crumbs.map { $0["message"] as? String } == ["year 2555", "today", "year 9999", "one past UInt64.max"])
    // An instant 64-bit nanoseconds cannot hold has no time (0), as an unparseable one.
    #expect(crumbs.map { $0["timestamp"] as? Int } == [0, 1_795_320_611_123, 0, 0])
  }

  @Test func aTrailFromTheFarFutureIsSentAsOTLPBreadcrumbRecords() throws {
    let fixture = try Self.farFutureFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL, "--otlp-json",
      "--breadcrumb-records",
    ])
    #expect(send.status == 0, "\(send.stdout)\(send.stderr)")
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .sent)
    let body = String(decoding: try #require(server.requests.first).body, as: UTF8.self)
    #expect(body.contains("\"timeUnixNano\":\"1795320611123456000\""))
    #expect(body.contains("year 9999"))
  }
}
