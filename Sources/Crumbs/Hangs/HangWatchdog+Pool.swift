// HangWatchdog+Pool.swift — the pool's seats seen before the pool is gone: at each look, the
// pool threads' kernel files (PoolSeatLook: no signal) say which seats are blocked in a system
// call, and since when without running once. A seat blocked past `threshold` while the pool
// still runs (a thread of it in no call, or a seat not blocked: poolsStillRunning; a pool
// whose every seat is blocked is the pool's own hang, its probe's) is what starves it later:
//   - a breadcrumb once per episode ("pool: 2 of 8 pool seats blocked for 4.2 s in `futex`"),
//     and "pool seats unblocked after 9.1 s" when none is blocked any more;
//   - the session's count of seats so found (the session file's `blockedPoolSeats`, the
//     session summary's `crumbs.session.pool_seats_blocked`);
//   - with `reportsBlockedPoolSeats`, a `hang` report of the watch `pool-seats` ("2 of 8 pool
//     seats blocked for 40 s in `Legacy.fetch()` (DispatchSemaphore.wait)"), rate-limited as
//     every hang report is. Only then is a capture taken (it signals the running threads): the
//     app frame needs one, and it tells a blocked job from a worker idle in its wait for work.
//
// Entry points, in call order (on the watchdog thread, at each look of `check`):
//   checkPoolSeats(resolution:)     the look, what it found past the threshold, and the wait
//                                   until the next seat could reach it
//   poolCensus(_:)                  the census of a capture (PoolCensus), for every hang report
//
// An idle worker waits for work in a timed futex wait of at most 5 s (libdispatch's worker
// timeout), then the thread ends: a seat in a timed futex wait counts only past 6 s too, so a
// pool going idle is never a blocked seat, whatever the threshold. Not signal-safe.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// What the look at the pool's seats remembers between looks.
struct PoolSeatWatch {
  struct Key: Hashable {
    var threadID: UInt32
    var since: UInt64
  }

  var look = PoolSeatLook()
  /// Seats per pool (0 until the first look measures them).
  var seats = 0
  /// Blocked seats already counted (each block once), by thread and the start of its block.
  var counted = Set<Key>()
  /// Blocks a capture showed to be a worker waiting for work, not a job: never counted.
  var idle = Set<Key>()
  /// The episode going on (a seat blocked past the threshold): when its breadcrumb went out, and
  /// whether a report was made for it.
  var episode: (began: UInt64, reported: Bool)?
  /// By pool: the last look that saw every seat of it blocked (the pool's own hang). A seat's
  /// block counts only from then: as such a pool recovers, the seats still blocked a moment
  /// longer are not seats blocked "for" the whole hang while the pool runs.
  var lastStopped: [String: UInt64] = [:]
}

extension HangWatchdog {
  static let poolSeatsWatchName = "pool-seats"
  /// The ongoing-hang key of a pool-seats episode (never a heartbeat's name: it starts with NUL).
  static let poolSeatsKey = "\u{0}pool-seats"
  /// How long an idle worker's wait for work can last (libdispatch: 5 s), with a margin.
  static let idleWaitLimit: UInt64 = 6_000_000_000

