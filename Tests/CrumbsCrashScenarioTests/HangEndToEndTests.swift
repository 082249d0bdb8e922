// HangEndToEndTests.swift — issue 23's "killed while hung", end to end: a real child records a
// hang in its ring header the way the client's watchdog does (the test child's hang scenarios),
// tells this test through its stdout pipe, and is SIGKILLed, SIGTERMed or crashes; the next
// launch (PostMortemProcessor, as in PostMortemTests) makes a report that names the hang. No
// sleeps: every wait is on the child's pipe or its exit, bounded.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Killed while hung, end to end")
struct HangEndToEndTests {
  static let watch = "event-loop-1"
  static let frames = "EventLoop.run() ← main"

  /// Starts the hang-recorded scenario, waits for `ready` on its pipe, ends it with `signal`, and
  /// returns the report the next launch makes of what it left (nil when none).
  func report(then mode: String, ready: String, signal: Int32) throws -> CrashReport? {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["hang-recorded", directory.path, Self.watch, Self.frames, mode])
    let ring = try #require(child.value(after: "ring "))
    #expect(child.value(after: "since ") != nil)
    #expect(child.readLine() == ready)
    child.signal(signal)
    child.wait()
    #expect(child.terminatingSignal == signal)
    #expect(
      try RingReader.read(file: ring).header.state == (signal == SIGKILL ? .running : .terminatedBySignal))
    return try crashReport(leftIn: directory)?.report
  }

  @Test func aChildKilledDuringAHangIsReportedAsKilledDuringIt() throws {
    let report = try #require(try report(then: "wait", ready: "hung", signal: SIGKILL))
    #expect(report.kind == .abnormalTermination)
    #expect(
      report.exceptionMessage.hasPrefix(
        "killed during a hang of 31 s of event-loop-1 in EventLoop.run() ← main"),
      "\(report.exceptionMessage)")
    #expect(report.evidence.contains { $0.hasPrefix("killed during a hang of 31 s of event-loop-1") })
    #expect(report.attributes["crumbs.hang.watch"] == .string(Self.watch))
    #expect(report.attributes["crumbs.hang.duration_ms"] == "31000")
    #expect(report.attributes["crumbs.hang.frames"] == .string(Self.frames))
  }

  @Test func aChildKilledAfterItsHangEndedSaysNothingOfIt() throws {
    let report = try #require(try report(then: "cleared", ready: "cleared", signal: SIGKILL))
    #expect(report.kind == .abnormalTermination)
    #expect(!report.exceptionMessage.contains("hang"), "\(report.exceptionMessage)")
    #expect(!report.evidence.contains { $0.contains("hang") })
    #expect(report.attributes["crumbs.hang.watch"] == nil)
  }

  /// A liveness probe's SIGTERM (the grace period before its SIGKILL) during a hang.
  @Test func aChildStoppedBySIGTERMDuringAHangIsReported() throws {
    let report = try #require(try report(then: "wait", ready: "hung", signal: SIGTERM))
    #expect(report.kind == .abnormalTermination)
    #expect(
      report.exceptionMessage
        == "killed by SIGTERM during a hang of 31 s of event-loop-1 in EventLoop.run() ← main")
  }

  @Test func aChildStoppedBySIGTERMAfterItsHangEndedIsAnOrderlyStop() throws {
    #expect(try report(then: "cleared", ready: "cleared", signal: SIGTERM) == nil)
  }

  @Test func aChildThatCrashesDuringAHangNamesItAsEvidence() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "hang-then-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    let report = try #require(try crashReport(leftIn: directory)?.report)
    #expect(report.kind == .crash)
    #expect(report.exceptionType == "SIGSEGV")
    #expect(
      report.evidence.contains {
        $0.hasPrefix("crashed during a hang of 31 s of request-loop in RequestLoop.spin() ← main")
      }, "\(report.evidence)")
    #expect(report.attributes["crumbs.hang.watch"] == "request-loop")
  }
}
