// RingClaimTests — the lane claim without a locked instruction (issue 26): on a machine where
// every CPU has a lane of its own, a lane's next position is taken by a restartable sequence
// (rseq) that the kernel restarts when the thread is preempted, migrated or signalled
// (crumbs__lane_claim). These tests check that the fast claim is really the one taken here, that
// claims stay unique when threads outnumber CPUs (so sequences are interrupted all the time), and
// that what each breadcrumb says about time still holds: its thread's order exactly, monotonic
// and wall time to the microsecond of clock_gettime around the append.

import CrumbsSignalPath
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct RingClaimTests {
  @Test func aRingWithALanePerCPUClaimsGeneralLanesWithoutALockedInstruction() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let cpus = sysconf(Int32(_SC_NPROCESSORS_CONF))
    let generalLanes = ring.lanesForTesting.filter { !$0.important }.count
    try #require(cpus > 0)
    // The default ring has a general lane per CPU (up to 32): the fast claim applies.
    #expect(cpus > generalLanes || ring.handle.pointee.exclusive_lanes & 1 != 0)
    #expect(cpus <= generalLanes || ring.handle.pointee.exclusive_lanes & 1 == 0)
  }

  /// A CPU's lane is its number masked, so a lane per CPU needs as many lanes as the highest
  /// CPU number + 1, not as many as there are CPUs: with "0-3,8-11" (8 CPUs), CPUs 0 and 8 would
  /// share a lane of 8 and claim it at once without a lock.
  @Test func theLanesACPUListNeedsAreItsHighestNumberPlusOne() {
    func limit(_ text: String) -> UInt32 {
      var bytes = Array(text.utf8)
      return bytes.withUnsafeMutableBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { crumbs_cpu_list_limit($0.baseAddress, $0.count) }
      }
    }
    #expect(limit("0-1\n") == 2)
    #expect(limit("0\n") == 1)
    #expect(limit("0-3,8-11\n") == 12)
    #expect(limit("0,2,5\n") == 6)
    #expect(limit("0-63") == 64)
    for malformed in ["", "\n", "x", "0-", "-3\n", "0 1\n", "99999999999\n"] {
      #expect(limit(malformed) == 0, "\(malformed.debugDescription)")
    }
  }

  @Test func claimsStayUniqueWhenThreadsOutnumberCPUs() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotCount = 1 << 17  // no lap: every append must be there, once
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
    defer { ring.close() }
    let writers = 8
    let perWriter = 3_000
    onThreads(writers) { thread in
      for counter in 0..<perWriter {
        ring.append("t=\(thread) n=\(counter)", attributes: ["t": String(thread), "n": String(counter)])
      }
    }
    let contents = ring.snapshot()
    checkStressInvariants(contents.breadcrumbs)
    #expect(contents.counts.torn == 0)
    #expect(contents.counts.overwritten == 0)
    #expect(contents.counts.dropped == 0)
    // Each append claimed exactly one position: a claim lost to a race would leave two appends
    // in one slot (torn, or one missing) and fewer positions claimed than appends.
    #expect(contents.header.appendsClaimed == UInt64(writers * perWriter))
    #expect(contents.counts.valid == writers * perWriter)
    let messages = Set(contents.breadcrumbs.map(\.message))
    #expect(messages.count == writers * perWriter)
  }

  @Test func eachBreadcrumbKeepsItsThreadsOrderAndTimeToTheMicrosecond() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let writers = 2
    let perWriter = 300
    let windows = WindowTable(count: writers * perWriter)
    onThreads(writers) { thread in
      for counter in 0..<perWriter {
        let before = (monotonic: clockNanoseconds(CLOCK_MONOTONIC), wall: clockNanoseconds(CLOCK_REALTIME))
        ring.append("t=\(thread) n=\(counter)")
        let after = (monotonic: clockNanoseconds(CLOCK_MONOTONIC), wall: clockNanoseconds(CLOCK_REALTIME))
        windows.set(thread * perWriter + counter, Window(before: before, after: after))
      }
    }
    // An anchor after the last append: the tick rate is then measured over the whole run.
    crumbs_ring_refresh_anchor_now(ring.handle)
    let contents = ring.snapshot()
    #expect(contents.timesAreCalibrated)
    #expect(contents.breadcrumbs.count == writers * perWriter)
    let microsecond: UInt64 = 1_000
    var byThread: [UInt32: [(counter: Int, crumb: Breadcrumb)]] = [:]
    for crumb in contents.breadcrumbs {
      let parts = crumb.message.split(separator: " ")
      let thread = Int(parts[0].dropFirst(2))!
      let counter = Int(parts[1].dropFirst(2))!
      byThread[crumb.threadID, default: []].append((counter, crumb))
      let window = windows.get(thread * perWriter + counter)
      #expect(crumb.monotonicNanoseconds + microsecond >= window.before.monotonic, "\(crumb.message)")
      #expect(crumb.monotonicNanoseconds <= window.after.monotonic + microsecond, "\(crumb.message)")
      #expect(crumb.wallTimeNanoseconds + microsecond >= window.before.wall, "\(crumb.message)")
      #expect(crumb.wallTimeNanoseconds <= window.after.wall + microsecond, "\(crumb.message)")
    }
    #expect(byThread.count == writers)
    for (_, crumbs) in byThread {
      let ordered = crumbs.sorted { $0.crumb.threadSequence < $1.crumb.threadSequence }
      // The per-thread sequence orders a thread's breadcrumbs exactly, and their ticks agree.
      #expect(ordered.map(\.counter) == Array(0..<perWriter))
      #expect(zip(ordered, ordered.dropFirst()).allSatisfy { $0.crumb.ticks < $1.crumb.ticks })
    }
  }
}

private func clockNanoseconds(_ clock: clockid_t) -> UInt64 {
  var time = timespec()
  clock_gettime(clock, &time)
  return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

private struct Window: Sendable {
  var before: (monotonic: UInt64, wall: UInt64)
  var after: (monotonic: UInt64, wall: UInt64)
}

/// Each append's clock window, written by its thread and read after every thread is done.
private final class WindowTable: @unchecked Sendable {
  private let lock = NSLock()
  private var windows: [Window]
  init(count: Int) {
    windows = Array(repeating: Window(before: (0, 0), after: (0, 0)), count: count)
  }
  func set(_ index: Int, _ window: Window) { lock.withLock { windows[index] = window } }
  func get(_ index: Int) -> Window { lock.withLock { windows[index] } }
}
