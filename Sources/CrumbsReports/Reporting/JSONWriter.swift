// JSONWriter.swift — the one JSON writer: the trail, report.json, the Backtrace report, OTLP/JSON
// and the CLI all write through it. Keys come out in the order written (JSONEncoder sorts or scrambles them;
// JSON Lines readers and people like a stable order), and scopes place every comma, brace and
// bracket, so no caller writes punctuation by hand (one exception: `line`, a value of fixed
// shape written raw, the trail's breadcrumbs, held by a test to what the scopes write):
//
//   var json = JSONWriter()
//   json.object { object in
//     object.field("name", "crumbs")
//     object.array("frames") { frames in
//       for address in addresses { frames.append(address) }
//     }
//   }
//   json.bytes   // {"name":"crumbs","frames":[1,2]}
//
// Strings are escaped here and nowhere else (RFC 8259: quote, backslash, and every control
// character; DEL too). A Swift String is always valid UTF-8 (bytes that were not are already
// U+FFFD), so the output is valid UTF-8. Numbers are written without allocating. Not
// signal-safe (allocates).

import CrumbsRecorder

/// JSON text: one or more top-level values (`object`, `array`, `value`), each line of JSON Lines
/// ended with `newline()`.
package struct JSONWriter {
  /// The text written so far.
  package fileprivate(set) var bytes: [UInt8] = []
  /// The last second a timestamp formatted (a trail's breadcrumbs mostly share their second).
  fileprivate var seconds = TimestampSeconds()

  package init(reservingCapacity capacity: Int = 0) {
    bytes.reserveCapacity(capacity)
  }

  /// A top-level object.
  package mutating func object(_ body: (inout JSONObject) -> Void) {
    var scope = JSONObject()
    swap(&scope.writer, &self)  // the buffer moves into the scope and back: never copied
    scope.writer.bytes.append(UInt8(ascii: "{"))
    body(&scope)
    scope.writer.bytes.append(UInt8(ascii: "}"))
    swap(&scope.writer, &self)
  }

  /// A top-level array.
  package mutating func array(_ body: (inout JSONArray) -> Void) {
    var scope = JSONArray()
    swap(&scope.writer, &self)
    scope.writer.bytes.append(UInt8(ascii: "["))
    body(&scope)
    scope.writer.bytes.append(UInt8(ascii: "]"))
    swap(&scope.writer, &self)
  }

  /// A top-level string.
  package mutating func value(_ text: String) { string(text) }

  /// Ends a line of JSON Lines.
  package mutating func newline() { bytes.append(UInt8(ascii: "\n")) }

  // MARK: Values (written by the scopes after their separators)

  /// A JSON string literal, escaped per RFC 8259 (`JSONWriter.escape`, written into a scratch
  /// buffer on the stack and copied whole).
  fileprivate mutating func string(_ value: String) {
    var value = value
    value.withUTF8 { utf8 in
      withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.escapedBound(utf8.count)) { scratch in
        let count = Self.escape(utf8, into: scratch.baseAddress!)
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<count]))
      }
    }
  }

  /// The most bytes `escape` writes for `count` bytes of text: six per byte (`\u00XX`) and the
  /// quotes.
  static func escapedBound(_ count: Int) -> Int { count * 6 + 2 }

  /// Writes `utf8` as a quoted JSON string literal at `out` (which has room for
  /// `escapedBound(utf8.count)` bytes) and returns how many bytes it wrote. The runs between
  /// bytes that need escaping are copied whole (most strings have none): a byte at a time, a
  /// trail's 500 KB took 5 ms. The only place strings are escaped.
  static func escape(_ utf8: UnsafeBufferPointer<UInt8>, into out: UnsafeMutablePointer<UInt8>) -> Int {
    var written = 0
    func put(_ byte: UInt8) {
      out[written] = byte
      written += 1
    }
    put(UInt8(ascii: "\""))
    var runStart = 0
    var index = 0
    while index < utf8.count {
      // Eight bytes at a time while none of them needs escaping (SWAR: `needsEscape`).
      if utf8.count - index >= 8 {
        let word = UInt64(
          littleEndian: UnsafeRawPointer(utf8.baseAddress! + index).loadUnaligned(as: UInt64.self))
        if !needsEscape(word) {
          index += 8
          continue
        }
      }
      let byte = utf8[index]
      index += 1
      guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F else {
        continue
      }
      let position = index - 1
      if position > runStart {
        (out + written).update(from: utf8.baseAddress! + runStart, count: position - runStart)
        written += position - runStart
      }
      runStart = index
      put(UInt8(ascii: "\\"))
      switch byte {
      case UInt8(ascii: "\""): put(UInt8(ascii: "\""))
      case UInt8(ascii: "\\"): put(UInt8(ascii: "\\"))
      case UInt8(ascii: "\n"): put(UInt8(ascii: "n"))
      case UInt8(ascii: "\r"): put(UInt8(ascii: "r"))
      case UInt8(ascii: "\t"): put(UInt8(ascii: "t"))
      default:
        put(UInt8(ascii: "u"))
        put(UInt8(ascii: "0"))
        put(UInt8(ascii: "0"))
        put(hexDigit(byte >> 4))
        put(hexDigit(byte & 0xF))
      }
    }
    if utf8.count > runStart {
      (out + written).update(from: utf8.baseAddress! + runStart, count: utf8.count - runStart)
      written += utf8.count - runStart
    }
    put(UInt8(ascii: "\""))
    return written
  }

  private static func hexDigit(_ value: UInt8) -> UInt8 {
    value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
  }

  /// Whether any of the eight bytes of `word` is a control character, a quote, a backslash or DEL: the
  /// classic "has a byte less than n" and "has a zero byte" bit tricks, exact for whether any
  /// byte matches (bytes from 0x80 up, UTF-8's multi-byte sequences, never do).
  private static func needsEscape(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    func hasZeroByte(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
    let control = (word &- ones &* 0x20) & ~word & highs != 0
    return control || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
      || hasZeroByte(word ^ (ones &* 0x7F))
  }

  fileprivate mutating func integer(_ value: some BinaryInteger) {
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { scratch in
      let count = Self.digits(UInt64(value.magnitude), into: scratch.baseAddress!)
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<count]))
    }
  }

  /// Writes the decimal digits of `value` (at most 20) at `out`; returns how many. Two digits
  /// per division: a trail's ids have fifteen.
  static func digits(_ value: UInt64, into out: UnsafeMutablePointer<UInt8>) -> Int {
    var count = 1
    var power: UInt64 = 10
    while count < 20, value >= power {
      count += 1
      power = power &* 10
    }
    var remaining = value
    var index = count
    while remaining >= 100 {
      let pair = UInt8(remaining % 100)
      remaining /= 100
      index -= 2
      out[index] = UInt8(ascii: "0") + pair / 10
      out[index + 1] = UInt8(ascii: "0") + pair % 10
    }
    if remaining >= 10 {
      out[0] = UInt8(ascii: "0") + UInt8(remaining / 10)
      out[1] = UInt8(ascii: "0") + UInt8(remaining % 10)
    } else {
      out[0] = UInt8(ascii: "0") + UInt8(remaining)
    }
    return count
  }

  /// JSON has no NaN or infinities: they are written as `null` (OTLP/JSON spells them as
  /// strings itself, before they get here).
  fileprivate mutating func double(_ value: Double) {
    guard value.isFinite else { return append("null") }
    append(value.description)
  }

  fileprivate mutating func bool(_ value: Bool) { append(value ? "true" : "false") }

  /// An ISO 8601 UTC timestamp string with `fractionDigits` (0…9) digits of seconds, e.g.
  /// "2026-11-22T04:10:11.123456Z".
  fileprivate mutating func timestamp(nanoseconds: UInt64, fractionDigits: Int) {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: TimestampSeconds.bound) { scratch in
      let count = seconds.write(
        nanoseconds: nanoseconds, fractionDigits: fractionDigits, into: scratch.baseAddress!)
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<count]))
    }
  }

  /// Appends one value of a fixed shape (a breadcrumb's line: BreadcrumbJSON.swift) written
  /// through `JSONLine`, which writes straight into a buffer of `bound` bytes on the stack with
  /// no capacity check per byte, then copies it whole: the trail's thousands of lines were
  /// dominated by the scopes' bookkeeping. The caller writes the punctuation itself, so a line
  /// written this way must have a test against the same value written through the scopes.
  package mutating func line(bound: Int, _ body: (inout JSONLine) -> Void) {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bound) { scratch in
      var line = JSONLine(out: scratch.baseAddress!, bound: bound)
      swap(&line.seconds, &seconds)
      body(&line)
      swap(&line.seconds, &seconds)
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<line.count]))
    }
  }

  fileprivate mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
}

