// LoadedModule.swift — one ELF object loaded in a process: what the crash record keeps (written
// by the handler's module table), what symbolication looks addresses up in, and what a stored
// report lists. One type for all three, so a module is never copied field by field between them.
//
// Its Codable form is the stored report's (`report.json` → `modules`): addresses as hex strings
// (JSON numbers above 2^53 lose precision in most readers), the build ID as lowercase hex,
// omitted when unknown; `foundAtCrash` and `unloaded` only when true. `start`, `end`, `textStart`, `textEnd`
// came later: a report stored before them decodes with 0. Not signal-safe.

/// One loaded module as a crash record (or the live process) describes it.
public struct LoadedModule: Sendable, Equatable {
  /// The file it was loaded from, as the dynamic linker named it.
  public var path: String
  /// `dlpi_addr`: runtime address = ELF virtual address + loadBias (0 for non-PIE executables).
  public var loadBias: UInt64
  /// The GNU build-id note's bytes; empty when unknown.
  public var buildID: [UInt8]
  /// Lowest runtime address of its PT_LOAD segments.
  public var start: UInt64
  /// End (exclusive) of its highest PT_LOAD segment.
  public var end: UInt64
  /// Lowest runtime address of its executable segments; 0 with `textEnd` 0 when unknown.
  public var textStart: UInt64
  /// End (exclusive) of its executable segments.
  public var textEnd: UInt64
  /// Not in the table the last module scan made: the crash handler found it at crash time in
  /// /proc/self/maps, because a frame lay in it (loaded with dlopen after the last scan).
  public var foundAtCrash: Bool
  /// In the table the last module scan made, but gone at crash time (dlclose'd, or another
  /// library mapped in its place): the crash handler read nothing of it, and an address inside
  /// it is stale code, not a frame of a loaded library.
  public var unloaded: Bool

  public init(
    path: String, loadBias: UInt64, buildID: [UInt8], start: UInt64, end: UInt64, textStart: UInt64 = 0,
    textEnd: UInt64 = 0, foundAtCrash: Bool = false, unloaded: Bool = false
  ) {
    self.foundAtCrash = foundAtCrash
    self.unloaded = unloaded
    self.path = path
    self.loadBias = loadBias
    self.buildID = buildID
    self.start = start
    self.end = end
    self.textStart = textStart
    self.textEnd = textEnd
  }

  /// The build ID as lowercase hex ("" when none), as `file` and `readelf -n` print it.
  public var buildIDHex: String { LoadedModule.hex(buildID) }

  /// The file name without its directory.
  public var name: String {
    guard let slash = path.lastIndex(of: "/") else { return path }
    return String(path[path.index(after: slash)...])
  }

  /// Whether `address` lies in its executable segments.
  public func textContains(_ address: UInt64) -> Bool { textStart <= address && address < textEnd }

  /// Whether `address` lies anywhere in its mapping.
  public func contains(_ address: UInt64) -> Bool { start <= address && address < end }

  /// The NT_GNU_BUILD_ID descriptor in a run of little-endian ELF notes (a PT_NOTE segment or a
  /// note section, `alignment` 4 or 8), or nil. Never reads past `bytes`.
  package static func buildID(inNotes bytes: [UInt8], alignment: UInt64) -> [UInt8]? {
    let align = alignment == 8 ? 8 : 4
    func u32(_ at: Int) -> Int {
      Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
    }
    var offset = 0
    while bytes.count - offset >= 12 {
      let nameSize = u32(offset)
      let descriptorSize = u32(offset + 4)
      let type = u32(offset + 8)
      let nameStart = offset + 12
      guard nameSize <= bytes.count - nameStart else { return nil }
      let descriptorStart = (nameStart + nameSize + align - 1) / align * align
      guard descriptorStart <= bytes.count, descriptorSize <= bytes.count - descriptorStart else {
        return nil
      }
      if type == 3, nameSize == 4, bytes[nameStart..<nameStart + 4].elementsEqual([0x47, 0x4E, 0x55, 0]) {
        return Array(bytes[descriptorStart..<descriptorStart + descriptorSize])
      }
      offset = (descriptorStart + descriptorSize + align - 1) / align * align
    }
    return nil
  }

  /// Lowercase hex of `bytes`.
  package static func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(bytes.count * 2)
    for byte in bytes {
      text.append(digits[Int(byte >> 4)])
      text.append(digits[Int(byte & 0xF)])
    }
    return String(decoding: text, as: UTF8.self)
  }
}

extension LoadedModule: Codable {
  enum CodingKeys: String, CodingKey {
    case path
    case loadBias = "loadAddress"
    case buildID, start, end, textStart, textEnd, foundAtCrash, unloaded
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(path, forKey: .path)
    try container.encode(Self.hexAddress(loadBias), forKey: .loadBias)
    if !buildID.isEmpty { try container.encode(buildIDHex, forKey: .buildID) }
    for (key, value) in [
      (CodingKeys.start, start), (.end, end), (.textStart, textStart), (.textEnd, textEnd),
    ] {
      try container.encode(Self.hexAddress(value), forKey: key)
    }
    if foundAtCrash { try container.encode(true, forKey: .foundAtCrash) }
    if unloaded { try container.encode(true, forKey: .unloaded) }
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    func address(_ key: CodingKeys) throws -> UInt64 {
      guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return 0 }
      guard text.hasPrefix("0x"), let value = UInt64(text.dropFirst(2), radix: 16) else {
        throw DecodingError.dataCorruptedError(
          forKey: key, in: container, debugDescription: "not a hex address: \(text)")
      }
      return value
    }
    var buildID: [UInt8] = []
    if let text = try container.decodeIfPresent(String.self, forKey: .buildID) {
      let digits = Array(text.utf8)
      guard digits.count % 2 == 0 else {
        throw DecodingError.dataCorruptedError(
          forKey: .buildID, in: container, debugDescription: "odd number of hex digits")
      }
      for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
          throw DecodingError.dataCorruptedError(
            forKey: .buildID, in: container, debugDescription: "not hex: \(text)")
        }
        buildID.append(byte)
      }
    }
    self.init(
      path: try container.decode(String.self, forKey: .path), loadBias: try address(.loadBias),
      buildID: buildID, start: try address(.start), end: try address(.end),
      textStart: try address(.textStart), textEnd: try address(.textEnd),
      foundAtCrash: try container.decodeIfPresent(Bool.self, forKey: .foundAtCrash) ?? false,
      unloaded: try container.decodeIfPresent(Bool.self, forKey: .unloaded) ?? false)
  }

  /// `0x` and lowercase hex, as the report writes addresses.
  package static func hexAddress(_ value: UInt64) -> String { "0x" + String(value, radix: 16) }
}
