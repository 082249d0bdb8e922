import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

// Stuck operations as hangs (issue 38, point 5) and the deaths that follow one (point 3): real
// children hold an operation open in the in-flight ledger past `hangs.operationThreshold` while
// their pool and heartbeat stay healthy (OperationHangScenarios.swift). Every wait is for a line
// or an exit, with a bounded margin.
#if canImport(Glibc)
  import Glibc
#endif

private let orderTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

/// The next launch's report of `directory`'s ended session, retried while a child spawned by a
/// parallel test holds a copy of the ring's flock until its exec.
func nextLaunchReport(_ directory: TestDirectory) throws -> (PostMortemOutcome, CrashReport) {
  let rings = try RingDirectory(path: directory.path)
  let store = try ReportStore(directory: directory.path)
  var outcome = PostMortemProcessor(directory: rings, store: store).run()
  let deadline = ChildProcess.now() + 10
  while outcome.reports.isEmpty, ChildProcess.now() < deadline {
    usleep(10_000)
    outcome = PostMortemProcessor(directory: rings, store: store).run()
  }
  return (outcome, try #require(outcome.reports.first?.report, "\(outcome.problems)"))
}

/// A next launch's run over `directory` (nothing left to claim after the first).
func nextLaunchReportIfAny(_ directory: TestDirectory) throws -> PostMortemOutcome {
  PostMortemProcessor(
    directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
  ).run()
}

/// The open operations a report lists, by name.
private func operations(_ report: CrashReport) -> [String: CrashReport.OpenOperations.Operation] {
  Dictionary(
    (report.openOperations?.operations ?? []).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
}

@Suite struct OperationHangTests {
  /// Starts operation-hang in `mode`; returns the child, the worker's tid and the first
  /// operation hang's stored report, with every line read before it.
  func stuckChild(_ mode: String, _ directory: TestDirectory) throws -> (
    child: ChildProcess, tid: Int, report: StoredReport, before: [String]
  ) {
    let child = try ChildProcess(
      ChildProcess.testChild, ["operation-hang", directory.path, mode],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    var before: [String] = []
    var began: String?
    let deadline = ChildProcess.now() + 60
    while began == nil, let line = child.readLine(seconds: max(0, deadline - ChildProcess.now())) {
      if line.hasPrefix("op-hang-began ") { began = String(line.dropFirst("op-hang-began ".count)) }
      before.append(line)
    }
    let context = before.joined(separator: "\n")
    let id = try #require(began, "no operation hang: \(context)")
    try #require(id != "-", "no report stored: \(context)")
    let tid = try #require(
      before.first { $0.hasPrefix("op-thread ") }.flatMap { Int($0.dropFirst("op-thread ".count)) },
      "\(context)")
    return (child, tid, try ReportStore(directory: directory.path).load(id: id), before)
  }

  @Test func anOperationOpenPastItsThresholdIsAHangLedByItsThreadNamingItAndItsTrace() throws {
    let directory = TestDirectory()
    let (child, tid, stored, before) = try stuckChild("resume", directory)
    // The pool and the heartbeat were fine: the operation's is the only hang.
    #expect(!before.contains { $0.hasPrefix("other-hang ") }, "\(before)")
    // Forty more looks while it stays stuck (two seconds: the ring's clock is recalibrated
    // meanwhile): still one episode, neither ended nor begun again.
    let stuck = child.readLines(until: "stuck-checks 40", seconds: 60)
    #expect(stuck.last == "stuck-checks 40", "\(stuck)")
    #expect(!stuck.contains { $0.hasPrefix("op-hang-") || $0.hasPrefix("other-hang ") }, "\(stuck)")
    let report = stored.report
    #expect(report.kind == .hang)
    #expect(stored.state == .pending)
    #expect(stored.deliveryState().heldUntilUnixNano != nil)
    #expect(report.attributes[HangFacts.ongoingKey] == "true")
    #expect(report.attributes[HangFacts.watchKey] == "operation \"GET /v1/orders/:id\"")
    #expect(report.attributes[HangFacts.operationKey] == "GET /v1/orders/:id")
    #expect(report.attributes[HangFacts.operationTraceIDKey]?.text == orderTrace)
    #expect(report.attributes[HangFacts.operationSpanIDKey] == "00f067aa0ba902b7")
    #expect(report.attributes[HangFacts.operationThreadKey]?.text == String(tid))
    #expect(
      report.exceptionMessage.hasPrefix("operation \"GET /v1/orders/:id\" (trace \(orderTrace), span "),
      "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.hasSuffix("begun on thread \(tid)"), "\(report.exceptionMessage)")
    // Every thread, led by the one that began the operation, in the function it is stuck in.
    #expect(report.threadID == tid)
    #expect(report.threadName == "order-worker")
    #expect(report.frames.contains { $0.function?.contains("operationBlockedOnParent") == true })
    let threads = try #require(report.threads)
    #expect(threads.contains { $0.name == "healthy-loop" })
    #expect(threads.contains { $0.id == tid && $0.state == .captured })

    child.signal(SIGUSR1)
    let ended = try #require(child.value(after: "op-hang-ended ").flatMap(Double.init))
    #expect(ended >= 1.0)
    #expect(child.value(after: "done") != nil)
    child.wait()
    #expect(child.exitCode == 0)
    // One report for the episode (not one per look), updated with its whole age and released.
    let store = try ReportStore(directory: directory.path)
    let hangs = store.list(.pending).reports.filter { $0.report.kind == .hang }
    #expect(hangs.map(\.report.id) == [report.id])
    let final = try store.load(id: report.id)
    #expect(final.report.attributes[HangFacts.ongoingKey] == "false")
    #expect(final.report.exceptionMessage.contains("; the hang ended after "))
    #expect(final.deliveryState().heldUntilUnixNano == nil)
    let ring = try #require(before.first { $0.hasPrefix("ring ") }).dropFirst("ring ".count)
    let messages = try RingReader.read(file: String(ring)).breadcrumbs.map(\.message)
    #expect(messages.contains { $0.hasPrefix("hang: operation \"GET /v1/orders/:id\" open for ") })
    #expect(messages.contains { $0.hasPrefix("hang ended after ") })
  }

  @Test func anOperationEndedBeforeItsThresholdGivesNoReport() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["operation-quick", directory.path])
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait()
    #expect(child.exitCode == 0, "\(lines)")
    #expect(lines.contains("done"), "\(lines)")
    #expect(!lines.contains { $0.hasPrefix("op-hang-began ") || $0.hasPrefix("other-hang ") }, "\(lines)")
    #expect(lines.contains("hangs 0"), "\(lines)")
  }

  /// Point 3 (a): SIGKILL while the operation's hang report is held. The next launch names the
  /// hang and lists the operation; the held report stays for delivery.
  @Test func aKillDuringAStuckOperationListsItAndNamesTheHang() throws {
    let directory = TestDirectory()
    let (child, tid, stored, _) = try stuckChild("kill", directory)
    child.signal(SIGKILL)
    child.wait()
    #expect(child.terminatingSignal == SIGKILL)

    let (outcome, report) = try nextLaunchReport(directory)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionMessage.hasPrefix("killed during a hang of "), "\(report.exceptionMessage)")
    #expect(
      report.exceptionMessage.contains(" of operation \"GET /v1/orders/:id\" in "),
      "\(report.exceptionMessage)")
    #expect(outcome.sessions.first?.uncleanEndCause == .hang)
    let open = operations(report)
    #expect(open.keys.sorted() == ["GET /v1/orders/:id"], "\(open.keys)")
    #expect(open["GET /v1/orders/:id"]?.traceID == orderTrace)
    #expect(open["GET /v1/orders/:id"]?.threadID == UInt32(tid))
    #expect((open["GET /v1/orders/:id"]?.ageNanoseconds ?? 0) >= 1_000_000_000)
    // The hang report held while it lived: finished by the next launch and released at once,
    // its duration to the watchdog's last look (it went out after its hold, still "ongoing",
    // with the duration it had when it began).
    let held = try ReportStore(directory: directory.path).load(id: stored.report.id)
    #expect(held.state == .pending)
    #expect(held.report.attributes[HangFacts.ongoingKey] == "false")
    #expect(held.deliveryState().heldUntilUnixNano == nil)
    #expect(
      held.report.exceptionMessage.contains("; the process ended during it, still hung after "),
      "\(held.report.exceptionMessage)")
    let lasted = try #require(held.report.attributes[HangFacts.durationKey].flatMap { UInt64($0.text) })
    let began = try #require(stored.report.attributes[HangFacts.durationKey].flatMap { UInt64($0.text) })
    #expect(lasted >= began && lasted >= 1000, "\(began) ms at the start, \(lasted) ms at the end")
    // A second run (the collector racing the next launch) changes nothing.
    _ = try nextLaunchReportIfAny(directory)
    #expect(try ReportStore(directory: directory.path).load(id: stored.report.id).report == held.report)
  }

  /// The thread that began a stuck operation ended (async code, a worker gone): the report
  /// says so and leads with the watchdog's own thread rather than a wrong one.
  @Test func aStuckOperationWhoseThreadEndedSaysSo() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["operation-hang", directory.path, "orphan"])
    defer {
      child.signal(SIGKILL)
      child.wait()
    }
    let tid = try #require(child.value(after: "orphan-thread "))
    let id = try #require(child.value(after: "op-hang-began "))
    try #require(id != "-")
    let report = try ReportStore(directory: directory.path).load(id: id).report
    #expect(report.attributes[HangFacts.operationKey] == "POST /v1/orphan")
    #expect(
      report.exceptionMessage.hasSuffix(
        "begun on thread \(tid) (a thread not running any more: the report leads with the watchdog's)"),
      "\(report.exceptionMessage)")
    #expect(report.threadName == "crumbs.watchdog")
  }

  /// Point 3 (a), a supervisor's watchdog: systemd's `WatchdogSec` ends a service with SIGABRT
  /// (its default `WatchdogSignal`). The crash handler records it: a crash report during the
  /// hang, listing the stuck operation, begun on another thread than the one the signal hit.
  @Test func aWatchdogsSIGABRTDuringAStuckOperationIsACrashListingIt() throws {
    let directory = TestDirectory()
    let (child, tid, _, _) = try stuckChild("kill", directory)
    child.signal(SIGABRT)
    child.wait()
    #expect(child.terminatingSignal == SIGABRT)

    let (_, report) = try nextLaunchReport(directory)
    #expect(report.kind == .crash, "\(report.exceptionType): \(report.exceptionMessage)")
    #expect(report.exceptionType == "SIGABRT", "\(report.exceptionMessage)")
    #expect(
      report.evidence.contains {
        $0.hasPrefix("crashed during a hang of ") && $0.contains(" of operation \"GET /v1/orders/:id\" in ")
      }, "\(report.evidence)")
    let open = operations(report)
    #expect(open.keys.sorted() == ["GET /v1/orders/:id"], "\(open.keys)")
    #expect(open["GET /v1/orders/:id"]?.threadID == UInt32(tid))
    #expect(open["GET /v1/orders/:id"]?.traceID == orderTrace)
  }

  /// Point 3 (b): SIGTERM taken by the app, whose shutdown waits for the stuck operation and is
  /// SIGKILLed: a shutdown that did not finish, listing the operation it waited for.
  @Test func aShutdownThatNeverFinishedListsTheOperationsItWaitedFor() throws {
    let directory = TestDirectory()
    let (child, tid, _, before) = try stuckChild("term", directory)
    #expect(before.contains("ready"), "\(before)")
    child.signal(SIGTERM)
    #expect(child.value(after: "stopping") != nil)
    child.signal(SIGKILL)
    child.wait()
    #expect(child.terminatingSignal == SIGKILL)

    let (outcome, report) = try nextLaunchReport(directory)
    #expect(report.exceptionType == "ShutdownTimeout", "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.hasPrefix("shutdown did not finish"), "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.contains("during a hang of "), "\(report.exceptionMessage)")
    #expect(outcome.sessions.first?.uncleanEndCause == .shutdownTimeout)
    let open = operations(report)
    #expect(open.keys.sorted() == ["GET /v1/orders/:id"], "\(open.keys)")
    #expect(open["GET /v1/orders/:id"]?.threadID == UInt32(tid))
    #expect(open["GET /v1/orders/:id"]?.traceID == orderTrace)
  }
}

