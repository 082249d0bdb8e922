// CrumbsClient+Hangs.swift — the app's side of hang detection: named heartbeats, and the
// watchdog started and stopped with the client (Hangs/HangWatchdog.swift does the watching).

import Synchronization

/// What the watchdog did (tests wait on these events instead of on time).
package enum HangWatchdogEvent: Sendable {
  /// A check ended; the number of checks so far.
  case checked(UInt64)
  /// A hang began and its report was stored (nil: rate-limited, refused or not stored).
  case began(watch: String, report: StoredReport?)
  /// A hang ended after `nanoseconds`.
  case ended(watch: String, nanoseconds: UInt64)
}

extension CrumbsClient {
  /// Tests only: called on the watchdog thread after each thing it did.
  package static let hangWatchdogEvents = Mutex<(@Sendable (HangWatchdogEvent) -> Void)?>(nil)

  /// A named sign of life for a loop the watchdog should watch (an event loop, a worker, a
  /// request loop): call `beat()` each turn (a few nanoseconds: no lock, no allocation) and
  /// `end()` when the loop finishes. Silent for `threshold` seconds (default: the configured
  /// `hangs.threshold`), it is a hang: a `hang` report names it, led by the thread that made
  /// it (make it on the loop's own thread). Held weakly: a heartbeat the app dropped is no longer watched. With hang detection
  /// off (`configuration.hangs` nil) the heartbeat is returned but nobody watches it.
  public func heartbeat(_ name: String, threshold: Double? = nil) -> Heartbeat {
    let heartbeat = Heartbeat(
      name: name, threshold: threshold ?? configuration.hangs?.usableThreshold ?? 3)
    watchdog?.watch(heartbeat)
    return heartbeat
  }

  /// Starts the watchdog's thread (the background work of `start`).
  func startWatchdog() {
    guard let watchdog else { return }
    do {
      try watchdog.start()
    } catch {
      state.withLock { $0.problems.append("cannot start the hang watchdog: \(error)") }
    }
  }
}
