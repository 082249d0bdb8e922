// RetryAfter.swift — reading what a server's answer says about coming back: its Retry-After
// (delay-seconds or an IMF-fixdate, RFC 9110) and the start of a refusal's body for the stored
// reason. Both come from the network and run on the delivery thread inside the app: nothing in
// them may trap (Fuzz/HTTPHeaders fuzzes them with RetryPolicy).
//
// Entry points, in call order: RetryPolicy.pausedUntil(_:now:default:) → retryAfter(_:now:default:)
// → httpDate(_:); excerpt(_:) for a refusal. Not signal-safe.

#if canImport(Glibc)
  import Glibc
#endif

extension RetryPolicy {
  /// When a destination that answered `answer` (a 429) may be tried again: `now` plus its
  /// Retry-After (see `retryAfter`), pinned at the end of time rather than overflowing.
  package static func pausedUntil(_ answer: HTTPResponse, now: UInt64, default fallback: Double) -> UInt64 {
    adding(now, retryAfter(answer.headers["retry-after"], now: now, default: fallback))
  }

  /// Seconds (as nanoseconds) to wait per a Retry-After value: delay-seconds or an HTTP date
  /// (IMF-fixdate). Unusable values (negative, not a number, a date that does not parse) give
  /// `default`; waits are capped at `maxRetryAfter` (a day). The value comes from the network:
  /// nothing in it may trap.
  package static func retryAfter(_ value: String?, now: UInt64, default fallback: Double) -> UInt64 {
    func nanoseconds(_ seconds: Double) -> UInt64 {
      // NaN fails both comparisons: no wait rather than a trap in UInt64(_:).
      guard seconds > 0 else { return 0 }
      return UInt64(min(seconds, maxRetryAfter) * 1e9)
    }
    guard let value = value?.trimmed(of: " \t") else { return nanoseconds(fallback) }
    if let seconds = Double(value), seconds >= 0 { return nanoseconds(seconds) }
    guard let date = httpDate(value) else { return nanoseconds(fallback) }
    return nanoseconds(date - Double(now) / 1e9)
  }

  /// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110);
  /// nil unless every field is in its range (a four-digit year, a real time of day).
  package static func httpDate(_ text: String) -> Double? {
    let fields = text.split(separator: " ")
    guard fields.count == 6, fields[5] == "GMT", let day = Int32(fields[1]), (1...31).contains(day),
      let year = Int32(fields[3]), (1...9999).contains(year)
    else { return nil }
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    guard let month = months.firstIndex(of: String(fields[2])) else { return nil }
    let clock = fields[4].split(separator: ":", omittingEmptySubsequences: false).compactMap { Int32($0) }
    guard clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]),
      (0...60).contains(clock[2])
    else { return nil }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = Int32(month)
    parts.tm_mday = day
    parts.tm_hour = clock[0]
    parts.tm_min = clock[1]
    parts.tm_sec = clock[2]
    return Double(timegm(&parts))
  }

  /// The start of a refusal's body, for the stored reason.
  package static func excerpt(_ body: [UInt8]) -> String {
    guard !body.isEmpty else { return "" }
    let text = String(decoding: body.prefix(200), as: UTF8.self)
      .map { $0.isNewline ? " " : $0 }
    return ": " + String(text).trimmed(of: " ")
  }
}