@Suite struct OperationOOMTests {
  /// Point 3 (c): the OOM killer, in a small memory cgroup; the next launch's out-of-memory
  /// report lists the operations open when it struck.
  @Test(
    .enabled(
      if: SmallMemoryCgroup.available,
      "needs to create a child memory cgroup with a limit (root and a writable memory controller)"))
  func anOOMKillListsTheOpenOperations() throws {
    let limit = 96 << 20
    let cgroup = try SmallMemoryCgroup(limit: limit)
    defer { cgroup.remove() }
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["ledger-oom", directory.path, cgroup.directory, String(limit)],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let tid = try #require(child.value(after: "op-thread ").flatMap(UInt32.init))
    #expect(child.value(after: "ready") != nil)
    child.wait(seconds: 60)
    #expect(child.terminatingSignal == SIGKILL, "the OOM killer (exit \(child.exitCode))")

    let (_, report) = try nextLaunchReport(directory)
    #expect(report.exceptionType == "OutOfMemory", "\(report.exceptionMessage)")
    let open = operations(report)
    #expect(open.keys.sorted() == ["GET /v1/report", "POST /v1/upload"], "\(open.keys)")
    #expect(open["POST /v1/upload"]?.threadID == tid)
    #expect(open["POST /v1/upload"]?.traceID == "5bf92f3577b34da6a3ce929d0e0e4736")
  }
}

