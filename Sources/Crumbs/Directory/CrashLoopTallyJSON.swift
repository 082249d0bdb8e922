// CrashLoopTallyJSON.swift — reading `crash-loop.json` (CrashLoopTally.Stored) without
// Foundation's JSONDecoder: the tally is read on the caller's thread of `CrumbsClient.start`,
// and a decoder's first use in a process instantiates the metadata of its whole generic
// machinery (measured at about a sixth of `start`, Benchmarks/README.md). The file is small and
// of one shape, so a strict reader of that shape costs a few microseconds.
//
// Entry point: CrashLoopTally.decode(_:) → Stored, or a PersistedFileError (`.corrupt`, with
// the byte offset) for anything else. It reads what JSONEncoder wrote (keys in any order, any
// JSON whitespace, every string escape, `null` for an absent optional) and refuses what the
// decoder refused: a missing required key, a value of another type, a number with a fraction
// or out of range, invalid UTF-8 or a lone surrogate, text after the object. Unknown keys are
// skipped (as the decoder did), nested at most `maxDepth` deep. The file is written by another
// process and may be damaged: nothing here traps (FuzzCrashLoopTally checks it). Not signal-safe.

import CrumbsRecorder

extension PersistedFormat {
  /// `crash-loop.json` (CrashLoopTally).
  package static let crashLoopTally = PersistedFormat("crash-loop tally")
}

extension CrashLoopTally {
  /// Deepest nesting an unknown value may have before the file is taken as damaged.
  static let maxDepth = 32

  /// Parses the tally's JSON (see the design comment). The result is not checked for damage
  /// (`Stored.damage`): `read` does that.
  package static func decode(_ bytes: [UInt8]) throws(PersistedFileError) -> Stored {
    var reader = TallyReader(bytes: bytes)
    let stored = try reader.stored()
    reader.skipSpace()
    guard reader.offset == bytes.count else { throw reader.failure("text after the tally") }
    return stored
  }
}

/// A cursor over the tally's bytes.
private struct TallyReader {
  let bytes: [UInt8]
  var offset = 0

  init(bytes: [UInt8]) { self.bytes = bytes }

  func failure(_ reason: String) -> PersistedFileError {
    PersistedFileError(.corrupt, "\(reason) at byte \(offset)", format: .crashLoopTally)
  }

  mutating func skipSpace() {
    while offset < bytes.count {
      switch bytes[offset] {
      case 0x20, 0x09, 0x0A, 0x0D: offset += 1
      default: return
      }
    }
  }

  /// The next byte after whitespace, not consumed; nil at the end.
  mutating func peek() -> UInt8? {
    skipSpace()
    return offset < bytes.count ? bytes[offset] : nil
  }

  mutating func expect(_ byte: UInt8, _ what: String) throws(PersistedFileError) {
    guard peek() == byte else { throw failure("expected \(what)") }
    offset += 1
  }

  /// Whether `null` comes next (consumed if so).
  mutating func null() -> Bool {
    guard peek() == UInt8(ascii: "n"), bytes.count - offset >= 4,
      bytes[offset + 1] == UInt8(ascii: "u"), bytes[offset + 2] == UInt8(ascii: "l"),
      bytes[offset + 3] == UInt8(ascii: "l")
    else { return false }
    offset += 4
    return true
  }

  /// `{ "key": value, … }`: `field` reads the value of each key (and skips unknown ones).
  mutating func object(_ field: (inout TallyReader, String) throws(PersistedFileError) -> Void)
    throws(PersistedFileError)
  {
    try expect(UInt8(ascii: "{"), "an object")
    if peek() == UInt8(ascii: "}") {
      offset += 1
      return
    }
    while true {
      guard peek() == UInt8(ascii: "\"") else { throw failure("expected a key") }
      let key = try string()
      try expect(UInt8(ascii: ":"), "':'")
      try field(&self, key)
      guard let next = peek() else { throw failure("unterminated object") }
      offset += 1
      if next == UInt8(ascii: "}") { return }
      guard next == UInt8(ascii: ",") else { throw failure("expected ',' or '}'") }
    }
  }

