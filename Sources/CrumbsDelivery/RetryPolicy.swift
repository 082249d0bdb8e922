// RetryPolicy.swift — the one retry policy of delivery: what an answer (or the lack of one)
// means for the next attempt. The report uploader (ReportUploader.swift) and the symbol upload
// (BacktraceSymbolUpload.swift) both ask it; neither restates it.
//
//   2xx, whole request sent     delivered (a partial success is handed on)
//   2xx before it was sent      retried: nothing says the server has it
//   429 (verdict .throttled)    paused until Retry-After (seconds or HTTP date; the default
//                               when there is none usable), at most a day
//   verdict .retry (408, 5xx…),
//   no answer                   retried after retryInterval·2^(n-1) (capped at
//                               maxRetryInterval, less up to `jitter` of it at random), never
//                               sooner than the answer's Retry-After; given up once
//                               `attempts` reaches retryLimit
//   verdict .dropped (413, 4xx),
//   an invalid URL              dropped: the same request would be refused again
//
// Which status gets which verdict is the destination's (ReportDestination.verdict(on:to:)).
// Whether a pause counts as an attempt is the caller's: the uploader pauses the destination and
// does not count it; the symbol upload, one file in a loop, counts it so that a server that
// always answers 429 ends the loop.
//
// Entry points, in call order: RetryPolicy(…) (DeliverySettings.retryPolicy, or the symbol
// upload's fields) → decision(on:attempts:now:random:) after each attempt → backoff(afterAttempt:
// random:) for the wait it gives; rescheduled(next:last:now:cap:) when a schedule is read back
// under a clock that may have been wrong (ReportUploader.swift). Pure: the clock and the random draw are arguments, nothing
// here does I/O, and any input (settings are the app's, statuses, headers and attempt counts
// come from the network or from delivery.json) gives an answer, never a trap. The Retry-After
// parser is RetryAfter.swift. Not signal-safe (it allocates).

#if canImport(Glibc)
  import Glibc
#endif

/// What an answer means for the next attempt (see the file comment).
public struct RetryPolicy: Sendable, Equatable {
  /// Counted attempts before giving up.
  public var retryLimit: Int
  /// Seconds before the first retry; doubled after each further failure.
  public var retryInterval: Double
  /// The longest backoff, in seconds.
  public var maxRetryInterval: Double
  /// The fraction of each backoff that is random (0: none; 0.5: between half and all of it).
  public var jitter: Double
  /// The pause after a 429 that carries no usable Retry-After, in seconds.
  public var defaultRetryAfter: Double

  public init(
    retryLimit: Int = 3, retryInterval: Double = 60, maxRetryInterval: Double = 3600, jitter: Double = 0.5,
    defaultRetryAfter: Double = 60
  ) {
    self.retryLimit = retryLimit
    self.retryInterval = retryInterval
    self.maxRetryInterval = maxRetryInterval
    self.jitter = jitter
    self.defaultRetryAfter = defaultRetryAfter
  }

  /// The longest pause a Retry-After can ask for (a day).
  public static let maxRetryAfter: Double = 86_400
  /// The longest wait any setting can make (about 31 years); longer ones, infinity included, are
  /// this: nanoseconds from now stay far from overflowing.
  public static let maxWait: Double = 1e9

  /// How far in the future a recorded attempt may lie before the clock that recorded it is taken
  /// to have been wrong (a clock stepped back by NTP by less than this changes nothing).
  public static let clockTolerance: Double = 300

  /// What one attempt got.
  public enum Answer: Sendable {
    /// The server answered, and the destination read it as `verdict`.
    case answered(HTTPResponse, verdict: AnswerVerdict)
    /// No answer.
    case failed(TransportError)
  }

  /// What to do next. Reasons are plain text; what in them came from the server (a body's
  /// excerpt, a destination's reading of it) has passed through the request's Redactor.
  public enum Decision: Sendable, Equatable {
    case delivered(PartialSuccess?)
    /// Not before `until` (wall-clock ns); the answer was a 429.
    case throttled(until: UInt64)
    /// Again at `at` (wall-clock ns).
    case retry(reason: String, at: UInt64)
    /// Not again: refused for good.
    case drop(reason: String)
    /// Not again: `attempts` reached the limit; `lastFailure` is the last attempt's reason.
    case giveUp(lastFailure: String, attempts: Int)

