// JSONWriter.swift — the one JSON writer: the trail, the Backtrace report, OTLP/JSON and the CLI
// all write through it. Keys come out in the order written (JSONEncoder sorts or scrambles them;
// JSON Lines readers and people like a stable order), and scopes place every comma, brace and
// bracket, so no caller writes punctuation by hand:
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
  /// The last second formatted by a timestamp, and its "YYYY-MM-DDTHH:MM:SS" bytes: a trail's
  /// breadcrumbs mostly share their second, and gmtime plus formatting per line would dominate.
  private var cachedSecond: UInt64 = .max
  private var cachedSecondText: [UInt8] = []

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

  /// A JSON string literal, escaped per RFC 8259. The runs between bytes that need escaping are
  /// copied whole (most strings have none): a byte at a time, a trail's 500 KB took 5 ms.
  fileprivate mutating func string(_ value: String) {
    var value = value
    value.withUTF8 { utf8 in escaped(utf8) }
  }

  private mutating func escaped(_ utf8: UnsafeBufferPointer<UInt8>) {
    bytes.append(UInt8(ascii: "\""))
    var runStart = 0
    var index = 0
    while index < utf8.count {
      // Eight bytes at a time while none of them needs escaping (SWAR: `needsEscape`).
      if utf8.count - index >= 8 {
        let word = UInt64(
          littleEndian: UnsafeRawPointer(utf8.baseAddress! + index).loadUnaligned(as: UInt64.self))
        if !Self.needsEscape(word) {
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
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<position]))
      runStart = index
      switch byte {
      case UInt8(ascii: "\""): append("\\\"")
      case UInt8(ascii: "\\"): append("\\\\")
      case UInt8(ascii: "\n"): append("\\n")
      case UInt8(ascii: "\r"): append("\\r")
      case UInt8(ascii: "\t"): append("\\t")
      default:
        append("\\u00")
        bytes.append(Self.hexDigits[Int(byte >> 4)])
        bytes.append(Self.hexDigits[Int(byte & 0xF)])
      }
    }
    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
    bytes.append(UInt8(ascii: "\""))
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

  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

  fileprivate mutating func integer(_ value: some BinaryInteger) {
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    var remaining = UInt64(value.magnitude)
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes on the stack, no allocation
    withUnsafeMutableBytes(of: &digits) { buffer in
      var index = buffer.count
      repeat {
        index -= 1
        buffer[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
        remaining /= 10
      } while remaining > 0
      bytes.append(
        contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]).assumingMemoryBound(to: UInt8.self))
    }
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
    let second = nanoseconds / 1_000_000_000
    if second != cachedSecond {
      cachedSecond = second
      cachedSecondText = Array(
        ISO8601.string(nanoseconds: second * 1_000_000_000, fractionDigits: 0).utf8.prefix(19))
    }
    bytes.append(UInt8(ascii: "\""))
    bytes.append(contentsOf: cachedSecondText)
    let digits = min(max(fractionDigits, 0), 9)
    if digits > 0 {
      bytes.append(UInt8(ascii: "."))
      var divisor: UInt64 = 100_000_000
      var fraction = nanoseconds % 1_000_000_000
      for _ in 0..<digits {
        bytes.append(UInt8(ascii: "0") + UInt8(fraction / divisor))
        fraction %= divisor
        divisor /= 10
      }
    }
    append("Z\"")
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
