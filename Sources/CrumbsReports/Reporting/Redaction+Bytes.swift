// Redaction+Bytes.swift — the byte-level pieces the redactor (Redaction.swift) scans and edits
// text with: the cheap prefilters that settle most strings without copying them (a word at a
// time), key normalization, the byte classes of keys and paths, and the constants. The pair
// rule itself is the crash handler's C (crumbs_redact.c, through CrumbsRecorder's
// PairRedaction). Pure functions of their arguments. Not signal-safe.

extension Redactor {
  /// Whether `bytes` holds an `=`, `:`, `>` or `/`: without one, no pair (`->` has its `>`), no
  /// URL and no home directory (the classic "has a zero byte" bit trick, a word at a time).
  static func mayNeedWork(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    func hasZeroByte(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
    var index = 0
    while bytes.count - index >= 8 {
      let word = UInt64(
        littleEndian: UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self))
      if hasZeroByte(word ^ (ones &* 0x3D)) || hasZeroByte(word ^ (ones &* 0x3A))
        || hasZeroByte(word ^ (ones &* 0x2F)) || hasZeroByte(word ^ (ones &* 0x3E))
      {
        return true
      }
      index += 8
    }
    while index < bytes.count {
      let byte = bytes[index]
      if byte == Byte.equals || byte == Byte.colon || byte == Byte.slash || byte == Byte.greater {
        return true
      }
      index += 1
    }
    return false
  }

  /// Whether text may hold a home directory: a `/` before an `h`, `U` or `r`.
  static func mayHoldHome(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard bytes.count > 1 else { return false }
    for index in 0..<bytes.count - 1 where bytes[index] == Byte.slash {
      let next = bytes[index + 1]
      if next == UInt8(ascii: "h") || next == UInt8(ascii: "U") || next == UInt8(ascii: "r") { return true }
    }
    return false
  }

  /// ASCII lowercase, `-` as `_`: how keys are compared.
  static func normalized<Bytes: Sequence<UInt8>>(_ key: Bytes) -> [UInt8] { key.map(normalized) }

  static func normalized(_ byte: UInt8) -> UInt8 {
    if byte == Byte.hyphen { return Byte.underscore }
    return byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
  }

  static func normalized(_ key: String) -> [UInt8] { normalized(key.utf8) }

  // MARK: - Bytes

  enum Byte {
    static let equals = UInt8(ascii: "=")
    static let colon = UInt8(ascii: ":")
    static let slash = UInt8(ascii: "/")
    static let tilde = UInt8(ascii: "~")
    static let hyphen = UInt8(ascii: "-")
    static let underscore = UInt8(ascii: "_")
    static let greater = UInt8(ascii: ">")
    static let at = UInt8(ascii: "@")
  }

  static let replacementBytes = Array(Redaction.replacement.utf8)
  static let homePrefix = Array("/home/".utf8)
  static let usersPrefix = Array("/Users/".utf8)
  static let rootPrefix = Array("/root".utf8)

  /// The index after `prefix` when `bytes` has it at `index`.
  static func after(_ bytes: [UInt8], at index: Int, prefix: [UInt8]) -> Int? {
    bytes[index...].starts(with: prefix) ? index + prefix.count : nil
  }

  static func isAlphanumeric(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
  }
  /// Letters, digits, `_`, `-`, `.`: what a key is made of.
  static func isKeyByte(_ byte: UInt8) -> Bool {
    isAlphanumeric(byte) || byte == 0x5F || byte == 0x2D || byte == 0x2E
  }
  /// A byte that continues a path component: `/data/home/x` is not a home directory.
  static func isPathByte(_ byte: UInt8) -> Bool { isKeyByte(byte) || byte == Byte.tilde }
  /// Where an unquoted value ends (as in crumbs_redact.c): blanks, line ends, `& , ;`, quotes,
  /// closing brackets, `< >`; a user name in a path ends there too.
  static func isDelimiter(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x20, 0x09, 0x0A, 0x0D, 0x26, 0x2C, 0x3B, 0x22, 0x27, 0x29, 0x5D, 0x7D, 0x3C, 0x3E: true
    default: false
    }
  }
  /// Where a user name in a path ends.
  static func endsUserName(_ byte: UInt8) -> Bool {
    byte == Byte.slash || isDelimiter(byte) || byte == 0x3A
  }
}