/// The inside of an object: fields, in the order written.
package struct JSONObject {
  fileprivate var writer = JSONWriter()
  private var hasFields = false

  fileprivate init() {}

  private mutating func key(_ name: String) {
    if hasFields { writer.bytes.append(UInt8(ascii: ",")) }
    hasFields = true
    writer.string(name)
    writer.bytes.append(UInt8(ascii: ":"))
  }

  package mutating func field(_ key: String, _ value: String) {
    self.key(key)
    writer.string(value)
  }

  package mutating func field(_ key: String, _ value: some BinaryInteger) {
    self.key(key)
    writer.integer(value)
  }

  package mutating func field(_ key: String, _ value: Double) {
    self.key(key)
    writer.double(value)
  }

  package mutating func field(_ key: String, _ value: Bool) {
    self.key(key)
    writer.bool(value)
  }

  /// A UTC timestamp string (see `JSONWriter`), e.g. `"2026-11-22T04:10:11.123456Z"`.
  package mutating func field(_ key: String, timestamp nanoseconds: UInt64, fractionDigits: Int) {
    self.key(key)
    writer.timestamp(nanoseconds: nanoseconds, fractionDigits: fractionDigits)
  }

  package mutating func object(_ key: String, _ body: (inout JSONObject) -> Void) {
    self.key(key)
    writer.object(body)
  }

  package mutating func array(_ key: String, _ body: (inout JSONArray) -> Void) {
    self.key(key)
    writer.array(body)
  }
}

