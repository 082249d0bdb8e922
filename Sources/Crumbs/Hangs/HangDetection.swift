// HangDetection.swift — how the client's watchdog looks for hangs (`CrumbsConfiguration.hangs`):
// what it watches, after how long silence (or an operation left open) counts as a hang, and how
// often a hang is reported.
// The watchdog itself is HangWatchdog.swift.

/// What the client's watchdog watches, and when silence is a hang. `nil` in
/// `CrumbsConfiguration.hangs` turns hang detection off (named heartbeats are then not watched).
public struct HangDetection: Sendable, Equatable {
  /// Seconds a watch may stay silent before it counts as hung (default 3). Named heartbeats may
  /// set their own (`client.heartbeat(_:threshold:)`).
  ///
  /// A hang starts at the watch's last beat and ends at its next, both true to the watchdog's
  /// resolution (a twentieth of the smallest threshold, 10 to 250 ms). Silence is counted only
  /// while the watchdog itself runs: a probe that runs late but runs is not a hang, and a
  /// watchdog that was not scheduled (every CPU busy, the process stopped) does not count the
  /// time it did not look. So a process whose CPUs are saturated is reported only when a watch
  /// stays silent for `threshold` of the watchdog's own running time — something a thread that
  /// is merely slow to be scheduled does not do.
  public var threshold: Double = 3
  /// Whether a probe job is enqueued on Swift concurrency's global executor every check: when
  /// it has not run after `threshold`, the cooperative pool is starved (tasks blocking in
  /// synchronous calls). Default true.
  public var watchesConcurrencyPool = true
  /// Whether a probe is enqueued on the main dispatch queue. Default false: a program whose
  /// `main` blocks (a CLI, most servers) never services the main queue, which is not a hang.
  public var watchesMainQueue = false
  /// At most one report per watch in this many seconds (default 600): a watch that keeps
  /// hanging gives a report, then breadcrumbs, not a report every few seconds.
  public var minimumReportInterval: Double = 600
  /// How long a hang report waits, stored, for its hang to end before it is delivered anyway
  /// (default 60 s): delivered after the end, it carries the hang's whole duration.
  public var deliveryHold: Double = 60

  /// Seconds an operation (a request, a job: `client.beginOperation`, `CrumbsTracer`'s spans)
  /// may stay open in the in-flight ledger before it is a hang of that operation, even while
  /// the pool and every heartbeat are fine: a `hang` report led by the thread that began it,
  /// naming it and its trace id, held and replaced as the other hang reports are. One report
  /// per operation stuck (its episode ends when it ends), and per operation name at most one
  /// in `minimumReportInterval`. nil (the default) watches no operation.
  public var operationThreshold: Double? = nil

  /// Whether each look also reads the pool threads' kernel files (no signal: /proc's `syscall`
  /// and `schedstat` of each pool thread) to notice seats blocked in a system call past
  /// `threshold` while the pool still runs: a breadcrumb per episode and the session summary's
  /// `crumbs.session.pool_seats_blocked`. Default true (its cost is in docs/hangs.md).
  public var watchesPoolSeats = true
  /// Whether such a seat also gives a `hang` report ("2 of 8 pool seats blocked for 40 s in
  /// `Legacy.fetch()` (DispatchSemaphore.wait)"), at most one per `minimumReportInterval`, with
  /// a capture of every thread. Default false: a seat blocked for a few seconds while the others
  /// run is latency, not a hang a user sees (a blocking read of a large file on the pool does
  /// it); the breadcrumb and the count say it happened, and the pool's own hang report comes
  /// when every seat is gone.
  public var reportsBlockedPoolSeats = false

  public init(
    threshold: Double = 3, watchesConcurrencyPool: Bool = true, watchesMainQueue: Bool = false,
    operationThreshold: Double? = nil
  ) {
    self.threshold = threshold
    self.watchesConcurrencyPool = watchesConcurrencyPool
    self.watchesMainQueue = watchesMainQueue
    self.operationThreshold = operationThreshold
  }

  /// `threshold` when it is a usable number of seconds, else the default.
  var usableThreshold: Double { threshold.isFinite && threshold > 0 ? threshold : 3 }

  /// `operationThreshold` when it is a usable number of seconds; nil (off) otherwise.
  var usableOperationThreshold: Double? {
    operationThreshold.flatMap { $0.isFinite && $0 > 0 ? $0 : nil }
  }
}
