// TrailEntries.swift — a stored report's breadcrumb trail read back from its LZ4 JSON Lines
// attachment, for destinations that send breadcrumbs one by one (OTLP log records, Backtrace's
// breadcrumb file). Schema: Breadcrumb.jsonLine() (BreadcrumbJSON.swift).
// Every destination reads the trail through trailAttachment(), which verifies the LZ4 frame
// first: a damaged trail is left out, and named with the same reason (TrailProblem), whatever
// the format. Entry points: trailAttachment() → trailEntries(). Not signal-safe.

import CrumbsRecorder
import CrumbsReports
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// One breadcrumb as read back from a trail attachment.
public struct TrailEntry: Sendable, Equatable, Codable {
  /// ISO 8601 as stored: microseconds (milliseconds in trails written by older versions).
  public var timestamp: String
  public var id: UInt64
  public var seq: UInt32
  public var thread: UInt32
  public var level: String
  public var type: String
  public var message: String
  public var attributes: [String: String]
  public var truncated: Bool?
  /// With `truncated`: `message`, `attributes` or both (nil in trails written by older versions).
  public var truncatedParts: [String]?
  public var signalHandler: Bool?

  enum CodingKeys: String, CodingKey {
    case timestamp, id, seq, thread, level, type, message, attributes, truncated
    case truncatedParts = "truncated_parts"
    case signalHandler = "signal_handler"
  }

  /// `timestamp` as nanoseconds since the epoch (0 when unparseable, or outside what 64-bit
  /// nanoseconds since 1970 hold: see `ISO8601.nanoseconds`).
  public var timeUnixNano: UInt64 { ISO8601.nanoseconds(timestamp) ?? 0 }
}

/// Why a report's trail is left out of what is sent: the attachment's name and the reason, as
/// both destinations list it among the omitted attachments.
public struct TrailProblem: Error, Sendable, Equatable, CustomStringConvertible {
  /// The attachment's file name (`breadcrumbs.jsonl.lz4`).
  public var name: String
  /// `unreadable: …` or `damaged: …` (e.g. `damaged: content checksum mismatch`).
  public var reason: String
  public var description: String { "\(name): \(reason)" }
}

extension StoredReport {
  /// The most a trail may decompress to (a ring holds far less).
  static let trailTextLimit = 1 << 30

  /// The trail attachment's bytes once verified as whole LZ4 frames (LZ4Frame.verify: magic,
  /// descriptor checksum, block sizes, content checksum); nil when the report has none. Every
  /// destination reads the trail through here, so a damaged one is left out, with the same
  /// reason, whatever the format.
  public func trailAttachment() throws(TrailProblem) -> [UInt8]? {
    // A trail `willSend` edited (ReportDraft): empty means none is sent.
    if let trailOverride { return trailOverride.isEmpty ? nil : trailOverride }
    guard let name = report.breadcrumbs.attachment else { return nil }
    let bytes: [UInt8]
    do {
      bytes = try readFile(name, limit: 256 << 20)
    } catch {
      throw TrailProblem(name: name, reason: "unreadable: \(error)")
    }
    do {
      try LZ4Frame.verify(bytes, limit: Self.trailTextLimit)
    } catch {
      throw TrailProblem(name: name, reason: "damaged: \(error.reason)")
    }
    return bytes
  }

  /// The trail's entries, oldest first; empty without a trail. Lines that do not parse are
  /// skipped (the attachment was written by us, so that means damage, not a format change).
  public func trailEntries() throws(TrailProblem) -> [TrailEntry] {
    guard let compressed = try trailAttachment(), let name = report.breadcrumbs.attachment else { return [] }
    do {
      return TrailEntry.entries(jsonLines: try LZ4Frame.decompress(compressed, limit: Self.trailTextLimit))
    } catch {
      throw TrailProblem(name: name, reason: "damaged: \(error.reason)")
    }
  }
}

extension TrailEntry {
  /// The entries of a trail's JSON Lines text, in order; lines that do not decode are skipped.
  public static func entries(jsonLines text: [UInt8]) -> [TrailEntry] {
    let decoder = JSONDecoder()
    return text.split(separator: UInt8(ascii: "\n")).compactMap {
      try? decoder.decode(TrailEntry.self, from: Data($0))
    }
  }
}

extension ISO8601 {
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
