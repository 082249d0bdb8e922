// HangWatchdog.swift — the client's one watchdog thread: it watches the concurrency pool, the
// main queue (when asked) and named heartbeats, and turns a watch that stays silent past its
// threshold into a hang: a breadcrumb, the ring header's "hang going on" (so a kill during it
// is explained by the next launch), and a `hang` report with every thread's stack.
//
// Entry points, in call order:
//   HangWatchdog(client:detection:)         at client start, when `configuration.hangs` is set
//   start()                                 the thread starts (the client's background work);
//                                           nothing runs on the app's threads
//   client.heartbeat(_:threshold:)          a named heartbeat joins the watches (held weakly: a
//                                           heartbeat the app dropped is forgotten)
//   [watchdog thread] check(_:now:)         at each look: enqueues the pool / main-queue
//                                           probes whose previous one ran, asks StallTracker
//                                           what changed and when to look next (when the first
//                                           watch could reach its threshold, at most `interval`
//                                           ahead; every `resolution` while one is stalled),
//                                           and handles it (HangWatchdog+Reports.swift):
//                                           hangBegan → capture, report, ring header;
//                                           hangEnded → "hang ended after X s", report updated;
//                                           with `operationThreshold`, the ledger too
//                                           (checkOperations, HangWatchdog+Operations.swift)
//   stop()                                  at close: wakes the thread and waits for it
//
// Probes: a probe is a Heartbeat that the watchdog beats when it enqueues a job, and the job
// beats when it runs: silent only while its job waits, from the moment it was enqueued. One is
// outstanding at a time: the next is enqueued only once the last one ran, so a starved pool
// holds one probe, not a pile. A probe that ran late but ran beat its heartbeat, which is not a
// hang; a watchdog that was itself not scheduled does not count the time it did not look
// (StallTracker), so a saturated but healthy process is not reported.
//
// Cost while nothing hangs: about one wake-up per threshold (a look is due when the watch that
// beat longest ago could reach its threshold), one probe job and a read of each heartbeat's
// stamp. While a watch is stalled, one look per `resolution`. Not signal-safe.

import CrumbsPlatform
import Dispatch
import Synchronization

final class HangWatchdog: Sendable {
  /// What a watch is: decides how its hang is described and which thread leads its report.
  enum Kind: Sendable, Equatable {
    case concurrencyPool
    case mainQueue
    case heartbeat
  }

  /// A probe: a heartbeat beaten by a job the watchdog enqueues.
  final class Probe: Sendable {
    let heartbeat: Heartbeat
    let kind: Kind
    private let outstanding = Atomic<Bool>(false)

    init(_ kind: Kind, name: String, threshold: Double) {
      self.kind = kind
      heartbeat = Heartbeat(name: name, threshold: threshold)
    }

    /// Enqueues the next probe job, unless the last one has not run yet; the heartbeat beats
    /// now, so that its silence is the time the job waits.
    func enqueueIfIdle() {
      guard
        outstanding.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
          .exchanged
      else { return }
      heartbeat.beat()
      switch kind {
      case .concurrencyPool:
        // At the default priority: each priority has its own cooperative pool (Dispatch's
        // root queue of that QoS, as wide as the CPUs), and the default one is where tasks run
        // unless told otherwise. A probe of higher priority would run in another pool and
        // never see this one starve.
        Task.detached(priority: .medium) { [self] in ran() }
      case .mainQueue:
        DispatchQueue.main.async { [self] in ran() }
      case .heartbeat:
        break
      }
    }

    private func ran() {
      heartbeat.beat()
      outstanding.store(false, ordering: .releasing)
    }
  }

  struct WeakHeartbeat {
    weak var heartbeat: Heartbeat?
  }

  struct State {
    var named: [WeakHeartbeat] = []
    var stopping = false
    /// Whether the thread was started (stop waits only for a thread that runs).
    var started = false
    /// Checks done (tests wait on this to know the watchdog has looked).
    var checks: UInt64 = 0
  }

  /// The hangs going on, and when each watch was last reported (the watchdog thread's own).
  struct Hangs {
    var tracker = StallTracker()
    /// By key: a watch's name, or an operation's (operationHangKey).
    var ongoing: [String: OngoingHang] = [:]
    /// By watch name (an operation's watch is its name: HangWatchdog+Operations.swift).
    var lastReported: [String: UInt64] = [:]
    var operations = OperationStalls()
  }

  /// A hang being lived through: its report, when one was stored (not when rate-limited); the
  /// watch it is of; whether its start left no breadcrumb (nor will its end).
  struct OngoingHang {
    var report: StoredReport?
    var watch: String
    var quiet = false
  }

  /// Set once, in init: the client owns the watchdog, not the other way round.
  nonisolated(unsafe) weak var client: CrumbsClient?
  let detection: HangDetection
  let probes: [Probe]
  let state = Mutex(State())
  let hangs = Mutex(Hangs())
  /// The look at the pool's seats (HangWatchdog+Pool.swift), the watchdog thread's own.
  let poolSeats = Mutex(PoolSeatWatch())
  private let wakeUp = DispatchSemaphore(value: 0)
  private let finished = DispatchSemaphore(value: 0)

  static let poolWatchName = "concurrency-pool"
  static let mainQueueWatchName = "main-queue"

