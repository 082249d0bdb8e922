import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// Servers and command-line tools fork helpers. A forked child shares its parent's ring and crash
/// record mappings and its descriptors, flock included; none of that may make the parent's
/// session say what the child did. Each test runs a real test child that forks, then processes
/// what it left as the next launch would.
@Suite("Forked children")
struct ForkTests {
  /// `key value` lines → [key: value] (the last one wins).
  func facts(_ lines: [String]) -> [String: String] {
    var facts: [String: String] = [:]
    for line in lines {
      guard let space = line.firstIndex(of: " ") else { continue }
      facts[String(line[..<space])] = String(line[line.index(after: space)...])
    }
    return facts
  }

  /// The session a ring file belongs to: its name without `.ring`.
  func session(ofRing path: String?) throws -> String {
    let name = try #require(path?.split(separator: "/").last)
    return String(name.prefix { $0 != "." })
  }

  /// Processes what the test child left, as the next launch would; no problems expected.
  func processLeftovers(_ directory: TestDirectory) throws -> PostMortemOutcome {
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    #expect(outcome.problems.isEmpty, "\(outcome.problems)")
    return outcome
  }

  /// The report stored for `session`; `missing` says what its absence means.
  func report(for session: String, in outcome: PostMortemOutcome, _ missing: String) throws -> CrashReport {
    try #require(outcome.reports.first { $0.report.sessionID == session }?.report, "\(missing)")
  }

  /// Starts the test child's `scenario` in `directory`, without the backtracer, and without fork
  /// handlers when asked.
  func start(_ scenario: String, in directory: TestDirectory, withoutForkHandlers: Bool, extra: [String] = [])
    throws -> ChildProcess
  {
    try ChildProcess(
      ChildProcess.testChild, [scenario, directory.path] + extra,
      environment: ["SWIFT_BACKTRACE": "enable=no"].merging(
        withoutForkHandlers ? ["CRUMBS_TEST_RAW_FORK": "1"] : [:]
      ) { $1 },
      standardError: .file(directory.file("stderr.txt")))
  }

  /// Runs `fork-child-crash`: the parent exits 0 after its child died by SIGSEGV, and the
  /// parent's crash record says no crash. Returns the facts printed and the parent's session.
  func runChildCrash(in directory: TestDirectory, withoutForkHandlers: Bool) throws -> (
    facts: [String: String], lines: [String], parentSession: String
  ) {
    let child = try start("fork-child-crash", in: directory, withoutForkHandlers: withoutForkHandlers)
    let lines = child.readLines(until: "done", seconds: 60)
    child.wait(seconds: 60)
    let facts = facts(lines)
    #expect(child.exitCode == 0, "\(lines)")
    let childStatus = try #require(facts["child-status"].flatMap { Int32($0) }, "\(lines)")
    #expect(childStatus & 0x7f == SIGSEGV, "the child died by its own crash: \(lines)")
    let parentRecord = try CrashRecord.read(file: try #require(facts["record"]))
    #expect(parentRecord.status == .noCrash, "the child wrote its parent's crash record")
    return (facts, lines, try session(ofRing: facts["ring"]))
  }

  @Test("a forked child's crash is its own report, linked to its parent; the parent's session ends clean")
  func childCrash() throws {
    let directory = TestDirectory()
    // The parent's crash record is never written: the child has one of its own.
    let (facts, lines, parentSession) = try runChildCrash(in: directory, withoutForkHandlers: false)

    let outcome = try processLeftovers(directory)
    #expect(outcome.reports.count == 1, "\(outcome.reports.map(\.report.sessionID))")
    let report = try #require(outcome.reports.first?.report)
    #expect(report.kind == .crash)
    #expect(report.exceptionType == "SIGSEGV")
    #expect(report.sessionID != parentSession, "the child's crash was reported as the parent's session")
    // The child's BreadcrumbRing and CrashHandler named the child's own files.
    #expect(try session(ofRing: facts["child-ring"]) == report.sessionID, "\(lines)")
    #expect(facts["child-record"] == CrashHandler.recordPath(forRing: facts["child-ring"] ?? ""))
    #expect(report.resource["process.pid"] == facts["child-pid"], "\(report.resource)")
    #expect(report.threadID == facts["child-thread"].flatMap { Int($0) })
    #expect(report.resource["crumbs.session.parent_id"] == parentSession, "\(report.resource)")
    #expect(report.resource["process.parent_pid"] == facts["pid"], "\(report.resource)")
    #expect(report.breadcrumbs.lastMessage == "child about to crash")

    // The parent's own session ended as it did: cleanly.
    let parent = outcome.sessions.first { $0.sessionID.description == parentSession }
    #expect(parent?.end == .clean, "\(outcome.sessions.map { ($0.sessionID, $0.end) })")
    #expect(!outcome.hasCrashedInLastSession)
    #expect(outcome.forkedSessions.map(\.sessionID.description) == [report.sessionID])
  }

  @Test("a child forked without the fork handlers never writes its parent's crash record or ends its session")
  func childCrashWithoutForkHandlers() throws {
    let directory = TestDirectory()
    let (facts, _, parentSession) = try runChildCrash(in: directory, withoutForkHandlers: true)
    #expect(facts["child-ring"] == facts["ring"], "no fork handler ran: the child shares the ring")

    // Nothing of the child's crash could be recorded (it had no files of its own); the parent's
    // session still ends as it did.
    let outcome = try processLeftovers(directory)
    #expect(outcome.reports.isEmpty, "\(outcome.reports.map(\.report.exceptionMessage))")
    #expect(outcome.sessions.map(\.sessionID.description) == [parentSession])
    #expect(outcome.sessions.first?.end == .clean)
  }

  @Test(
    "a forked child's exit() leaves its parent's ring running: a later kill -9 is reported",
    arguments: [false, true])
  func childExit(withoutForkHandlers: Bool) throws {
    let directory = TestDirectory()
    let child = try start("fork-child-exit", in: directory, withoutForkHandlers: withoutForkHandlers)
    let lines = child.readLines(until: "crashing", seconds: 60)
    let facts = facts(lines)
    #expect(facts["child-status"] == "0", "the child exited 0: \(lines)")
    child.signal(SIGKILL)
    child.wait(seconds: 60)
    #expect(child.terminatingSignal == SIGKILL)
    let parentSession = try session(ofRing: facts["ring"])

    let outcome = try processLeftovers(directory)
    let report = try report(
      for: parentSession, in: outcome,
      "no report for the killed parent: \(outcome.sessions.map { ($0.sessionID, $0.end) })")
    #expect(report.kind == .abnormalTermination)
    #expect(report.resource["process.pid"] == facts["pid"])
    // The child exited cleanly: nothing to report about it.
    #expect(outcome.reports.count == 1)
  }

  @Test(
    "a forked worker that outlives its crashed parent does not hide the parent's crash",
    arguments: [false, true])
  func liveWorker(withoutForkHandlers: Bool) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "fork-worker", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: withoutForkHandlers ? ["CRUMBS_TEST_RAW_FORK": "1"] : [:])
    let worker = try #require(run.facts["worker"].flatMap { pid_t($0) }, "\(run.lines)")
    defer { kill(worker, SIGKILL) }
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    #expect(kill(worker, 0) == 0, "the worker is still running")
    let parentSession = try session(ofRing: run.ringPath)