/// The inside of an array: elements, in the order written.
package struct JSONArray {
  fileprivate var writer = JSONWriter()
  private var hasElements = false

  fileprivate init() {}

  private mutating func separator() {
    if hasElements { writer.bytes.append(UInt8(ascii: ",")) }
    hasElements = true
  }

  package mutating func append(_ value: String) {
    separator()
    writer.string(value)
  }

  package mutating func append(_ value: some BinaryInteger) {
    separator()
    writer.integer(value)
  }

  package mutating func append(_ value: Double) {
    separator()
    writer.double(value)
  }

  package mutating func append(_ value: Bool) {
    separator()
    writer.bool(value)
  }

  package mutating func object(_ body: (inout JSONObject) -> Void) {
    separator()
    writer.object(body)
  }

  package mutating func array(_ body: (inout JSONArray) -> Void) {
    separator()
    writer.array(body)
  }
}

/// `text` as a JSON string literal (quotes included), escaped per RFC 8259.
public func jsonQuoted(_ text: String) -> String {
  var json = JSONWriter()
  json.value(text)
  return String(decoding: json.bytes, as: UTF8.self)
}

/// The "YYYY-MM-DDTHH:MM:SS" text of the last second a timestamp was written in: gmtime plus
/// formatting per line would dominate a trail.
struct TimestampSeconds {
  private var second: UInt64 = .max
  private var text: [UInt8] = []