  /// One look at the pool's seats when `watchesPoolSeats`; returns the nanoseconds until the next
  /// look it needs (UInt64.max when it needs none).
  func checkPoolSeats(resolution: UInt64) -> UInt64 {
    guard detection.watchesPoolSeats, let client, client.isEnabled else { return .max }
    let threshold = detection.usableThreshold
    let limit = StallTracker.nanoseconds(threshold)
    let now = SystemClock.monotonicNanoseconds()
    typealias Found = (seat: PoolSeatLook.Seat, key: PoolSeatWatch.Key, blocked: UInt64)
    let (past, fresh, wait, seats, episode) = poolSeats.withLock { watch in
      if watch.seats == 0 { watch.seats = DispatchPools.seats() }
      var past: [Found] = []
      var wait = UInt64.max
      var blockedNow = Set<PoolSeatWatch.Key>()
      let found = watch.look.look(now: now)
      let running = Self.poolsStillRunning(found, seats: watch.seats)
      for seat in found where !running.contains(seat.pool) { watch.lastStopped[seat.pool] = now }
      for seat in found {
        guard let since = seat.blockedSince else { continue }
        let key = PoolSeatWatch.Key(threadID: seat.threadID, since: since)
        blockedNow.insert(key)
        guard !watch.idle.contains(key) else { continue }
        let needed = seat.timedFutexWait ? max(limit, Self.idleWaitLimit) : limit
        // A block already counted keeps its start: its episode goes on through a full stop.
        let start = watch.counted.contains(key) ? since : max(since, watch.lastStopped[seat.pool] ?? 0)
        let blocked = now &- start
        if blocked >= needed { past.append((seat, key, blocked)) } else { wait = min(wait, needed - blocked) }
      }
      // A block that ended is forgotten: the same thread blocked again is a new block.
      watch.counted.formIntersection(blockedNow)
      watch.idle.formIntersection(blockedNow)
      // New blocks count only in a pool that still runs; one already counted stays in the
      // episode while it lasts, whatever its pool does since.
      let fresh = past.filter { !watch.counted.contains($0.key) && running.contains($0.seat.pool) }
      return (past, fresh, wait, watch.seats, watch.episode)
    }
    if !fresh.isEmpty {
      poolSeatsBlocked(past: past, fresh: fresh, seats: seats, threshold: threshold, now: now)
    }
    let confirmed = poolSeats.withLock { watch in past.filter { watch.counted.contains($0.key) } }
    if let episode, confirmed.isEmpty {
      poolSeats.withLock { $0.episode = nil }
      // At least: blocked past the threshold when the episode began.
      let duration = now &- episode.began &+ limit
      client.ring.append(
        "pool seats unblocked after \(HangFacts.text(duration))", level: .info, type: .system,
        attributes: [HangFacts.watchKey: Self.poolSeatsWatchName])
      if episode.reported {
        hangEnded(key: Self.poolSeatsKey, duration: duration)  // quiet: the line above is its end
      } else {
        CrumbsClient.hangWatchdogEvents.withLock { $0 }?(
          .ended(watch: Self.poolSeatsWatchName, nanoseconds: duration))
      }
    }
    // While seats are blocked, looks every `resolution` see the episode's end.
    return max(resolution, confirmed.isEmpty ? wait : min(wait, resolution))
  }

  /// Seats found blocked past the threshold for the first time (`fresh`, among `past`): with a
  /// report due, a capture tells jobs from idle workers and names the app frames; then the
  /// count, the episode's breadcrumb and the report.
  private func poolSeatsBlocked(
    past: [(seat: PoolSeatLook.Seat, key: PoolSeatWatch.Key, blocked: UInt64)],
    fresh: [(seat: PoolSeatLook.Seat, key: PoolSeatWatch.Key, blocked: UInt64)], seats: Int,
    threshold: Double, now: UInt64
  ) {
    guard let client else { return }
    // All seats blocked is the pool's own hang (its probe's report leads with the census).
    let poolHung = hangs.withLock { $0.ongoing[Self.poolWatchName] != nil }
    let interval = UInt64(max(0, min(detection.minimumReportInterval, 1e9)) * 1e9)
    let due =
      detection.reportsBlockedPoolSeats && !poolHung
      && hangs.withLock { hangs in
        hangs.lastReported[Self.poolSeatsWatchName].map { now &- $0 >= interval } ?? true
      }
    var capture: CapturedThreads?
    var census: PoolCensus?
    var confirmed = fresh
    if due {
      let taken = captureThreads(client)
      capture = taken
      census = poolCensus(taken)
      if let census {
        let jobs = Set(census.seats.filter { $0.state == .blocked }.map(\.threadID))
        confirmed = fresh.filter { jobs.contains($0.seat.threadID) }
      }
    }
    let (episode, counted) = poolSeats.withLock { watch in
      for found in fresh where !confirmed.contains(where: { $0.key == found.key }) {
        watch.idle.insert(found.key)
      }
      for found in confirmed { watch.counted.insert(found.key) }
      return (watch.episode, watch.counted)
    }
    guard !confirmed.isEmpty else { return }
    client.countBlockedPoolSeats(confirmed.count)
    // Every seat of the episode blocked now: these and the ones counted at earlier looks.
    let blocked = past.filter { counted.contains($0.key) }
    let longest = blocked.map(\.blocked).max() ?? 0
    let duration = HangFacts.text(longest)
    let text =
      census?.blockedText(Set(blocked.map(\.seat.threadID)), duration: duration)
      ?? Self.lookText(blocked.map(\.seat), seats: seats, duration: duration)
    guard episode == nil else { return }
    poolSeats.withLock { $0.episode = (began: now, reported: due) }
    client.ring.append(
      "pool: \(text)", level: .warning, type: .system,
      attributes: [HangFacts.watchKey: Self.poolSeatsWatchName])
    var report: StoredReport?
    if due, let capture {
      let wallNow = SystemClock.wallNanoseconds()
      let lead = confirmed.first?.seat.threadID
      report = reportHang(
        key: Self.poolSeatsKey, watch: Self.poolSeatsWatchName, sinceWall: wallNow &- min(longest, wallNow),
        lasted: longest, threshold: threshold, now: now, attributes: [:], quiet: true,
        lead: { threads in threads.first { $0.id == Int(lead ?? 0) } },
        message: { _ in
          text
            + " (threshold \(HangFacts.text(StallTracker.nanoseconds(threshold)))), while the pool still runs"
        }, capture: capture)
    }
    CrumbsClient.hangWatchdogEvents.withLock { $0 }?(.began(watch: Self.poolSeatsWatchName, report: report))
  }

