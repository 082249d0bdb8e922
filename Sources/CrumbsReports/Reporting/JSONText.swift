// JSONText.swift — the few JSON writing primitives the breadcrumb trail needs, with a key order
// we choose (JSONEncoder sorts or scrambles keys; JSON Lines readers like a stable order).

import CrumbsRecorder

/// Appends JSON text to a byte buffer.
package struct JSONText {
  package init() {}

  package var bytes: [UInt8] = []
  /// The last second formatted by `timestamp`, and its "YYYY-MM-DDTHH:MM:SS" bytes: a trail's
  /// breadcrumbs mostly share their second, and gmtime plus formatting per line would dominate.
  private var cachedSecond: UInt64 = .max
  private var cachedSecondText: [UInt8] = []

  /// An ISO 8601 UTC timestamp string with milliseconds, e.g. "2026-11-22T04:10:11.123Z".
  package mutating func timestamp(nanoseconds: UInt64) {
    let second = nanoseconds / 1_000_000_000
    if second != cachedSecond {
      cachedSecond = second
      cachedSecondText = Array(ISO8601.string(nanoseconds: second * 1_000_000_000).utf8.prefix(19))
    }
    let milliseconds = Int(nanoseconds / 1_000_000 % 1000)
    bytes.append(UInt8(ascii: "\""))
    bytes.append(contentsOf: cachedSecondText)
    bytes.append(UInt8(ascii: "."))
    bytes.append(UInt8(ascii: "0") + UInt8(milliseconds / 100))
    bytes.append(UInt8(ascii: "0") + UInt8(milliseconds / 10 % 10))
    bytes.append(UInt8(ascii: "0") + UInt8(milliseconds % 10))
    bytes.append(UInt8(ascii: "Z"))
    bytes.append(UInt8(ascii: "\""))
  }

  /// A non-negative integer.
  package mutating func number(_ value: UInt64) {
    var remaining = value
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes on the stack, no allocation
    let count = withUnsafeMutableBytes(of: &digits) { buffer -> Int in
      var index = buffer.count
      repeat {
        index -= 1
        buffer[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
        remaining /= 10
      } while remaining > 0
      bytes.append(contentsOf: buffer[index...])
      return buffer.count - index
    }
    _ = count
  }

  package mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

  /// A JSON string literal, escaped per RFC 8259.
  package mutating func string(_ value: String) {
    bytes.append(UInt8(ascii: "\""))
    for byte in value.utf8 {
      switch byte {
      case UInt8(ascii: "\""): raw("\\\"")
      case UInt8(ascii: "\\"): raw("\\\\")
      case UInt8(ascii: "\n"): raw("\\n")
      case UInt8(ascii: "\r"): raw("\\r")
      case UInt8(ascii: "\t"): raw("\\t")
      case 0..<0x20, 0x7F:
        let hex = String(byte, radix: 16)
        raw("\\u00" + (hex.count == 1 ? "0" + hex : hex))
      default: bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  package mutating func key(_ name: String) {
    string(name)
    bytes.append(UInt8(ascii: ":"))
  }
}

/// `text` as a JSON string literal (quotes included), escaped per RFC 8259: for code that writes
/// JSON by hand to keep its key order (the CLI, the trail).
public func jsonQuoted(_ text: String) -> String {
  var json = JSONText()
  json.string(text)
  return String(decoding: json.bytes, as: UTF8.self)
}

extension Breadcrumb {
  /// This breadcrumb as one line of the trail's JSON Lines schema (no newline):
  /// `{"timestamp","id","seq","thread","level","type","message","attributes"[,"truncated"][,"signal_handler"]}`.
  /// See README "Breadcrumb trail schema".
  public func jsonLine() -> String {
    var json = JSONText()
    writeJSON(into: &json)
    return String(decoding: json.bytes, as: UTF8.self)
  }

  /// Appends this breadcrumb's JSON object (no newline) to `json`.
  package func writeJSON(into json: inout JSONText) {
    json.raw("{")
    json.key("timestamp")
    json.timestamp(nanoseconds: wallTimeNanoseconds)
    json.raw(",")
    json.key("id")
    json.number(id)
    json.raw(",")
    json.key("seq")
    json.number(UInt64(threadSequence))
    json.raw(",")
    json.key("thread")
    json.number(UInt64(threadID))
    json.raw(",")
    json.key("level")
    json.string(level.name)
    json.raw(",")
    json.key("type")
    json.string(type.name)
    json.raw(",")
    json.key("message")
    json.string(message)
    json.raw(",")
    json.key("attributes")
    json.raw("{")
    for (index, attribute) in attributes.enumerated() {
      if index > 0 { json.raw(",") }
      json.key(attribute.key)
      json.string(attribute.value)
    }
    json.raw("}")
    if truncated {
      json.raw(",")
      json.key("truncated")
      json.raw("true")
    }
    if fromSignalHandler {
      json.raw(",")
      json.key("signal_handler")
      json.raw("true")
    }
    json.raw("}")
  }
}