  /// The most bytes `write` writes: quotes, 19, a point, 9 digits, Z.
  static let bound = 32

  /// Writes `nanoseconds` as a quoted ISO 8601 UTC timestamp with `fractionDigits` (0…9) digits
  /// at `out`; returns how many bytes.
  mutating func write(nanoseconds: UInt64, fractionDigits: Int, into out: UnsafeMutablePointer<UInt8>) -> Int
  {
    let second = nanoseconds / 1_000_000_000
    if second != self.second {
      self.second = second
      text = Array(ISO8601.string(nanoseconds: second * 1_000_000_000, fractionDigits: 0).utf8.prefix(19))
    }
    var count = 0
    out[count] = UInt8(ascii: "\"")
    count += 1
    text.withUnsafeBufferPointer { text in
      (out + count).update(from: text.baseAddress!, count: text.count)
      count += text.count
    }
    let digits = min(max(fractionDigits, 0), 9)
    if digits > 0 {
      out[count] = UInt8(ascii: ".")
      count += 1
      var divisor: UInt64 = 100_000_000
      var fraction = nanoseconds % 1_000_000_000
      for _ in 0..<digits {
        out[count] = UInt8(ascii: "0") + UInt8(fraction / divisor)
        count += 1
        fraction %= divisor
        divisor /= 10
      }
    }
    out[count] = UInt8(ascii: "Z")
    out[count + 1] = UInt8(ascii: "\"")
    return count + 2
  }
}

/// A line of a fixed shape being written (`JSONWriter.line`): raw punctuation and keys, and
/// values written as the scopes write them (the same escaping, digits and timestamps).
package struct JSONLine {
  private let out: UnsafeMutablePointer<UInt8>
  private let bound: Int
  fileprivate var seconds = TimestampSeconds()
  /// Bytes written so far.
  package private(set) var count = 0

  fileprivate init(out: UnsafeMutablePointer<UInt8>, bound: Int) {
    self.out = out
    self.bound = bound
  }

  /// Punctuation and keys, as they are (ASCII, nothing to escape).
  package mutating func raw(_ text: StaticString) {
    precondition(count + text.utf8CodeUnitCount <= bound, "JSONLine bound too small")
    (out + count).update(from: text.utf8Start, count: text.utf8CodeUnitCount)
    count += text.utf8CodeUnitCount
  }

  package mutating func string(_ value: String) {
    // The borrowed string's bytes where it has them contiguous (every native string), else a
    // copy made contiguous.
    let written = value.utf8.withContiguousStorageIfAvailable { utf8 in
      precondition(count + JSONWriter.escapedBound(utf8.count) <= bound, "JSONLine bound too small")
      return JSONWriter.escape(utf8, into: out + count)
    }
    if let written {
      count += written
    } else {
      var value = value
      value.withUTF8 { utf8 in
        precondition(count + JSONWriter.escapedBound(utf8.count) <= bound, "JSONLine bound too small")
        count += JSONWriter.escape(utf8, into: out + count)
      }
    }
  }

  /// `string(_:)` for text already as UTF-8 bytes (a ring's, read in place: BreadcrumbSlots).
  package mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
    precondition(count + JSONWriter.escapedBound(utf8.count) <= bound, "JSONLine bound too small")
    count += JSONWriter.escape(utf8, into: out + count)
  }

  package mutating func integer(_ value: UInt64) {
    precondition(count + 20 <= bound, "JSONLine bound too small")
    count += JSONWriter.digits(value, into: out + count)
  }

  package mutating func timestamp(nanoseconds: UInt64, fractionDigits: Int) {
    precondition(count + TimestampSeconds.bound <= bound, "JSONLine bound too small")
    count += seconds.write(nanoseconds: nanoseconds, fractionDigits: fractionDigits, into: out + count)
  }
}
