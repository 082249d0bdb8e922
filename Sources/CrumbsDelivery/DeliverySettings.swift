// DeliverySettings.swift — the app's delivery settings: how often and how long to retry (the
// RetryPolicy they make), in which order, how fast. How large the store may grow is the store's
// own configuration (StoreLimits, in CrumbsReports), not a delivery setting.
//
// Entry points: DeliverySettings() → ReportUploader(store:destinations:settings:), which asks
// `retryPolicy` after each attempt. Not signal-safe.

/// How delivery retries, in which order, and how fast.
public struct DeliverySettings: Sendable, Equatable {
  /// Whether failed deliveries are retried while the process runs.
  public enum RetryBehaviour: String, Sendable {
    /// Retried after `retryInterval`, doubling each time (with jitter), up to `maxRetryInterval`.
    case interval
    /// Not retried in this process: the report stays pending and is tried again by the next
    /// uploader (the next launch). Attempts still count towards `retryLimit`.
    case none
  }

  /// Which pending reports go first.
  public enum RetryOrder: String, Sendable {
    /// Oldest first (FIFO).
    case queue
    /// Newest first (LIFO): after an outage the latest crash arrives first.
    case stack
  }

  /// Attempts per destination before a report is dropped ("gave up after N attempts").
  public var retryLimit: Int = 3
  /// Seconds before the first retry; doubled after each further failure.
  public var retryInterval: Double = 60
  /// The longest wait between two attempts, in seconds.
  public var maxRetryInterval: Double = 3600
  public var retryBehaviour: RetryBehaviour = .interval
  public var retryOrder: RetryOrder = .queue
  /// The fraction of each wait that is random (0 = none, 0.5 = between half and all of it), so
  /// that many devices recovering from one outage do not retry in step.
  public var jitter: Double = 0.5
  /// Client-side rate limit on requests (0: none).
  public var reportsPerMinute: Int = 0
  /// The pause after a 429 that carries no usable Retry-After, in seconds.
  public var defaultRetryAfter: Double = 60
  /// Whether a report waits for its next attempt time. An explicit "send now" (the CLI) sets
  /// false: every pending report is tried at once; 429 pauses and limits still hold.
  public var honoursSchedule = true

  public init() {}

  /// The retry policy these settings name.
  public var retryPolicy: RetryPolicy {
    RetryPolicy(
      retryLimit: retryLimit, retryInterval: retryInterval, maxRetryInterval: maxRetryInterval,
      jitter: jitter,
      defaultRetryAfter: defaultRetryAfter)
  }
}