  /// `[ value, … ]`, each read by `element`.
  mutating func array(_ element: (inout TallyReader) throws(PersistedFileError) -> Void)
    throws(PersistedFileError)
  {
    try expect(UInt8(ascii: "["), "an array")
    if peek() == UInt8(ascii: "]") {
      offset += 1
      return
    }
    while true {
      try element(&self)
      guard let next = peek() else { throw failure("unterminated array") }
      offset += 1
      if next == UInt8(ascii: "]") { return }
      guard next == UInt8(ascii: ",") else { throw failure("expected ',' or ']'") }
    }
  }

  /// A string, unescaped; valid UTF-8 only.
  mutating func string() throws(PersistedFileError) -> String {
    try expect(UInt8(ascii: "\""), "a string")
    var text: [UInt8] = []
    while true {
      guard offset < bytes.count else { throw failure("unterminated string") }
      let byte = bytes[offset]
      offset += 1
      switch byte {
      case UInt8(ascii: "\""):
        guard let string = String(validating: text, as: UTF8.self) else {
          throw failure("a string that is not UTF-8")
        }
        return string
      case UInt8(ascii: "\\"):
        try escape(into: &text)
      case 0..<0x20:
        throw failure("a control character in a string")
      default:
        text.append(byte)
      }
    }
  }

  /// The escape after a backslash, appended to `text` as UTF-8.
  private mutating func escape(into text: inout [UInt8]) throws(PersistedFileError) {
    guard offset < bytes.count else { throw failure("unterminated string") }
    let byte = bytes[offset]
    offset += 1
    switch byte {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(byte)
    case UInt8(ascii: "b"): text.append(0x08)
    case UInt8(ascii: "f"): text.append(0x0C)
    case UInt8(ascii: "n"): text.append(0x0A)
    case UInt8(ascii: "r"): text.append(0x0D)
    case UInt8(ascii: "t"): text.append(0x09)
    case UInt8(ascii: "u"):
      var scalar = try hex4()
      if (0xD800..<0xDC00).contains(scalar) {
        guard bytes.count - offset >= 2, bytes[offset] == UInt8(ascii: "\\"),
          bytes[offset + 1] == UInt8(ascii: "u")
        else { throw failure("a lone surrogate") }
        offset += 2
        let low = try hex4()
        guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate") }
        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
      }
      guard let unicode = Unicode.Scalar(scalar) else { throw failure("a lone surrogate") }
      text.append(contentsOf: String(Character(unicode)).utf8)
    default:
      throw failure("an unknown escape")
    }
  }

