import CrumbsDelivery
import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

// Hang detection with real children: a stalled heartbeat, a starved concurrency pool, and a
// saturated but healthy process. The child prints the watchdog's events; SIGUSR1 tells it to go
// on. No waiting on time: every wait is for a line, with a bounded margin.
#if canImport(Glibc)
  import Glibc
#endif

/// A hang child's start: its ring, then the first hang's watch and stored report.
private struct HangChild {
  let child: ChildProcess
  let ringPath: String
  let store: ReportStore

  init(_ scenario: String, _ directory: TestDirectory) throws {
    child = try ChildProcess(ChildProcess.testChild, [scenario, directory.path])
    ringPath = try #require(child.value(after: "ring "))
    store = try ReportStore(directory: directory.path)
  }

  /// The watch and report id of the next "hang-began" line.
  func began() throws -> (watch: String, report: StoredReport) {
    let line = try #require(child.value(after: "hang-began ", seconds: 60))
    let fields = line.split(separator: " ").map(String.init)
    try #require(fields.count == 2 && fields[1] != "-", "no report stored: \(line)")
    return (fields[0], try store.load(id: fields[1]))
  }

  /// Seconds of the next "hang-ended" line of `watch`.
  func ended(_ watch: String) throws -> Double {
    let line = try #require(child.value(after: "hang-ended \(watch) ", seconds: 60))
    return try #require(Double(line))
  }
}

@Suite struct HangTests {
  @Test func aStalledHeartbeatGivesOneReportNamingItWithItsDurationAndTheProcessExitsZero() throws {
    let directory = TestDirectory()
    let hang = try HangChild("hang-heartbeat", directory)
    let (watch, stored) = try hang.began()
    #expect(watch == "stall-loop")
    // Stored while the child still runs, and held from delivery while the hang goes on.
    #expect(stored.state == .pending)
    #expect(stored.report.kind == .hang)
    #expect(stored.report.attributes[HangFacts.watchKey] == "stall-loop")
    #expect(stored.report.attributes[HangFacts.ongoingKey] == "true")
    #expect(stored.deliveryState().heldUntilUnixNano != nil)
    #expect(stored.report.exceptionMessage.contains("heartbeat \"stall-loop\" silent for"))
    // Every thread, captured while the child ran on; the report leads with the stalled loop's
    // thread, in the function it is blocked in.
    #expect(stored.report.threadName == "stall-loop")
    #expect(stored.report.frames.contains { $0.function?.contains("stallLoopBlockedOnParent") == true })
    let threads = try #require(stored.report.threads)
    #expect(threads.contains { $0.name == "crumbs.watchdog" && $0.state == .requesting })
    #expect(threads.contains { $0.name == "stall-loop" && $0.state == .captured })
    #expect(
      stored.report.attributes[HangFacts.framesKey]?.text.contains("stallLoopBlockedOnParent()") == true)

    hang.child.signal(SIGUSR1)
    let seconds = try hang.ended("stall-loop")
    #expect(seconds >= 1.0)
    #expect(hang.child.readLine() == "done")
    hang.child.wait()
    #expect(hang.child.exitCode == 0)