  /// The pools that still run: a thread of theirs is in no system call, or fewer of their
  /// threads than their seats are blocked in one (a worker's wait for work aside). A pool whose
  /// every seat is blocked is gone: that is the pool's own hang, not a seat's.
  static func poolsStillRunning(_ found: [PoolSeatLook.Seat], seats: Int) -> Set<String> {
    var running = Set<String>()
    var blocked: [String: Int] = [:]
    for seat in found {
      if seat.systemCall == nil {
        running.insert(seat.pool)
      } else if !seat.timedFutexWait {
        blocked[seat.pool, default: 0] += 1
      }
    }
    for seat in found where (blocked[seat.pool] ?? 0) < seats { running.insert(seat.pool) }
    return running
  }

  /// The look's own words, without a capture: "2 of 8 pool seats blocked for 4.2 s in `futex`".
  static func lookText(_ blocked: [PoolSeatLook.Seat], seats: Int, duration: String) -> String {
    var counts: [String: Int] = [:]
    var order: [String] = []
    for seat in blocked {
      let call = seat.systemCallName ?? seat.systemCall.map { "system call \($0)" } ?? "a system call"
      if counts[call] == nil { order.append(call) }
      counts[call, default: 0] += 1
    }
    let calls = order.map { blocked.count > 1 ? "\(counts[$0]!) in `\($0)`" : "in `\($0)`" }
    return "\(blocked.count) of \(max(seats, blocked.count)) pool seats blocked for \(duration) "
      + calls.joined(separator: ", ")
  }

  /// The pool's census over a capture, the main thread in it when the main queue is watched.
  func poolCensus(_ capture: CapturedThreads) -> PoolCensus? {
    let seats = poolSeats.withLock { watch in
      if watch.seats == 0 { watch.seats = DispatchPools.seats() }
      return watch.seats
    }
    return PoolCensus.take(
      threads: capture.threads, waits: capture.waits, seats: seats,
      mainThreadID: detection.watchesMainQueue ? Int(getpid()) : nil)
  }
}

/// A live capture as hang reports use it: every thread symbolicated, the modules, what each
/// waits on, and why any of it is missing.
typealias CapturedThreads = (
  threads: [CrashReport.Thread], modules: [LoadedModule], waits: ThreadWaits?, damage: [String]
)

extension CrumbsClient {
  /// Adds `count` pool seats found blocked past the threshold to the session file: the session
  /// summary carries the total (`crumbs.session.pool_seats_blocked`).
  func countBlockedPoolSeats(_ count: Int) {
    updateSessionFile { $0.blockedPoolSeats = ($0.blockedPoolSeats ?? 0) + count }
  }
}
