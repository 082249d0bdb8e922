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
}