    let outcome = try processLeftovers(directory)
    let report = try report(
      for: parentSession, in: outcome, "the parent's crash is not reported while its worker lives")
    #expect(report.kind == .crash)
    #expect(report.exceptionType == "SIGSEGV")
    #expect(report.resource["process.pid"] == run.facts["pid"])
    #expect(report.threadID == run.facts["thread"].flatMap { Int($0) })
    // The worker is alive: its own session (if it has one) is not a leftover yet.
    #expect(outcome.reports.count == 1)
  }

  @Test(
    "a parent that forks and execs 200 times keeps rings/ bounded while it runs; a crashed child is still reported"
  )
  func forkExecLoopStaysBounded() throws {
    let directory = TestDirectory()
    let child = try start("fork-exec-loop", in: directory, withoutForkHandlers: false, extra: ["200"])
    defer { child.signal(SIGKILL) }
    // Beyond the child's own 300 s wait for its reaper thread (ForkScenarios.swift).
    let lines = child.readLines(until: "looped", seconds: 420)
    let facts = facts(lines)
    let worker = facts["worker"].flatMap { pid_t($0) }
    defer { if let worker { kill(worker, SIGKILL) } }
    #expect(lines.last == "looped", "\(lines)")
    // Counted while the parent still runs (it waits to be killed).
    let rings = directory.path + "/rings"
    let names = try Syscall.directoryEntries(rings)
    let bytes = names.reduce(0) { $0 + (Syscall.status(ofPath: rings + "/" + $1)?.size ?? 0) }
    // The parent's, the crashed child's and the running worker's ring and record, and at most
    // `interval` ended children's (two files each); before the reaper: 405 files, 309 MB.
    let bound = 6 + 2 * Int(ForkedSessionReaper.interval)
    #expect(names.count <= bound, "\(names.count) files in rings/: \(names.sorted())")
    #expect(bytes <= bound * (3 << 20) / 2, "\(bytes) bytes in rings/")
    // The worker still runs: its files stay.
    let writers = names.filter { $0.hasSuffix(".ring") }.compactMap {
      try? RingReader.read(file: rings + "/" + $0).header.pid
    }
    #expect(worker != nil && writers.contains(worker!), "the running worker's ring was removed: \(writers)")
    child.signal(SIGKILL)
    child.wait(seconds: 60)

    // The crashed child, forked before the loop, survived every round: reported as today.
    let outcome = try processLeftovers(directory)
    let crashes = outcome.reports.filter { $0.report.kind == .crash }
    #expect(crashes.count == 1, "\(outcome.reports.map(\.report.exceptionMessage))")
    #expect(crashes.first?.report.exceptionType == "SIGSEGV")
    #expect(crashes.first?.report.resource["process.pid"] == facts["crashed-child"])
  }

  @Test(
    "fork() from a signal handler: the parent's fork handler allocates nothing, and the reaper thread removes the children's files"
  )
  func forkFromSignalHandler() throws {
    // Issue 35 case 14: the fork handler used to run the reaping (Swift, malloc, a mutex,
    // a directory listing) on every 8th fork, also inside a signal handler's fork().
    let directory = TestDirectory()
    let forks = 64
    let child = try start(
      "fork-in-signal-handler", in: directory, withoutForkHandlers: false, extra: ["\(forks)"])
    defer { child.signal(SIGKILL) }
    // Bounded: a fork handler that deadlocks in the signal handler never prints.
    let lines = child.readLines(until: "reaped", seconds: 120)
    let facts = facts(lines)
    #expect(facts["allocations"] == "0", "allocations inside fork() in the parent: \(lines)")
    #expect(lines.last == "reaped", "\(lines)")
    // Counted while the parent still runs: every child had ended before the reaper's round,
    // so only the parent's own ring is left.
    let names = try Syscall.directoryEntries(directory.path + "/rings")
    #expect(names.filter { $0.hasSuffix(".ring") }.count == 1, "\(names.count) files: \(names.sorted())")
    child.signal(SIGKILL)
    child.wait(seconds: 60)
  }
}
