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

  /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (UTC, as `string(nanoseconds:)` writes it) into
  /// nanoseconds since the epoch. nil when it does not parse, a field is out of its range, or the
  /// instant is before 1970 or after 2554-07-21T23:34:33.709551615Z (the last one 64 bits of
  /// nanoseconds hold). Trails are read back from report folders: untrusted, never trapping.
  public static func nanoseconds(_ text: String) -> UInt64? {
    let bytes = Array(text.utf8)
    guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
    for (index, separator) in zip([4, 7, 10, 13, 16], "--T::".utf8) {
      guard bytes[index] == separator else { return nil }
    }
    // At most nine digits: always fits, no overflow to check.
    func number(_ range: Range<Int>) -> Int32? {
      var value: Int32 = 0
      for index in range {
        let digit = Int32(bytes[index]) - 48
        guard (0...9).contains(digit) else { return nil }
        value = value * 10 + digit
      }
      return value
    }
    guard let year = number(0..<4), let month = number(5..<7), (1...12).contains(month),
      let day = number(8..<10), (1...31).contains(day), let hour = number(11..<13), (0...23).contains(hour),
      let minute = number(14..<16), (0...59).contains(minute), let second = number(17..<19),
      (0...60).contains(second)
    else { return nil }
    var fraction: UInt64 = 0
    if bytes.count > 20 {
      let digits = 20..<(bytes.count - 1)
      guard bytes[19] == UInt8(ascii: "."), !digits.isEmpty, digits.count <= 9, let value = number(digits)
      else { return nil }
      fraction = UInt64(value)
      for _ in digits.count..<9 { fraction *= 10 }
    }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = month - 1
    parts.tm_mday = day
    parts.tm_hour = hour
    parts.tm_min = minute
    parts.tm_sec = second
    let seconds = timegm(&parts)
    guard seconds >= 0 else { return nil }
    let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
    let (total, carry) = whole.addingReportingOverflow(fraction)
    return overflow || carry ? nil : total
  }
}
