// CollectRedactionTests.swift — `crumbs collect` redacts a session's reports with the rules the
// session ran with (its session file), not with its own defaults: an app that turned redaction
// off has its secrets sent, one with the defaults has none in any byte sent or stored.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct CollectRedactionTests {
  @Test(arguments: [true, false]) func theCollectorAppliesTheSessionsOwnRules(redacting: Bool) throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["redaction-crash", crumbs],
      environment: ["SWIFT_BACKTRACE": "enable=no", "CRUMBS_TEST_REDACTION": redacting ? "on" : "off"])
    #expect(child.value(after: "crashing") != nil)
    let status = child.wait(seconds: 60)
    #expect(status & 0x7f == SIGILL || status & 0x7f == SIGTRAP, "wait status \(status)")

    let result = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    #expect(result.status == 0, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
    let received = try textsReceived(by: server)
    let stored = try textsStored(under: crumbs + "/reports")
    // The crash and the non-fatal report the child stored both went out, with their trails.
    #expect(try Syscall.directoryEntries(crumbs + "/reports/sent").count == 2, "stdout: \(result.stdout)")
    #expect(received.contains { $0.contains("\"message\":\"login token=") }, "\(received.count) texts")
    // The crash alone: the collector's defaults would redact it; the session's rules decide.
    let crashSent = try textsReceived(by: server, reportKind: "crash")
    #expect(!crashSent.isEmpty)
    for secret in ["hunter2", "abc123", "xyzSECRET"] {
      #expect(received.contains { $0.contains(secret) } == !redacting, "\(secret) sent")
      #expect(stored.contains { $0.contains(secret) } == !redacting, "\(secret) stored")
      #expect(crashSent.contains { $0.contains(secret) } == !redacting, "\(secret) sent with the crash")
    }
  }

  /// A session whose value pattern backtracks without end in Swift Regex (`(.*.*)*Q$` on a line
  /// of a's ran 654 s at 100% CPU and ignored SIGTERM, issue 35 case 3): the collector processes
  /// it at once, leaves the line without a match as it is and redacts the one that matches.
  @Test func aHostilePatternDoesNotStallTheCollector() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let child = try ChildProcess(
      ChildProcess.testChild, ["pattern-crash", crumbs, "(.*.*)*Q$"],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    #expect(child.value(after: "crashing") != nil)
    let status = child.wait(seconds: 60)
    #expect(status & 0x7f == SIGILL || status & 0x7f == SIGTRAP, "wait status \(status)")

    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let clock = ContinuousClock()
    let started = clock.now
    // Killed (SIGKILL) past the timeout: the old matcher would still be running.
    let result = try CLIProcess.run(
      ["collect", "--dir", crumbs, "--otlp", server.baseURL], timeoutSeconds: 120)
    let elapsed = clock.now - started
    #expect(result.status == 0, "after \(elapsed): stdout: \(result.stdout)\nstderr: \(result.stderr)")
    let stored = try textsStored(under: crumbs + "/reports") + textsReceived(by: server)
    let hostile = "hostile " + String(repeating: "a", count: 200)
    #expect(stored.contains { $0.contains(hostile) }, "the line without a match is kept")
    #expect(!stored.contains { $0.contains("bbbbQ") }, "the line that matches is redacted")
    #expect(stored.contains { $0.contains("\"message\":\"[redacted]\"") })
  }
}