    /// Why it is not delivered, as stored and shown ("gave up after 3 attempts: HTTP 503").
    public var reason: String? {
      switch self {
      case .delivered, .throttled: nil
      case .retry(let reason, _), .drop(let reason): reason
      case .giveUp(let last, let attempts): "gave up after \(attempts) attempts: \(last)"
      }
    }
  }

  /// The decision after an attempt that got `answer`, `attempts` being the counted attempts so
  /// far (this one included), at wall-clock `now` (ns), `random` a draw in 0..<1 for the jitter;
  /// `redactor` (the request's) clears secrets from what the server said.
  public func decision(
    on answer: Answer, attempts: Int, now: UInt64, random: Double, redactor: Redactor = Redactor(secrets: [])
  ) -> Decision {
    switch answer {
    case .failed(.invalidURL):
      return .drop(reason: "\(TransportError.invalidURL)")
    case .failed(let error):
      return retryOrGiveUp("\(error)", attempts: attempts, now: now, random: random)
    case .answered(let response, _) where (200..<300).contains(response.status) && !response.requestSent:
      return retryOrGiveUp(
        "HTTP \(response.status) answered before the request was sent", attempts: attempts, now: now,
        random: random)
    case .answered(_, .delivered(let partial)):
      return .delivered(partial)
    case .answered(let response, .throttled):
      return .throttled(until: Self.pausedUntil(response, now: now, default: defaultRetryAfter))
    case .answered(let response, .retry):
      let decision = retryOrGiveUp("HTTP \(response.status)", attempts: attempts, now: now, random: random)
      // A server that says when to come back (503 with Retry-After) is not asked sooner.
      guard case .retry(let reason, let at) = decision, response.headers["retry-after"] != nil else {
        return decision
      }
      return .retry(reason: reason, at: max(at, Self.pausedUntil(response, now: now, default: 0)))
    case .answered(let response, .dropped(let given)):
      let said = given.map { ": " + $0 } ?? Self.excerpt(response.body)
      return .drop(reason: "HTTP \(response.status)" + redactor.redact(said))
    }
  }

  /// Retried after the backoff, or given up once `attempts` reached `retryLimit`.
  func retryOrGiveUp(_ reason: String, attempts: Int, now: UInt64, random: Double) -> Decision {
    guard attempts < retryLimit else { return .giveUp(lastFailure: reason, attempts: attempts) }
    return .retry(reason: reason, at: Self.adding(now, backoff(afterAttempt: attempts, random: random)))
  }

  /// Nanoseconds to wait after the `attempt`-th failure: retryInterval·2^(attempt-1), capped,
  /// minus up to `jitter` of it (`random` in 0..<1). `attempt` may come from delivery.json (a
  /// report folder: untrusted), so any Int must do; the settings are the app's, so any Double
  /// must: the wait is at most `maxWait`, and none when it is not a positive number.
  public func backoff(afterAttempt attempt: Int, random: Double) -> UInt64 {
    let exponent = Double(min(max(attempt, 1) - 1, 30))
    let full = min(retryInterval * pow(2, exponent), maxRetryInterval)
    let jitter = self.jitter > 0 ? min(self.jitter, 1) : 0  // NaN: none
    let draw = random >= 0 ? min(random, 1) : 0  // NaN: none
    let jittered = full * (1 - jitter * draw)
    guard jittered > 0 else { return 0 }  // NaN included
    return UInt64(min(jittered, Self.maxWait) * 1e9)
  }

  /// A schedule — `next`, set at `last` — under the clock `now`: when `last` lies more than
  /// `clockTolerance` ahead, the clock that set it was wrong, so its wait starts now; and `next`
  /// is at most `cap` seconds from now. Returns the (possibly moved) `last` and `next`.
  static func rescheduled(next: UInt64, last: UInt64?, now: UInt64, cap: Double) -> (UInt64?, UInt64) {
    // A cap that is not a positive number (settings are the app's) allows no wait at all.
    let capNanoseconds = cap > 0 ? UInt64(min(cap, maxWait) * 1e9) : 0
    var last = last
    var next = next
    if let recorded = last, recorded > adding(now, UInt64(clockTolerance * 1e9)) {
      next = adding(now, min(next > recorded ? next - recorded : 0, capNanoseconds))
      last = now
    }
    return (last, min(next, adding(now, capNanoseconds)))
  }

  /// `base + nanoseconds`, pinned at the end of time rather than overflowing.
  public static func adding(_ base: UInt64, _ nanoseconds: UInt64) -> UInt64 {
    let (sum, overflow) = base.addingReportingOverflow(nanoseconds)
    return overflow ? .max : sum
  }
}
