// ReportUploader+Schedule.swift — when the uploader may send: the backoff after a failure,
// schedules read back from delivery.json brought under the clock as it reads now, the
// client-side rate limit that reports and outbox events share, and the store's own limits run
// before each pass. Called by a pass (ReportUploader.swift) and the outbox
// (ReportUploader+Outbox.swift); see ReportUploader.swift's design comment for the rules.
// Not signal-safe.

import CrumbsPlatform
import CrumbsReports

extension ReportUploader {
  /// Nanoseconds to wait after the `attempt`-th failure (RetryPolicy.backoff, with this
  /// uploader's random draw).
  func backoff(afterAttempt attempt: Int) -> UInt64 {
    settings.retryPolicy.backoff(afterAttempt: attempt, random: random())
  }

  /// `base + nanoseconds`, pinned at the end of time rather than overflowing.
  static func adding(_ base: UInt64, _ nanoseconds: UInt64) -> UInt64 {
    RetryPolicy.adding(base, nanoseconds)
  }

  /// Brings a destination's schedule read from delivery.json within what the policy allows
  /// under the clock as it reads now (see the file comment); true when it changed.
  func rescheduleUnderClock(_ history: inout DeliveryState.Destination, now: UInt64) -> Bool {
    guard history.nextAttemptUnixNano != 0 || history.lastAttemptUnixNano != nil else { return false }
    // After a 429 the wait is the server's (up to a day); otherwise the backoff's (a 503's
    // Retry-After read back from here is held to it too).
    let cap = max(settings.maxRetryInterval, history.lastStatus == 429 ? RetryPolicy.maxRetryAfter : 0)
    let (last, next) = RetryPolicy.rescheduled(
      next: history.nextAttemptUnixNano, last: history.lastAttemptUnixNano, now: now, cap: cap)
    guard last != history.lastAttemptUnixNano || next != history.nextAttemptUnixNano else { return false }
    history.lastAttemptUnixNano = last
    history.nextAttemptUnixNano = next
    return true
  }

  /// Admits one more send under `reportsPerMinute`; once the limit is reached, the
  /// `.limitReached` result instead (told to `didReachLimit`), with the pass due again when the
  /// oldest send leaves the minute. Reports and outbox events share the one limit.
  func limitReached(
    id: String, destination: String, attempts: Int, now: UInt64, delegate: (any ReportUploaderDelegate)?,
    pass: inout DeliveryPass
  ) -> DeliveryResult? {
    guard !admitUnderRateLimit(now) else { return nil }
    let result = DeliveryResult(
      reportID: id, destination: destination, outcome: .limitReached, attempts: attempts)
    delegate?.didReachLimit(result)
    if let oldest = state.withLock({ $0.recentSends.first }) {
      pass.due(at: Self.adding(oldest, 60_000_000_000))
    }
    return result
  }

  private func admitUnderRateLimit(_ now: UInt64) -> Bool {
    guard settings.reportsPerMinute > 0 else { return true }
    return state.withLock { state in
      // Sends recorded while the clock read later than now count as sent now.
      state.recentSends = state.recentSends.map { min($0, now) }
      state.recentSends.removeAll { Self.adding($0, 60_000_000_000) <= now }
      guard state.recentSends.count < settings.reportsPerMinute else { return false }
      state.recentSends.append(now)
      return true
    }
  }

  // MARK: - Limits

  /// Keeps the store within its own limits (ReportStore.limits, ReportStore.enforceLimits); run
  /// before each pass.
  @discardableResult
  public func enforceLimits() -> [Eviction] {
    store.enforceLimits()
  }
}