    // One report, updated with the whole duration and released to delivery.
    let hangs = hang.store.list(.pending).reports.filter { $0.report.kind == .hang }
    #expect(hangs.count == 1)
    let final = try hang.store.load(id: stored.report.id)
    #expect(final.report.attributes[HangFacts.ongoingKey] == "false")
    let duration = try #require(final.report.attributes[HangFacts.durationKey].flatMap { UInt64($0.text) })
    #expect(duration >= 1000)
    #expect(
      final.report.exceptionMessage.contains("the hang ended after \(HangFacts.text(UInt64(seconds * 1e9)))"))
    #expect(final.deliveryState().heldUntilUnixNano == nil)
    // The trail says when it began and when it ended.
    let messages = try RingReader.read(file: hang.ringPath).breadcrumbs.map(\.message)
    #expect(messages.contains { $0.hasPrefix("hang: stall-loop silent for") })
    #expect(messages.contains { $0.hasPrefix("hang ended after") })
  }

  @Test func tasksBlockingTheCooperativePoolGiveAHangReportWhileTheChildRuns() throws {
    let directory = TestDirectory()
    let hang = try HangChild("hang-pool", directory)
    let (watch, stored) = try hang.began()
    #expect(watch == HangWatchdog.poolWatchName)
    #expect(stored.report.kind == .hang)
    #expect(stored.report.exceptionMessage.contains("the concurrency pool ran no job"))
    // The blocking function is in a pool thread's stack, and the report leads with such a thread.
    let threads = try #require(stored.report.threads)
    #expect(
      threads.contains { thread in
        thread.frames.contains { $0.function?.contains("poolBlockedOnParent") == true }
      })
    #expect(stored.report.frames.contains { $0.function?.contains("poolBlockedOnParent") == true })
    hang.child.signal(SIGUSR1)
    #expect(try hang.ended(HangWatchdog.poolWatchName) >= 1.0)
    #expect(hang.child.readLine() == "done")
    hang.child.wait()
    #expect(hang.child.exitCode == 0)
  }

  @Test func aStallThenSIGKILLIsReportedByTheNextLaunchAsKilledDuringAHangOfTheWatch() throws {
    let directory = TestDirectory()
    let hang = try HangChild("hang-heartbeat-kill", directory)
    let (watch, stored) = try hang.began()
    #expect(watch == "stall-loop")
    #expect(stored.report.attributes[HangFacts.ongoingKey] == "true")
    hang.child.signal(SIGKILL)
    hang.child.wait()

    // The next launch: the session ended without a clean exit while the hang was recorded.
    let rings = try RingDirectory(path: directory.path)
    var outcome = PostMortemProcessor(directory: rings, store: hang.store).run()
    let deadline = ChildProcess.now() + 10
    while outcome.reports.isEmpty, ChildProcess.now() < deadline {
      // A child spawned by a parallel test holds a copy of the ring's flock until its exec.
      usleep(10_000)
      outcome = PostMortemProcessor(directory: rings, store: hang.store).run()
    }
    let report = try #require(outcome.reports.first?.report)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionMessage.hasPrefix("killed during a hang of "))
    #expect(report.exceptionMessage.contains(" of stall-loop in waitForGoOn() ← stallLoopBlockedOnParent()"))
    #expect(report.attributes[HangFacts.watchKey] == "stall-loop")
    let lasted = try #require(report.attributes[HangFacts.durationKey].flatMap { UInt64($0.text) })
    #expect(lasted >= 1000)
    // Its end is a hang: counted as one for its release (not as abnormal), and exported so.
    let session = try #require(outcome.sessions.first)
    #expect(session.end == .abnormalTermination && session.uncleanEndCause == .hang)
    let metrics = try SessionMetricsFile.countEnd(session, directory: directory.path)
    let release = try #require(metrics.releases[session.appVersion ?? ""])
    #expect(release.hang == 1 && release.abnormal == 0 && release.ended == 1)
    let points = SessionMetricsExport.batch(metrics.releases, installID: "i", now: 1).resources
      .flatMap(\.sums).flatMap(\.points)
    let hangPoint = points.first {
      $0.attributes.contains(OTLPAttribute("crumbs.session.end", .string("hang")))
    }
    #expect(hangPoint?.value == 1, "\(points)")
    // The hang report stored while it lived is still there, for delivery.
    #expect(hang.store.list(.pending).reports.contains { $0.report.id == stored.report.id })
  }

  @Test func aSaturatedHealthyProcessGivesNoHangReport() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["hang-saturated", directory.path])
    _ = try #require(child.value(after: "ring "))
    // Twelve checks of the watchdog (threshold 1 s, a check every second) with both CPUs busy.
    #expect(child.value(after: "checks ", seconds: 120).flatMap(Int.init).map { $0 >= 12 } == true)
    #expect(child.value(after: "hangs ") == "0")
    child.wait()
    #expect(child.exitCode == 0)
  }

  @Test func aFourSecondStallWithAThreeSecondThresholdIsReportedWithItsTrueStartAndDuration() throws {
    // The child times its own stall (its clocks, just after its last beat and just before its
    // next); the report is held to that, not to the test's clock: a busy machine delays the
    // child's wake-up and the watchdog alike, and the stall is what the child lived.
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let child = try ChildProcess(ChildProcess.testChild, ["hang-timed", directory.path])
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait()
    #expect(child.exitCode == 0)
    #expect(!lines.contains("no-hang"), "the 4 s stall went unreported: \(lines)")
    let stall = try #require(lines.first { $0.hasPrefix("stall ") }, "\(lines)")
      .split(separator: " ").dropFirst().compactMap { UInt64($0) }
    try #require(stall.count == 3)
    let (wallStart, start, end) = (stall[0], stall[1], stall[2])
    let lived = Double(end - start) / 1e9
    #expect(lived >= 4)

    let began = try #require(lines.first { $0.hasPrefix("hang-began timed-loop ") }, "\(lines)")
    let ended = try #require(lines.first { $0.hasPrefix("hang-ended timed-loop ") }, "\(lines)")
    let reported = try #require(Double(ended.dropFirst("hang-ended timed-loop ".count)))
    #expect(abs(reported - lived) <= 0.5, "reported \(reported) s for a stall of \(lived) s")

    // The stored report says the same: its duration, and its start is the last beat.
    let id = String(began.dropFirst("hang-began timed-loop ".count))
    let report = try store.load(id: id).report
    #expect(report.attributes[HangFacts.ongoingKey] == "false")
    let milliseconds = try #require(report.attributes[HangFacts.durationKey].flatMap { Double($0.text) })
    #expect(abs(milliseconds / 1000 - lived) <= 0.5, "reported \(milliseconds) ms for a stall of \(lived) s")
    let since = try #require(report.attributes[HangFacts.sinceKey].flatMap { ISO8601.nanoseconds($0.text) })
    let early = Double(Int64(bitPattern: wallStart &- since)) / 1e9
    #expect(abs(early) <= 0.5, "reported start \(early) s before the last beat")
  }

  @Test func theCheckIntervalIsTheSmallestThreshold() {
    #expect(HangWatchdog.interval(thresholds: [3, 2]) == 2)
    #expect(HangWatchdog.interval(thresholds: []) == 3)
    #expect(HangWatchdog.interval(thresholds: [0.01]) == 0.05)
    // The resolution: a twentieth of the smallest threshold, between 10 and 250 ms.
    #expect(HangWatchdog.resolution(thresholds: [3, 2]) == 0.1)
    #expect(HangWatchdog.resolution(thresholds: []) == 0.15)
    #expect(HangWatchdog.resolution(thresholds: [60]) == 0.25)
    #expect(HangWatchdog.resolution(thresholds: [0.05]) == 0.01)
  }

  @Test func hangFactsTellDurationsAndTopFrames() {
    #expect(HangFacts.text(7_349_999_999) == "7.3 s")
    #expect(HangFacts.milliseconds(7_349_999_999) == "7349")
    func frame(_ function: String, _ module: String) -> CrashReport.Frame {
      CrashReport.Frame(
        index: 0, address: "0x1", module: module, moduleOffset: nil, buildID: nil, function: function,
        symbol: nil, symbolOffset: nil, file: nil, line: nil, note: nil)
    }
    let frames = [
      frame("__futex_abstimed_wait_common", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      frame("sem_wait", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      frame("blockingWork()", "/app/Server"), frame("handle(_:)", "/app/Server"),
    ]
    #expect(HangFacts.topFrames(frames) == "blockingWork() ← handle(_:)")
    #expect(HangFacts.topFrames(Array(frames.prefix(2))) == "__futex_abstimed_wait_common ← sem_wait")
  }
}
