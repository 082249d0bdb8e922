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
//   [watchdog thread] check(now:)           every `interval` (the smallest threshold):
//                                           enqueues the pool / main-queue probes whose previous
//                                           one ran, asks StallTracker what changed, and
//                                           handles it (HangWatchdog+Reports.swift):
//                                           hangBegan → capture, report, ring header;
//                                           hangEnded → "hang ended after X s", report updated
//   stop()                                  at close: wakes the thread and waits for it
//
// Probes: a probe is a Heartbeat that a job beats when it runs. One is outstanding at a time:
// the next is enqueued only once the last one ran, so a starved pool holds one probe, not a
// pile. A probe that ran late but ran moved its heartbeat, which is not a hang; a watchdog that
// was itself not scheduled sees the move as soon as it runs (StallTracker), so a saturated but
// healthy process is not reported.
//
// Cost while nothing hangs: one wake-up per interval (one a threshold), one probe job
// and a look at each heartbeat's counter. Not signal-safe.

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

    /// Enqueues the next probe job, unless the last one has not run yet.
    func enqueueIfIdle() {
      guard
        outstanding.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
          .exchanged
      else { return }
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
    var ongoing: [String: OngoingHang] = [:]
    var lastReported: [String: UInt64] = [:]
  }

  /// A hang being lived through: its report, when one was stored (not when rate-limited).
  struct OngoingHang {
    var report: StoredReport?
  }

  /// Set once, in init: the client owns the watchdog, not the other way round.
  nonisolated(unsafe) weak var client: CrumbsClient?
  let detection: HangDetection
  let probes: [Probe]
  let state = Mutex(State())
  let hangs = Mutex(Hangs())
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

  /// Seconds between checks: the smallest threshold watched, at least 50 ms. A watch silent
  /// since just after a check is seen silent `threshold` later, at the check after next: a hang
  /// is reported between one and two thresholds after it began. Checking more often would see
  /// it sooner by less than a threshold, for twice the wake-ups (measured: each check costs the
  /// process about 75 µs of CPU with the pool probe's job).
  static func interval(thresholds: some Sequence<Double>) -> Double {
    max(0.05, thresholds.min() ?? 3)
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
      check(watched, now: SystemClock.monotonicNanoseconds())
      ForkedSessionReaper.startIfForked()  // a background pass: the reaper's thread, once forked
      let checks = state.withLock { state in
        state.checks &+= 1
        return state.checks
      }
      CrumbsClient.hangWatchdogEvents.withLock { $0 }?(.checked(checks))
      let seconds = Self.interval(thresholds: watched.lazy.map(\.threshold))
      watched.removeAll(keepingCapacity: true)
      _ = wakeUp.wait(timeout: .now() + .nanoseconds(Int(seconds * 1e9)))
    }
  }

  /// One look at every watch: what stalled, what resumed; then the next probes.
  private func check(_ watched: [Heartbeat], now: UInt64) {
    let events = hangs.withLock { $0.tracker.observe(watched, now: now) }
    for event in events {
      switch event {
      case .stalled(let name, let since):
        let heartbeat = watched.first { $0.name == name }
        hangBegan(name: name, kind: kind(of: heartbeat), heartbeat: heartbeat, since: since, now: now)
      case .resumed(let name, _, let duration):
        hangEnded(name: name, duration: duration)
      }
    }
    refreshOngoing()
    for probe in probes { probe.enqueueIfIdle() }
  }

  private func kind(of heartbeat: Heartbeat?) -> Kind {
    probes.first { $0.heartbeat === heartbeat }?.kind ?? .heartbeat
  }
}
