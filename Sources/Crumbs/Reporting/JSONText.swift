// JSONText.swift — the few JSON writing primitives the breadcrumb trail needs, with a key order
// we choose (JSONEncoder sorts or scrambles keys; JSON Lines readers like a stable order).

/// Appends JSON text to a byte buffer.
struct JSONText {
  var bytes: [UInt8] = []

  mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

  /// A JSON string literal, escaped per RFC 8259.
  mutating func string(_ value: String) {
    bytes.append(UInt8(ascii: "\""))
    for byte in value.utf8 {
      switch byte {
      case UInt8(ascii: "\""): raw("\\\"")
      case UInt8(ascii: "\\"): raw("\\\\")
      case UInt8(ascii: "\n"): raw("\\n")
      case UInt8(ascii: "\r"): raw("\\r")
      case UInt8(ascii: "\t"): raw("\\t")
      case 0..<0x20:
        let hex = String(byte, radix: 16)
        raw("\\u00" + (hex.count == 1 ? "0" + hex : hex))
      default: bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  mutating func key(_ name: String) {
    string(name)
    bytes.append(UInt8(ascii: ":"))
  }
}

extension Breadcrumb {
  /// This breadcrumb as one line of the trail's JSON Lines schema (no newline):
  /// `{"timestamp","id","seq","thread","level","type","message","attributes"[,"truncated"][,"signal_handler"]}`.
  /// See README "Breadcrumb trail schema".
  public func jsonLine() -> String {
    var json = JSONText()
    json.raw("{")
    json.key("timestamp")
    json.string(ISO8601.string(nanoseconds: wallTimeNanoseconds))
    json.raw(",")
    json.key("id")
    json.raw(String(id))
    json.raw(",")
    json.key("seq")
    json.raw(String(threadSequence))
    json.raw(",")
    json.key("thread")
    json.raw(String(threadID))
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
    return String(decoding: json.bytes, as: UTF8.self)
  }
}
