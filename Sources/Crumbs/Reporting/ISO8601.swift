#if canImport(Glibc)
  import Glibc
#endif

/// ISO 8601 timestamps in UTC with millisecond precision, e.g. `2026-11-22T04:10:11.123Z`.
public enum ISO8601 {
  /// Formats nanoseconds since the Unix epoch.
  public static func string(nanoseconds: UInt64) -> String {
    var seconds = time_t(nanoseconds / 1_000_000_000)
    let milliseconds = Int(nanoseconds / 1_000_000 % 1000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
      let text = String(value)
      return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
      + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
      + ".\(pad(Int32(milliseconds), 3))Z"
  }
}
