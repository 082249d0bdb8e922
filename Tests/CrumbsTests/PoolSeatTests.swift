import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

// The watchdog's look at the pool's seats (issue 40, point 4), with real children: half the
// seats blocked in DispatchSemaphore.wait while the rest spin and yield is noticed before the
// pool is gone (a breadcrumb, the session's count, a `hang` report of `pool-seats` naming the
// call site); a saturated healthy pool, then the same pool idle, is never. Every wait is for a
// line of the child, with a bounded margin.
@Suite struct PoolSeatTests {
  @Test func halfTheSeatsBlockedWhileTheRestRunIsNoticedAndReportedWithItsCallSite() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["pool-partial", directory.path])
    defer {
      child.signal(SIGKILL)
      child.wait(seconds: 60)
    }
    let ring = try #require(child.value(after: "ring "))
    let seats = try #require(child.value(after: "seats ").flatMap(Int.init))
    let blockers = max(1, seats / 2)
    let id = try #require(child.value(after: "hang-began pool-seats ", seconds: 120))
    try #require(id != "-", "no report stored")
    let census = try #require(child.value(after: "census "))
    #expect(
      census.hasPrefix(
        "\(blockers) of \(seats) pool seats blocked: \(blockers) in `censusBlockedOnSemaphore(_:)`"),
      "\(census)")
    child.signal(SIGUSR1)
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait(seconds: 60)
    #expect(child.exitCode == 0, "\(lines)")
    // The pool itself never stalled: its probe ran all along.
    #expect(!lines.contains { $0.hasPrefix("hang-began concurrency-pool") }, "\(lines)")
    #expect(lines.contains { $0.hasPrefix("hang-ended pool-seats ") }, "\(lines)")

    let report = try ReportStore(directory: directory.path).load(id: id).report
    #expect(report.kind == .hang)
    #expect(report.attributes[HangFacts.watchKey] == "pool-seats")
    let lead = "\(blockers) of \(seats) pool seats blocked for "
    #expect(report.exceptionMessage.hasPrefix(lead), "\(report.exceptionMessage)")
    let site = "`censusBlockedOnSemaphore(_:)` (DispatchSemaphore.wait)"
    #expect(report.exceptionMessage.contains(site), "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.contains("while the pool still runs"), "\(report.exceptionMessage)")
    #expect(report.frames.contains { $0.function == "censusBlockedOnSemaphore(_:)" })
    // The trail and the session's count.
    let messages = try RingReader.read(file: ring).breadcrumbs.map(\.message)
    #expect(messages.contains { $0.hasPrefix("pool: \(lead)") }, "\(messages)")
    let session = String(ring.dropLast(".ring".count)) + ".session.json"
    #expect(try SessionMetadata.read(file: session).blockedPoolSeats == blockers)
  }

  @Test func aSaturatedHealthyPoolThenIdleGivesNoReport() throws {
    // Twelve looks (threshold 1 s: one a second or more) with 2 × seats tasks spinning and
    // yielding, then eight with the pool idle, its threads waiting for work and ending (a wait
    // of up to 5 s: what a look must not take for a blocked seat). A seat is flagged when two
    // looks a threshold apart find it in the same system call without it having run between:
    // each look is a chance for a false one, per pool thread; twenty looks give each of the
    // pool's threads every state a healthy pool passes through (running, yielding, parked,
    // idle, ended), which is what ten minutes would repeat.
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["pool-healthy", directory.path, "12"])
    let lines = child.readLines(until: "done", seconds: 180)
    child.wait(seconds: 60)
    #expect(child.exitCode == 0, "\(lines)")
    #expect(lines.contains { $0.hasPrefix("checks ") && (Int($0.dropFirst(7)) ?? 0) >= 20 }, "\(lines)")
    #expect(lines.contains("hangs 0"), "\(lines)")
    #expect(lines.contains("pool-seat-events 0"), "\(lines)")
  }

  @Test func theLookReadsSchedstatAndCPUMasks() {
    #expect(PoolSeatLook.timesRun(ArraySlice("1234 5678 42\n".utf8)) == 42)
    #expect(PoolSeatLook.timesRun(ArraySlice("1234 5678\n".utf8)) == nil)
    #expect(PoolSeatLook.timesRun(ArraySlice("1 2 x3\n".utf8)) == nil)
    #expect(DispatchPools.cpusAllowed(ArraySlice("Name:\tx\nCpus_allowed:\t3\n".utf8)) == 2)
    #expect(DispatchPools.cpusAllowed(ArraySlice("Cpus_allowed:\tff,00000001\n".utf8)) == 9)
    #expect(DispatchPools.cpusAllowed(ArraySlice("Cpus_allowed:\tzz\n".utf8)) == nil)
    #expect(DispatchPools.seats() >= 1)
  }

  @Test func aPoolWithEverySeatBlockedIsThePoolsOwnHangNotASeats() {
    func seat(_ tid: UInt32, _ call: Int?, timed: Bool = false, pool: String = "default") -> PoolSeatLook.Seat
    {
      var seat = PoolSeatLook.Seat(threadID: tid, pool: pool)
      seat.systemCall = call
      seat.timedFutexWait = timed
      return seat
    }
    // Two seats: both blocked (a worker idle in its timed wait beside them) is the pool's hang.
    #expect(
      HangWatchdog.poolsStillRunning([seat(1, 202), seat(2, 202), seat(3, 202, timed: true)], seats: 2)
        .isEmpty)
    // One blocked, one free: it runs; one blocked and one running: it runs.
    #expect(
      HangWatchdog.poolsStillRunning([seat(1, 202), seat(3, 202, timed: true)], seats: 2) == ["default"])
    #expect(
      HangWatchdog.poolsStillRunning([seat(1, 202), seat(2, 202), seat(4, nil)], seats: 2) == ["default"])
    // Each pool by itself.
    #expect(
      HangWatchdog.poolsStillRunning([seat(1, 202), seat(2, 202), seat(5, 230, pool: "utility")], seats: 2)
        == ["utility"])
  }

  @Test func theSessionSummaryCarriesTheCount() {
    var summary = SessionSummary(
      sessionID: "s", installID: "i", end: .clean, startedUnixNano: 1, processedUnixNano: 2, sessions: 1,
      crashedSessions: 0, abnormalSessions: 0, cleanSessions: 1, crashFreeRate: 1)
    #expect(
      !SessionSummaryQueue.record(summary).attributes.contains {
        $0.key == "crumbs.session.pool_seats_blocked"
      })
    summary.blockedPoolSeats = 3
    let attribute = SessionSummaryQueue.record(summary).attributes.first {
      $0.key == "crumbs.session.pool_seats_blocked"
    }
    #expect(attribute?.value == .int(3))
  }
}