/// The rule the watchdog follows for operations, with explicit times (no threads, no clocks).
@Suite struct OperationStallsTests {
  static let second: UInt64 = 1_000_000_000

  func operation(startingAt start: UInt64, thread: UInt32 = 7) -> OpenOperation {
    var operation = OpenOperation(
      name: "GET /x", kind: .server, trace: nil, parentSpanID: nil, startWallNanoseconds: start,
      startMonotonicNanoseconds: start, threadID: thread, attributes: [])
    operation.startTicks = start * 3
    return operation
  }

  @Test func oneEpisodePerStuckOperationEndedWhenItLeavesTheLedger() {
    let s = Self.second
    var stalls = OperationStalls()
    let stuck = operation(startingAt: 10 * s)
    let quick = operation(startingAt: 10 * s, thread: 8)
    func look(_ open: [OpenOperation], at now: UInt64, complete: Bool = true) -> (began: Int, ended: [UInt64])
    {
      let changes = stalls.observe(open, complete: complete, now: now, threshold: 2 * s, longest: 3 * s)
      return (changes.began.count, changes.ended.map(\.age))
    }
    #expect(look([stuck, quick], at: 10 * s).began == 0)
    #expect(look([stuck], at: 11 * s).began == 0)
    #expect(look([stuck], at: 12 * s).began == 1)
    #expect(look([stuck], at: 13 * s).began == 0, "not once per look")
    // Read again after the ring recalibrated its clock: the same operation, its times moved.
    var recalibrated = stuck
    recalibrated.startMonotonicNanoseconds += 3
    #expect(look([recalibrated], at: 13 * s + s / 4) == (0, []))
    // A read that could not see every entry ends nothing: the entry may only have been busy.
    #expect(look([], at: 13 * s + s / 2, complete: false).ended.isEmpty)
    #expect(look([], at: 14 * s).ended == [4 * s - 3], "its age from its start as last read")
    #expect(stalls.stuck.isEmpty)
  }

