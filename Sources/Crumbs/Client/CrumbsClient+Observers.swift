// CrumbsClient+Observers.swift — what the client did, told to observers of this package's
// optional products (CrumbsMetrics), so that they count from the events the client already has
// instead of counting again: the previous sessions processed and counted, a report stored, a
// hang seen, a report delivered or given up by a destination.
//
// Observers are told after the fact, on the thread that did it (the background thread of
// `start`, the hang watchdog, the uploader), one event at a time per thread: they return
// quickly and never call back into the client (its lock may be near). An observer added after
// the previous sessions were processed is told of them at once, on the adding thread, so one
// added just after `start` returns misses nothing of them; each observer hears of them once.
//
// Entry points, in call order:
//   CrumbsClient.addObserver(_:)                      the product's bootstrap, after `start`
//   CrumbsClient.previousSessionsProcessed(_:metrics:)  +PreviousSessions, before waiters resume
//   CrumbsClient.tell(_:)                             a live report stored, a hang, a delivery
// Not signal-safe.

/// Something the client did, as its observers hear it.
package enum CrumbsClientEvent: Sendable {
  /// The previous sessions were processed (their reports stored) and counted; `metrics` is the
  /// session counts after that (nil when they could not be read: `problems` says why).
  case previousSessionsProcessed(PostMortemOutcome, metrics: SessionMetrics?)
  /// A report of this live process was stored (non-fatal, hang).
  case reportStored(CrashReport.Kind)
  /// The watchdog saw a watch stall past its threshold (also when its report was rate-limited).
  case hangBegan(watch: String)
  /// A report was delivered (at least one destination took it) and moved to sent/.
  case reportDelivered(CrashReport.Kind)
  /// A destination gave up on a report (attempts exhausted, or the app's `willSend` dropped it).
  case reportDropped(CrashReport.Kind)
}

/// What an observer is given.
package typealias CrumbsClientObserver = @Sendable (CrumbsClientEvent) -> Void

extension CrumbsClient {
  /// Adds `observer`; when the previous sessions are processed already, tells it of them now.
  package func addObserver(_ observer: @escaping CrumbsClientObserver) {
    let replay = state.withLock { state -> CrumbsClientEvent? in
      state.observers.append(observer)
      return state.processedSessions
    }
    if let replay { observer(replay) }
  }

  /// Tells every observer of `event`.
  func tell(_ event: CrumbsClientEvent) {
    for observer in state.withLock({ $0.observers }) { observer(event) }
  }

  /// Tells the observers added so far that the previous sessions were processed, and keeps the
  /// event for those added later: under one lock, so that each observer hears it exactly once.
  func previousSessionsProcessed(_ outcome: PostMortemOutcome, metrics: SessionMetrics?) {
    let event = CrumbsClientEvent.previousSessionsProcessed(outcome, metrics: metrics)
    let observers = state.withLock { state in
      state.processedSessions = event
      return state.observers
    }
    for observer in observers { observer(event) }
  }
}
