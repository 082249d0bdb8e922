#if canImport(Glibc)
  import Glibc
#endif

/// 128 random bits naming one run of a process (a "session"), printed as a UUID (version 4).
public struct SessionID: Hashable, Sendable, CustomStringConvertible, Codable {
  /// The 16 bytes, as stored in ring headers and crash records.
  public var bytes: [UInt8]

  /// A new random session id.
  public init() {
    // Two 64-bit draws: each draw is a getrandom call (one per byte took sixteen).
    var generator = SystemRandomNumberGenerator()
    let words = [generator.next(), generator.next()]
    var bytes = words.withUnsafeBytes { Array($0) }
    bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
    bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
    self.bytes = bytes
  }

  /// Wraps 16 stored bytes; nil for any other count.
  public init?(bytes: some Collection<UInt8>) {
    guard bytes.count == 16 else { return nil }
    self.bytes = Array(bytes)
  }

  /// Parses the 36-character UUID form (hex digits and dashes; case-insensitive).
  public init?(_ text: some StringProtocol) {
    let digits = String(text.filter { $0 != "-" })
    guard text.count == 36, digits.count == 32, let bytes = [UInt8](hexDigits: digits) else { return nil }
    self.bytes = bytes
  }

  /// Lowercase UUID text, e.g. `3f2c…-…`.
  public var description: String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(36)
    for (index, byte) in bytes.enumerated() {
      if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
      text.append(digits[Int(byte >> 4)])
      text.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: text, as: UTF8.self)
  }

  /// All zero: "no session" in a stored layout.
  public var isZero: Bool { bytes.allSatisfy { $0 == 0 } }

  public init(from decoder: any Decoder) throws {
    let text = try decoder.singleValueContainer().decode(String.self)
    guard let parsed = SessionID(text) else {
      throw DecodingError.dataCorrupted(
        .init(codingPath: decoder.codingPath, debugDescription: "not a UUID: \(text)"))
    }
    self = parsed
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(description)
  }
}
