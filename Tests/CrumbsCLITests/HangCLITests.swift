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

  @Test func reportsListAndShowPrintAHangReport() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append("GET /slow", level: .info, type: .http)
    let store = try ReportStore(directory: directory.path)
    let thread = CrashReport.Thread(
      id: 4242, name: "event-loop-1", state: .captured, crashed: false,
      frames: [
        CrashReport.Frame(
          index: 0, address: "0x1000", module: "/app/Server", moduleOffset: "0x1000", buildID: nil,
          function: "EventLoop.run()", symbol: nil, symbolOffset: nil, file: nil, line: nil, note: nil)
      ])
    var builder = NonFatalReportBuilder(
      ring: ring,
      attributes: [
        HangFacts.watchKey: "event-loop-1", HangFacts.durationKey: "7300", HangFacts.ongoingKey: "false",
      ], appName: "server", appVersion: "1.0", attachmentSizeLimit: 1 << 20,
      symbolicator: LiveSymbolicator(options: PostMortemProcessor.defaultSymbolication))
    builder.sessionResource = [:]
    let (report, files) = builder.build(
      kind: .hang, type: HangFacts.exceptionType, message: "heartbeat \"event-loop-1\" silent for 3.0 s",
      frames: thread.frames, modules: [], thread: (4242, "event-loop-1"), threads: [thread],
      attachmentPaths: [])
    ring.close(clean: true)
    try store.store(report, attachments: files)

    let list = try CLIProcess.run(["reports", "list", "--json", "--dir", directory.path])
    #expect(list.status == 0)
    #expect(
      list.stdout.contains("\"kind\" : \"hang\"") || list.stdout.contains("\"kind\":\"hang\""),
      "\(list.stdout)")
    let shown = try CLIProcess.run(["reports", "show", report.id, "--dir", directory.path])
    #expect(shown.status == 0)
    #expect(
      shown.stdoutLines.first == "Hang — heartbeat \"event-loop-1\" silent for 3.0 s", "\(shown.stdout)")
    #expect(shown.stdoutLines.contains { $0.contains("(hang, pending)") }, "\(shown.stdout)")
    #expect(
      shown.stdoutLines.contains { $0.contains("hang") && $0.contains("event-loop-1 silent for 7.3 s") })
    #expect(
      shown.stdoutLines.contains { $0.contains("1 when the hang was seen: 1 captured") }, "\(shown.stdout)")
  }
}
