// HangReportTests.swift — the next launch after a session that ended during a hang its watchdog
// had recorded in the ring header (issue 23, "killed while hung"): the abnormal-termination
// report says "killed during a hang of 31 s of W in F", a terminating signal during a hang is
// reported (not taken for an orderly stop), a crash names the hang as evidence, and damaged hang
// fields are named. The same with real children: CrumbsCrashScenarioTests' HangEndToEndTests.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct HangReportTests {
  static let watch = "event-loop-1"
  static let frames = "EventLoop.run() ← Thread.main"
  static let since: UInt64 = 1_767_225_600_000_000_000  // 2026-01-01T00:00:00Z

  /// Leaves a ring whose session had recorded a 31-s hang of `watch` (unless `hang` is false),
  /// then ended as `end` does (it closes the ring without marking it clean).
  func leaveRing(
    in directory: TestDirectory, hang: Bool = true,
    _ end: (BreadcrumbRing) -> Void = { $0.close(clean: false) }
  ) throws -> RingDirectory {
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append("GET /slow", level: .info, type: .http)
    if hang {
      ring.recordHang(watch: Self.watch, sinceWallNanoseconds: Self.since, frames: Self.frames)
      ring.refreshHang(seenWallNanoseconds: Self.since + 31_400_000_000)
    }
    end(ring)
    return rings
  }

  /// The next launch, until it has seen the one session (bounded): a child spawned by a test
  /// running in parallel holds a copy of the ring's flock from its fork until its exec, so a ring
  /// closed at that moment looks live for a moment (see PostMortemTests.run).
  func process(_ rings: RingDirectory, _ directory: TestDirectory) throws -> PostMortemOutcome {
    let processor = PostMortemProcessor(directory: rings, store: try ReportStore(directory: directory.path))
    var outcome = processor.run()
    let deadline = ChildProcess.now() + 10
    while outcome.sessions.isEmpty, ChildProcess.now() < deadline { outcome = processor.run() }
    return outcome
  }

  static let evidence =
    "during a hang of 31 s of event-loop-1 in EventLoop.run() ← Thread.main (silent since "
    + "2026-01-01T00:00:00.000Z, still stalled at 2026-01-01T00:00:31.400Z, the watchdog's last look)"

  @Test func aSessionKilledDuringAHangIsReportedAsSuch() throws {
    let directory = TestDirectory()
    let outcome = try process(try leaveRing(in: directory), directory)
    #expect(outcome.lastSession?.end == .abnormalTermination)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionType == "AbnormalTermination")
    #expect(
      report.exceptionMessage
        == "killed during a hang of 31 s of event-loop-1 in EventLoop.run() ← Thread.main: the process ended "
        + "without a crash record and without a clean exit (SIGKILL, the OOM killer, or power loss)")
    #expect(report.evidence == ["killed " + Self.evidence])
    #expect(report.attributes[HangFacts.watchKey] == "event-loop-1")
    #expect(report.attributes[HangFacts.durationKey] == "31400")
    #expect(report.attributes[HangFacts.sinceKey] == "2026-01-01T00:00:00.000Z")
    #expect(report.attributes[HangFacts.framesKey] == .string(Self.frames))
    #expect(report.damage.isEmpty)
  }

  /// The OOM facts stay, and the hang is said after them.
  @Test func outOfMemoryEvidenceIsKeptBesideTheHang() throws {
    let directory = TestDirectory()
    let rings = try leaveRing(in: directory) { ring in
      ring.markMemoryWarning()
      ring.close(clean: false)
    }
    let report = try #require(try process(rings, directory).lastSessionCrashReport)
    #expect(report.exceptionType == "OutOfMemory")
    #expect(
      report.exceptionMessage
        == "likely out of memory: the session recorded memory-pressure warnings; killed during a hang of 31 s "
        + "of event-loop-1 in EventLoop.run() ← Thread.main")
    #expect(report.evidence == ["the session recorded memory-pressure warnings", "killed " + Self.evidence])
  }

  /// A liveness probe's SIGTERM during a hang: not an orderly stop, a report that says so.
  @Test func aTerminatingSignalDuringAHangIsReported() throws {
    let directory = TestDirectory()
    let rings = try leaveRing(in: directory) { $0.close(terminatedBy: SIGTERM) }
    let outcome = try process(rings, directory)
    let session = try #require(outcome.lastSession)
    #expect(session.end == .abnormalTermination)
    #expect(session.endSignal == SIGTERM)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionType == "AbnormalTermination")
    #expect(
      report.exceptionMessage
        == "killed by SIGTERM during a hang of 31 s of event-loop-1 in EventLoop.run() ← Thread.main")
    #expect(report.exceptionStacktrace == "(no stack: the process was stopped by SIGTERM)")
    #expect(report.evidence == ["killed by SIGTERM " + Self.evidence])
    #expect(report.attributes[HangFacts.watchKey] == "event-loop-1")
  }

  /// Without a hang a terminating signal stays an orderly stop: no report, as before.
  @Test func aTerminatingSignalWithoutAHangStaysUnreported() throws {
    let directory = TestDirectory()
    let rings = try leaveRing(in: directory, hang: false) { $0.close(terminatedBy: SIGTERM) }
    let outcome = try process(rings, directory)
    #expect(outcome.lastSession?.end == .terminatedBySignal)
    #expect(outcome.lastSession?.endSignal == SIGTERM)
    #expect(outcome.reports.isEmpty)
  }

  @Test func aHangThatEndedIsNotMentioned() throws {
    let directory = TestDirectory()
    let rings = try leaveRing(in: directory) { ring in
      ring.clearHang()
      ring.close(clean: false)
    }
    let report = try #require(try process(rings, directory).lastSessionCrashReport)
    #expect(!report.exceptionMessage.contains("hang"))
    #expect(report.evidence.isEmpty)
    #expect(report.attributes[HangFacts.watchKey] == nil)
  }

  /// A ring marked crashed whose record is missing: the hang is evidence, "crashed during".
  @Test func aCrashWithoutItsRecordNamesTheHang() throws {
    let directory = TestDirectory()
    let rings = try leaveRing(in: directory) { ring in
      crumbs_ring_set_state(ring.handle, UInt32(CRUMBS_RING_CRASHED.rawValue))
      ring.close(clean: false)
    }
    let report = try #require(try process(rings, directory).lastSessionCrashReport)
    #expect(report.kind == .crash)
    #expect(report.exceptionMessage == "the crash handler ran but its record is missing or damaged")
    #expect(report.evidence == ["crashed " + Self.evidence])
    #expect(report.attributes[HangFacts.durationKey] == "31400")
  }

  /// Damaged hang fields: named in the report's damage; the report is made without the hang.
  @Test func damagedHangFieldsAreNamedInTheReport() throws {
    let directory = TestDirectory()
    var path = ""
    let rings = try leaveRing(in: directory) { ring in
      path = ring.path
      ring.close(clean: false)
    }
    var bytes = try Syscall.readFile(path)
    bytes[MemoryLayout<crumbs_ring_header>.offset(of: \.hang_watch)!] = 0xFF
    try Syscall.writeFileAtomically(path, bytes)
    let report = try #require(try process(rings, directory).lastSessionCrashReport)
    #expect(!report.exceptionMessage.contains("hang"))
    #expect(
      report.damage == [
        "the ring's record of a hang going on is damaged and was left out: its watch name is not valid UTF-8"
      ])
    #expect(report.attributes[HangFacts.watchKey] == nil)
  }
}
