// ProtobufWriter.swift — the protocol buffers wire format, encode side only, for the few message
// shapes OTLP needs. No generated code and no swift-protobuf: an OTLP request is a handful of
// nested messages, and hand encoding keeps the plugin build (minutes) out of the package.
//
// Wire format (protobuf encoding spec): every field is a key varint `(number << 3) | wireType`
// followed by its payload. Wire types used here: 0 varint, 1 fixed64 (little endian),
// 2 length-delimited (strings, bytes, embedded messages), 5 fixed32.
//
// Entry points: ProtobufWriter() → varint/fixed64/string/bytes/message(...) → bytes.
// Default values (0, "", empty) are written only when `always` is set, as proto3 does.
// Not signal-safe (allocates).

/// Appends protobuf fields to a byte buffer.
package struct ProtobufWriter {
  private(set) var bytes: [UInt8] = []

  package enum WireType: UInt64 {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    case fixed32 = 5
  }

  package mutating func key(_ field: UInt32, _ type: WireType) {
    rawVarint(UInt64(field) << 3 | type.rawValue)
  }

  package mutating func rawVarint(_ value: UInt64) {
    var value = value
    while value >= 0x80 {
      bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
      value >>= 7
    }
    bytes.append(UInt8(value))
  }

  /// uint32, uint64, enum, bool (as 0/1), int64 (two's complement: negative values take 10 bytes).
  package mutating func varint(_ field: UInt32, _ value: UInt64, always: Bool = false) {
    guard value != 0 || always else { return }
    key(field, .varint)
    rawVarint(value)
  }

  package mutating func int64(_ field: UInt32, _ value: Int64, always: Bool = false) {
    varint(field, UInt64(bitPattern: value), always: always)
  }

  package mutating func bool(_ field: UInt32, _ value: Bool, always: Bool = false) {
    varint(field, value ? 1 : 0, always: always)
  }

  package mutating func fixed64(_ field: UInt32, _ value: UInt64, always: Bool = false) {
    guard value != 0 || always else { return }
    key(field, .fixed64)
    for shift in stride(from: 0, to: 64, by: 8) {
      bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
    }
  }

  package mutating func fixed32(_ field: UInt32, _ value: UInt32, always: Bool = false) {
    guard value != 0 || always else { return }
    key(field, .fixed32)
    for shift in stride(from: 0, to: 32, by: 8) {
      bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
    }
  }

  package mutating func double(_ field: UInt32, _ value: Double, always: Bool = false) {
    fixed64(field, value.bitPattern, always: always)
  }

  package mutating func bytes(_ field: UInt32, _ value: some Collection<UInt8>, always: Bool = false) {
    guard !value.isEmpty || always else { return }
    key(field, .lengthDelimited)
    rawVarint(UInt64(value.count))
    bytes.append(contentsOf: value)
  }

  package mutating func string(_ field: UInt32, _ value: String, always: Bool = false) {
    bytes(field, Array(value.utf8), always: always)
  }

  /// An embedded message, built by `body` into its own writer, then length-prefixed. Empty
  /// messages are still written: presence matters for message fields (e.g. an empty AnyValue).
  package mutating func message(_ field: UInt32, _ body: (inout ProtobufWriter) -> Void) {
    var inner = ProtobufWriter()
    body(&inner)
    bytes(field, inner.bytes, always: true)
  }
}