  private mutating func hex4() throws(PersistedFileError) -> UInt32 {
    guard bytes.count - offset >= 4 else { throw failure("a short \\u escape") }
    var value: UInt32 = 0
    for _ in 0..<4 {
      let byte = bytes[offset]
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: throw failure("a bad \\u escape")
      }
      value = value << 4 | UInt32(digit)
      offset += 1
    }
    return value
  }

  /// An unsigned integer: digits only (no sign, fraction or exponent), within UInt64.
  mutating func unsigned() throws(PersistedFileError) -> UInt64 {
    guard let first = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
      throw failure("expected an unsigned integer")
    }
    var value: UInt64 = 0
    while offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) {
      let (times, overflow) = value.multipliedReportingOverflow(by: 10)
      let (sum, carry) = times.addingReportingOverflow(UInt64(bytes[offset] - UInt8(ascii: "0")))
      guard !overflow, !carry else { throw failure("a number out of range") }
      value = sum
      offset += 1
    }
    try refuseFraction()
    return value
  }

  /// A signed integer within Int.
  mutating func integer() throws(PersistedFileError) -> Int {
    let negative = peek() == UInt8(ascii: "-")
    if negative { offset += 1 }
    let magnitude = try unsigned()
    if negative {
      guard magnitude <= UInt64(Int.max) + 1 else { throw failure("a number out of range") }
      return magnitude == UInt64(Int.max) + 1 ? Int.min : -Int(magnitude)
    }
    guard magnitude <= UInt64(Int.max) else { throw failure("a number out of range") }
    return Int(magnitude)
  }

  private mutating func refuseFraction() throws(PersistedFileError) {
    guard offset < bytes.count else { return }
    switch bytes[offset] {
    case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"):
      throw failure("a number that is not an integer")
    default: return
    }
  }

  /// Skips any JSON value (an unknown key's), at most `CrashLoopTally.maxDepth` deep.
  mutating func skipValue(depth: Int = 0) throws(PersistedFileError) {
    guard depth < CrashLoopTally.maxDepth else { throw failure("nesting too deep") }
    guard let next = peek() else { throw failure("expected a value") }
    switch next {
    case UInt8(ascii: "{"):
      try object { reader, _ throws(PersistedFileError) in try reader.skipValue(depth: depth + 1) }
    case UInt8(ascii: "["):
      try array { reader throws(PersistedFileError) in try reader.skipValue(depth: depth + 1) }
    case UInt8(ascii: "\""):
      _ = try string()
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
      if next == UInt8(ascii: "-") { offset += 1 }
      guard offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) else {
        throw failure("a bad number")
      }
      while offset < bytes.count {
        switch bytes[offset] {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"),
          UInt8(ascii: "+"), UInt8(ascii: "-"):
          offset += 1
        default: return
        }
      }
    default:
      for literal in ["true", "false", "null"] where bytes[offset...].starts(with: literal.utf8) {
        offset += literal.utf8.count
        return
      }
      throw failure("expected a value")
    }
  }

  // MARK: - The tally's shape

  mutating func stored() throws(PersistedFileError) -> CrashLoopTally.Stored {
    var stored = CrashLoopTally.Stored()
    var version: Int?
    var loop: [CrashLoopTally.Stored.Entry]?
    try object { reader, key throws(PersistedFileError) in
      switch key {
      case "version": version = try reader.integer()
      case "resetStarted": stored.resetStarted = reader.null() ? nil : try reader.unsigned()
      case "loop":
        var entries: [CrashLoopTally.Stored.Entry] = []
        try reader.array { reader throws(PersistedFileError) in
          guard entries.count <= CrashLoopTally.maxEntries else { throw reader.failure("too many entries") }
          entries.append(try reader.entry())
        }
        loop = entries
      case "earlier": stored.earlier = reader.null() ? nil : try reader.earlier()
      default: try reader.skipValue()
      }
    }
    guard let version else { throw failure("no version") }
    guard let loop else { throw failure("no loop") }
    stored.version = version
    stored.loop = loop
    return stored
  }

  mutating func entry() throws(PersistedFileError) -> CrashLoopTally.Stored.Entry {
    var session: String?
    var started: UInt64?
    var signature: String?
    try object { reader, key throws(PersistedFileError) in
      switch key {
      case "session": session = try reader.string()
      case "started": started = try reader.unsigned()
      case "signature": signature = try reader.string()
      default: try reader.skipValue()
      }
    }
    guard let session, let started, let signature else { throw failure("an entry without a field") }
    return .init(session: session, started: started, signature: signature)
  }

  mutating func earlier() throws(PersistedFileError) -> CrashLoopTally.Stored.Earlier {
    var count: Int?
    var first: UInt64?
    var last: UInt64?
    var signature: String?
    try object { reader, key throws(PersistedFileError) in
      switch key {
      case "count": count = try reader.integer()
      case "first": first = try reader.unsigned()
      case "last": last = try reader.unsigned()
      case "signature": signature = reader.null() ? nil : try reader.string()
      default: try reader.skipValue()
      }
    }
    guard let count, let first, let last else { throw failure("a folded count without a field") }
    return .init(count: count, first: first, last: last, signature: signature)
  }
}
