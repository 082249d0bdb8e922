// HexBytes.swift — hexadecimal text to bytes: the one parser for ids written in hex (session
// ids, build ids). Not signal-safe.

extension Array where Element == UInt8 {
  /// The bytes `hex` spells, two digits a byte, either case; nil for an empty text, an odd
  /// count or anything but a hex digit (a sign included, which `UInt8(_:radix:)` would take).
  package init?(hexDigits hex: some StringProtocol) {
    let utf8 = Array(hex.utf8)
    guard !utf8.isEmpty, utf8.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count / 2)
    var index = 0
    while index < utf8.count {
      guard let high = Self.hexDigitValue(utf8[index]), let low = Self.hexDigitValue(utf8[index + 1]) else {
        return nil
      }
      bytes.append(high << 4 | low)
      index += 2
    }
    self = bytes
  }

  /// The value of one hex digit (either case), nil for any other byte.
  package static func hexDigitValue(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}
