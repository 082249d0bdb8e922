#if canImport(Glibc)
  import Glibc
#endif

/// ISO 8601 timestamps in UTC, e.g. `2026-11-22T04:10:11.123Z` (milliseconds by default).
public enum ISO8601 {
  /// Formats nanoseconds since the Unix epoch with `fractionDigits` (0…9) digits of seconds.
  public static func string(nanoseconds: UInt64, fractionDigits: Int = 3) -> String {
    var seconds = time_t(nanoseconds / 1_000_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func pad(_ value: Int, _ width: Int) -> String {
      let text = String(value)
      return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    let digits = min(max(fractionDigits, 0), 9)
    var fraction = Int(nanoseconds % 1_000_000_000)
    for _ in digits..<9 { fraction /= 10 }
    return
      "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))"
      + "T\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))"
      + (digits > 0 ? ".\(pad(fraction, digits))" : "") + "Z"
  }
}