  /// A watchdog for `client`; its thread starts with `start()`.
  init(client: CrumbsClient, detection: HangDetection) {
    self.client = client
    self.detection = detection
    let threshold = detection.usableThreshold
    var probes: [Probe] = []
    if detection.watchesConcurrencyPool {
      probes.append(Probe(.concurrencyPool, name: Self.poolWatchName, threshold: threshold))
    }
    if detection.watchesMainQueue {
      probes.append(Probe(.mainQueue, name: Self.mainQueueWatchName, threshold: threshold))
    }
    self.probes = probes
  }

  /// Starts the watchdog thread (once). Throws when no thread could be started (the process is
  /// out of them): hangs then go unwatched, which the client's `problems` says.
  func start() throws(SystemCallError) {
    let go = state.withLock { state -> Bool in
      defer { if !state.stopping { state.started = true } }
      return !state.stopping && !state.started
    }
    guard go else { return }
    do {
      try BackgroundThread.start(name: "crumbs.watchdog") { [self] in run() }
    } catch {
      state.withLock { $0.started = false }
      throw error
    }
  }

  /// Watches `heartbeat` from the next check on.
  func watch(_ heartbeat: Heartbeat) {
    state.withLock { state in
      state.named.removeAll { $0.heartbeat == nil }
      state.named.append(WeakHeartbeat(heartbeat: heartbeat))
    }
    wakeUp.signal()  // the interval may have to shrink for its threshold
  }

  /// Ends the thread: it finishes the check in progress, and this waits for it.
  func stop() {
    let running = state.withLock { state -> Bool in
      defer { state.stopping = true }
      return !state.stopping && state.started
    }
    guard running else { return }
    wakeUp.signal()
    finished.wait()
  }

  /// The longest wait between two looks: the smallest threshold watched, at least 50 ms. The
  /// watchdog usually wakes later than the look before plus this, but never sleeps longer (each
  /// look costs the process about 75 µs of CPU with the pool probe's job, measured).
  static func interval(thresholds: some Sequence<Double>) -> Double {
    max(0.05, thresholds.min() ?? 3)
  }

  /// The watchdog's resolution: the wait between looks while a watch is stalled (to see its end)
  /// and the shortest wait of all: a twentieth of the smallest threshold, between 10 and 250 ms
  /// (150 ms for the default 3 s). A hang is reported within this of its threshold, and its
  /// end (so its duration) seen within this of the beat that ended it.
  static func resolution(thresholds: some Sequence<Double>) -> Double {
    min(0.25, max(0.01, (thresholds.min() ?? 3) / 20))
  }

  private func run() {
    defer { finished.signal() }
    // One array for every check, emptied before each wait: a check while nothing hangs makes
    // no array, and the watchdog holds no named heartbeat while it sleeps (one the app dropped
    // is forgotten: its weak reference goes nil).
    var watched: [Heartbeat] = []
    watched.reserveCapacity(probes.count + 4)
    while true {
      for probe in probes { watched.append(probe.heartbeat) }
      let stopping = state.withLock { state -> Bool in
        guard !state.stopping else { return true }
        for entry in state.named { if let heartbeat = entry.heartbeat { watched.append(heartbeat) } }
        return false
      }
      guard !stopping else { return }
      // The beats' clock (Heartbeat.beat): a stall's start and end are their stamps.
      let now = SystemClock.coarseMonotonicNanoseconds()
      let next = now &+ check(watched, now: now)
      ForkedSessionReaper.startIfForked()  // a background pass: the reaper's thread, once forked
      let checks = state.withLock { state in
        state.checks &+= 1
        return state.checks
      }
      CrumbsClient.hangWatchdogEvents.withLock { $0 }?(.checked(checks))
      watched.removeAll(keepingCapacity: true)
      // From the look's own time: a capture for a report does not push the next look back.
      let current = SystemClock.coarseMonotonicNanoseconds()
      let wait = next > current ? next - current : 0
      _ = wakeUp.wait(timeout: .now() + .nanoseconds(Int(min(wait, UInt64(Int.max)))))
    }
  }

  /// One look at every watch: the next probes (a probe enqueued now is alive as of now), what
  /// stalled, what resumed. Returns the nanoseconds to wait before the next look.
  private func check(_ watched: [Heartbeat], now: UInt64) -> UInt64 {
    for probe in probes { probe.enqueueIfIdle() }
    let thresholds = watched.lazy.map(\.threshold)
    let resolution = StallTracker.nanoseconds(Self.resolution(thresholds: thresholds))
    let longest = StallTracker.nanoseconds(Self.interval(thresholds: thresholds))
    let (events, wait) = hangs.withLock { hangs in
      let events = hangs.tracker.observe(watched, now: now)
      return (
        events, hangs.tracker.wait(now: now, heartbeats: watched, resolution: resolution, longest: longest)
      )
    }
    for event in events {
      switch event {
      case .stalled(let name, let since):
        let heartbeat = watched.first { $0.name == name }
        hangBegan(name: name, kind: kind(of: heartbeat), heartbeat: heartbeat, since: since, now: now)
      case .resumed(let name, _, let duration):
        hangEnded(key: name, duration: duration)
      }
    }
    let operationsWait = checkOperations(resolution: resolution, longest: longest)
    let seatsWait = checkPoolSeats(resolution: resolution)
    refreshOngoing()
    return min(wait, operationsWait, seatsWait)
  }

  private func kind(of heartbeat: Heartbeat?) -> Kind {
    probes.first { $0.heartbeat === heartbeat }?.kind ?? .heartbeat
  }
}
