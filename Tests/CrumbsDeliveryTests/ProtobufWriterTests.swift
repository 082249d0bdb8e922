// ProtobufWriterTests.swift — the hand-written protobuf encoder, field by field against the wire
// format (protobuf encoding spec): keys, varint boundaries, two's-complement int64, fixed64
// byte order, length-delimited strings, bytes and nested messages, proto3 defaults.

import Testing

@testable import CrumbsDelivery

@Suite struct ProtobufWriterTests {
  func encoded(_ write: (inout ProtobufWriter) -> Void) -> [UInt8] {
    var writer = ProtobufWriter()
    write(&writer)
    return writer.bytes
  }

  @Test func aMixOfFieldsIsTheWireFormat() {
    let bytes = encoded { writer in
      writer.varint(1, 300)
      writer.fixed64(2, 1)
      writer.string(3, "hi")
      writer.varint(4, 0)  // default: omitted
      writer.message(5) { $0.bool(1, true) }
      writer.int64(6, -1)
    }
    #expect(
      bytes == [
        0x08, 0xAC, 0x02, 0x11, 1, 0, 0, 0, 0, 0, 0, 0, 0x1A, 2, 0x68, 0x69, 0x2A, 2, 0x08, 1,
        0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
      ])
  }

  @Test func varintsTakeSevenBitsPerByteLowFirst() {
    let cases: [(value: UInt64, payload: [UInt8])] = [
      (1, [0x01]),
      (127, [0x7F]),
      (128, [0x80, 0x01]),
      (300, [0xAC, 0x02]),
      (16_383, [0xFF, 0x7F]),
      (16_384, [0x80, 0x80, 0x01]),
      (UInt64(UInt32.max), [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
      (1 << 63, [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
      (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
    ]
    for (value, payload) in cases {
      #expect(encoded { $0.varint(1, value) } == [0x08] + payload, "\(value)")
    }
  }

  @Test func keysCarryTheFieldNumberAndWireType() {
    #expect(encoded { $0.varint(15, 1) } == [0x78, 0x01])  // 15 << 3 | 0
    #expect(encoded { $0.varint(16, 1) } == [0x80, 0x01, 0x01])  // 128: the key is a varint too
    #expect(encoded { $0.varint((1 << 29) - 1, 1) } == [0xF8, 0xFF, 0xFF, 0xFF, 0x0F, 0x01])
    #expect(encoded { $0.fixed64(1, 1) }.first == 0x09)  // wire type 1
    #expect(encoded { $0.string(1, "x") }.first == 0x0A)  // wire type 2
    #expect(encoded { $0.message(2) { _ in } }.first == 0x12)
  }

  @Test func negativeInt64IsTenBytesOfTwosComplement() {
    #expect(encoded { $0.int64(3, -1) } == [0x18] + [UInt8](repeating: 0xFF, count: 9) + [0x01])
    #expect(encoded { $0.int64(3, -2) } == [0x18, 0xFE] + [UInt8](repeating: 0xFF, count: 8) + [0x01])
    #expect(encoded { $0.int64(3, Int64.min) } == [0x18] + [UInt8](repeating: 0x80, count: 9) + [0x01])
    #expect(encoded { $0.int64(3, Int64.max) } == [0x18] + [UInt8](repeating: 0xFF, count: 8) + [0x7F])
  }

  @Test func fixed64AndDoubleAreLittleEndian() {
    #expect(
      encoded { $0.fixed64(1, 0x0102_0304_0506_0708) } == [
        0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
      ])
    #expect(encoded { $0.double(4, 1.0) } == [0x21, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F])
    // -0.0 is not the default (its bits are not zero), so it is written.
    #expect(encoded { $0.double(4, -0.0) } == [0x21, 0, 0, 0, 0, 0, 0, 0, 0x80])
  }

  @Test func stringsAndBytesAreLengthPrefixedUTF8() {
    #expect(encoded { $0.string(1, "é") } == [0x0A, 0x02, 0xC3, 0xA9])
    let long = [UInt8](repeating: 7, count: 200)
    #expect(encoded { $0.bytes(7, long) } == [0x3A, 0xC8, 0x01] + long)  // length 200: two bytes
  }

  @Test func defaultsAreSkippedUnlessAlwaysIsSet() {
    #expect(
      encoded { writer in
        writer.varint(1, 0)
        writer.int64(2, 0)
        writer.bool(3, false)
        writer.fixed64(4, 0)
        writer.double(5, 0)
        writer.string(6, "")
        writer.bytes(7, [UInt8]())
      }.isEmpty)
    #expect(
      encoded { writer in
        writer.varint(1, 0, always: true)
        writer.bool(3, false, always: true)
        writer.fixed64(4, 0, always: true)
        writer.string(6, "", always: true)
      } == [0x08, 0x00, 0x18, 0x00, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0x32, 0x00])
  }

  @Test func nestedMessagesAreLengthPrefixedAndWrittenEvenWhenEmpty() {
    #expect(encoded { $0.message(1) { _ in } } == [0x0A, 0x00])
    let nested = encoded { writer in
      writer.message(1) { outer in
        outer.message(2) { inner in inner.varint(1, 1) }
        outer.string(3, "ab")
      }
    }
    #expect(nested == [0x0A, 0x08, 0x12, 0x02, 0x08, 0x01, 0x1A, 0x02, 0x61, 0x62])
    // An inner message of 200 bytes: the outer length needs two bytes.
    let big = encoded { writer in
      writer.message(1) { $0.bytes(1, [UInt8](repeating: 0, count: 197)) }
    }
    #expect(Array(big.prefix(5)) == [0x0A, 0xC8, 0x01, 0x0A, 0xC5])
    #expect(big.count == 3 + 200)
  }
}