  @Test func aLateLookDoesNotCountTheTimeTheWatchdogDidNotSee() {
    let s = Self.second
    var stalls = OperationStalls()
    let open = [operation(startingAt: 0)]
    // First look at 10 s: the operation's age counts from there.
    #expect(stalls.observe(open, complete: true, now: 10 * s, threshold: 2 * s, longest: 3 * s).began.isEmpty)
    #expect(stalls.observe(open, complete: true, now: 11 * s, threshold: 2 * s, longest: 3 * s).began.isEmpty)
    // The process was stopped for 19 s: the look at 30 s is late and counts from itself.
    #expect(stalls.observe(open, complete: true, now: 30 * s, threshold: 2 * s, longest: 3 * s).began.isEmpty)
    let began = stalls.observe(open, complete: true, now: 32 * s, threshold: 2 * s, longest: 3 * s).began
    #expect(began.count == 1)
    #expect(began.first?.age == 32 * s, "the age reported is the operation's own")
  }

  @Test func theNextLookIsDueWhenTheOldestOperationReachesTheThreshold() {
    let s = Self.second
    var stalls = OperationStalls()
    let open = [operation(startingAt: 10 * s)]
    _ = stalls.observe(open, complete: true, now: 10 * s, threshold: 2 * s, longest: 3 * s)
    let wait = stalls.wait(open, now: 11 * s, threshold: 2 * s, resolution: s / 10, longest: 3 * s)
    #expect(wait == s)
    #expect(stalls.wait([], now: 11 * s, threshold: 2 * s, resolution: s / 10, longest: 3 * s) == 3 * s)
  }
}
