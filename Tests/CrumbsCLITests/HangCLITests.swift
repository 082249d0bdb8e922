// HangCLITests.swift — the hang going on as the command line prints it (issue 23, "killed while
// hung"): `crumbs ring dump` names it in its summary line, and `crumbs reports show` prints the
// next launch's report that says the session was killed during it. The CLI run as a process.

import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct HangCLITests {
  @Test func ringDumpAndReportsShowNameTheHang() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    let path = ring.path
    let since: UInt64 = 1_767_225_600_000_000_000  // 2026-01-01T00:00:00Z
    ring.append("GET /slow", level: .info, type: .http)
    ring.recordHang(watch: "event-loop-1", sinceWallNanoseconds: since, frames: "EventLoop.run() ← main")
    ring.refreshHang(seenWallNanoseconds: since + 31_000_000_000)
    ring.close(clean: false)

    let dump = try CLIProcess.run(["ring", "dump", path])
    #expect(dump.status == 0)
    #expect(
      dump.stderrLines.first?.hasSuffix(
        "; during a hang of 31 s of event-loop-1 in EventLoop.run() ← main (silent since "
          + "2026-01-01T00:00:00.000Z, still stalled at 2026-01-01T00:00:31.000Z)") == true,
      "\(dump.stderr)")

    let processor = PostMortemProcessor(directory: rings, store: try ReportStore(directory: directory.path))
    var outcome = processor.run()
    // A test running in parallel may hold the ring's flock for a moment (see PostMortemTests.run).
    let deadline = ChildProcess.now() + 10
    while outcome.reports.isEmpty, ChildProcess.now() < deadline { outcome = processor.run() }
    let stored = try #require(outcome.reports.first)
    let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
    #expect(shown.status == 0)
    #expect(
      shown.stdoutLines.first
        == "AbnormalTermination — killed during a hang of 31 s of event-loop-1 in EventLoop.run() ← main: the "
        + "process ended without a crash record and without a clean exit (SIGKILL, the OOM killer, or power loss)",
      "\(shown.stdout)")
    #expect(
      shown.stdoutLines.contains {
        $0.contains("evidence") && $0.contains("killed during a hang of 31 s of event-loop-1")
      }, "\(shown.stdout)")
  }
}
