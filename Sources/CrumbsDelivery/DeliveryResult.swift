// DeliveryResult.swift — what the uploader tells its caller and its delegate: one result per
// attempt (DeliveryResult), a request that got no answer (DeliveryFailure), and what one pass
// did (DeliveryPass).
//
// Entry points: ReportUploader.deliverPendingNow() returns a DeliveryPass of DeliveryResults;
// the delegate's serverDidRespond / serverDidFail / didFailSending receive them one by one.
// Not signal-safe.

import CrumbsReports

/// What happened to one report at one destination in a pass.
public struct DeliveryResult: Sendable, Equatable, CustomStringConvertible {
  public enum Outcome: Sendable, Equatable {
    /// Accepted (2xx).
    case delivered(status: Int)
    /// Failed; tried again at `nextAttemptUnixNano` (0 with `.none`: at the next launch).
    case willRetry(reason: String, nextAttemptUnixNano: UInt64)
    /// 429: this destination is paused until then; the attempt was not counted.
    case throttled(untilUnixNano: UInt64)
    /// Refused for good or given up; the reason is stored in dropped.reason.
    case dropped(reason: String)
    /// The client-side rate limit (`reportsPerMinute`) was reached: nothing was sent.
    case limitReached

    /// Whether the destination accepted the report (`delivered`).
    package var isDelivered: Bool {
      if case .delivered = self { return true }
      return false
    }
  }

  public var reportID: String
  public var destination: String
  public var outcome: Outcome
  /// Counted attempts so far at this destination.
  public var attempts: Int
  /// The HTTP status, when the server answered.
  public var status: Int?
  /// What the server said it rejected from a request it accepted (OTLP partial success).
  public var partialSuccess: PartialSuccess? = nil

  public var description: String {
    let what: String
    switch outcome {
    case .delivered(let status):
      what = "delivered (\(status))" + (partialSuccess.map { ", \($0)" } ?? "")
    case .willRetry(let reason, _): what = "will retry: \(reason)"
    case .throttled: what = "throttled (429)"
    case .dropped(let reason): what = "dropped: \(reason)"
    case .limitReached: what = "rate limit reached"
    }
    return "\(reportID) → \(destination): \(what) after \(attempts) attempt(s)"
  }
}

/// A request that got no HTTP answer.
public struct DeliveryFailure: Error, Sendable, Equatable, CustomStringConvertible {
  public var reportID: String
  public var destination: String
  /// The URL with secrets redacted.
  public var url: String
  public var error: TransportError
  public var description: String { "\(destination) \(url): \(error)" }
}

/// What one pass did.
public struct DeliveryPass: Sendable {
  /// One per attempt (and one `.limitReached` when the rate limit stopped the pass).
  public var results: [DeliveryResult] = []
  /// One per attempt to send an outbox event (a session summary), after the reports.
  public var events: [DeliveryResult] = []
  public var evictions: [Eviction] = []
  /// Reports that moved to sent/ or dropped/ in this pass.
  public var finished: [(id: String, state: ReportState)] = []
  /// Reports quarantined because their report.json was unreadable.
  public var quarantined: [String] = []
  /// When the earliest waiting report is due (nil: nothing waits in this process).
  public var nextDueUnixNano: UInt64?

  /// Notes that something waits until `unixNano` (0: no time): the pass is due again at the
  /// earliest of what waits.
  mutating func due(at unixNano: UInt64) {
    if unixNano != 0 { nextDueUnixNano = min(nextDueUnixNano ?? .max, unixNano) }
  }
  /// Another process held the delivery lock: this pass did nothing.
  public var lockBusy = false
  /// The transport cannot send at all (libcurl is not installed), in one line that says what to
  /// install: this pass attempted nothing, and every report stays pending, uncounted.
  public var missingTransport: String?
}
