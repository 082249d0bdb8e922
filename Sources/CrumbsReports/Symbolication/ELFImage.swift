// ELFImage.swift — a bounds-checked reader of ELF64 little-endian files, for symbolication.
//
// Entry points, in call order:
//   ELFImage.read(path:)     opens a module file and reads only the parts it needs with pread
//                            (header, program headers, notes, section headers, one symbol table
//                            and its strings): a 100 MB binary costs its symbol table, not 100 MB
//   ELFImage.parse(bytes:)   the same over bytes in memory (what the fuzzer and tests drive)
//     → header               ELF identification, class, byte order, table offsets
//     → program headers      PT_LOAD segments; PT_NOTE segments for the GNU build ID
//     → section headers      names, `.note.gnu.build-id` when no PT_NOTE had one,
//                            `.symtab`, else `.dynsym`, with the string table each links to;
//                            `.gnu_debuglink` and whether `.debug_info` has content
//     → symbols              functions (and sized symbols in executable sections), sorted by
//                            start address for binary search (SortedSymbols.read: in pages of
//                            their own, not malloc's)
//   ELFImage.read(path:answering:) the same, but for a few addresses known in advance only a
//                            scan of the table (SymbolScan: no sort, names read only for the
//                            answers), the sorted table read later if another address is asked
//   image.symbol(containing:) the symbol covering an ELF virtual address
//
// Every value read from the file is untrusted: offsets, sizes and counts are checked against the
// file size with overflow-reporting arithmetic before use, so any input gives an ELFImage (maybe
// partial, with `problems` saying what was skipped) or a thrown PersistedFileError — never a
// trap. Not signal-safe (allocates, reads files).

import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

extension PersistedFormat {
  /// An ELF64 little-endian file: an executable, a shared object, an object file.
  public static let elf = PersistedFormat("ELF file")
}

/// A function (or other sized code symbol) from an ELF symbol table.
public struct ELFSymbol: Sendable, Equatable {
  /// The symbol's name as stored (mangled).
  public var name: String
  /// Its ELF virtual address (st_value).
  public var start: UInt64
  /// Its size in bytes: st_size, or for an unsized symbol the distance to the next symbol or the
  /// end of its section, whichever comes first.
  public var size: UInt64
}

/// The parts of one ELF64 little-endian file that symbolication needs.
public struct ELFImage: Sendable {
  /// One PT_LOAD segment.
  public struct Segment: Sendable, Equatable {
    public var virtualAddress: UInt64
    public var memorySize: UInt64
    public var fileOffset: UInt64
    public var fileSize: UInt64
    /// PF_X: the segment holds code.
    public var executable: Bool
  }

  /// Which table the symbols came from.
  public enum SymbolTable: String, Sendable {
    /// The full static table: every function, local ones included.
    case symtab
    /// Only the dynamic (exported and imported) symbols: what is left after `strip`.
    case dynsym
    /// No symbol table at all.
    case none
  }

  /// e_type: 1 relocatable, 2 executable, 3 shared object (and PIE), 4 core.
  public var fileType: UInt16
  /// e_machine: 62 x86_64, 183 aarch64.
  public var machine: UInt16
  /// The NT_GNU_BUILD_ID note's bytes; empty when the file has none.
  public var buildID: [UInt8]
  public var segments: [Segment]
  /// The table `symbols` were read from.
  public var symbolTable: SymbolTable
  /// What was skipped because it was damaged (the rest of the image is still usable).
  public var problems: [String]
  /// The separate debug file a stripped file names in `.gnu_debuglink` (a file name, no
  /// directory), when it has that section.
  public var debugLink: String? = nil
  /// Whether the file carries DWARF (`.debug_info` with content): file and line can come from it.
  public var hasDebugInfo = false
  /// The package its `.note.package` section names (systemd's package metadata), or why it
  /// could not be read; nil when the file has no such section. A bad note is not a problem of
  /// the image: symbols stay usable.
  public var packageNote: Result<PackageNote, PackageNote.Failure>? = nil

  /// Sorted by start address, with the names they point into (SortedSymbols); for an image
  /// read `answering:` addresses, the table it reads when first needed.
  var sortedSymbols: SortedSymbols {
    get { deferredSymbols?.sortedSymbols ?? readSymbols }
    set {
      readSymbols = newValue
      deferredSymbols = nil
    }
  }
  private var readSymbols = SortedSymbols.empty
  /// Set when the image was read `answering:` addresses: the scan's answers (SymbolScan).
  var deferredSymbols: DeferredSymbols? = nil

  /// How many symbols can be looked up.
  public var symbolCount: Int { sortedSymbols.count }

  /// Whether any symbol can be looked up (without reading a deferred table).
  var hasSymbols: Bool { deferredSymbols.map { $0.keptCount > 0 } ?? (readSymbols.count > 0) }

  /// The pages its symbol tables take, or will once read (ParsedModuleCache's bound).
  var symbolBytes: Int { deferredSymbols?.estimatedByteCount ?? readSymbols.byteCount }

  /// The symbol whose range holds `address` (an ELF virtual address: runtime address minus the
  /// load bias), or nil.
  public func symbol(containing address: UInt64) -> ELFSymbol? {
    if let deferredSymbols { return deferredSymbols.symbol(containing: address) }
    return readSymbols.symbol(containing: address)
  }

  /// Every symbol, in address order (for tests and tools; symbolication uses `symbol(containing:)`).
  public var symbols: [ELFSymbol] { sortedSymbols.all }

  /// A NUL-terminated string at `offset` of `table`; "" when out of bounds.
  static func string(in table: [UInt8], at offset: UInt32) -> String {
    table.withUnsafeBytes { string(in: $0, at: offset) }
  }

  /// A NUL-terminated string at `offset` of `table`; "" when out of bounds.
  static func string(in table: UnsafeRawBufferPointer, at offset: UInt32) -> String {
    let start = Int(offset)
    guard start < table.count else { return "" }
    let end = table[start...].firstIndex(of: 0) ?? table.count
    return String(decoding: UnsafeRawBufferPointer(rebasing: table[start..<end]), as: UTF8.self)
  }

  // MARK: Reading

  /// Reads the ELF file at `path`, only the parts symbolication needs; without `symbols`, only
  /// what identifies it (build ID, segments, debug link), which is all an index of debug files
  /// needs.
  public static func read(path: String, symbols: Bool = true) throws(PersistedFileError) -> ELFImage {
    try PersistedFile.read(path, as: .elf) { file throws(PersistedFileError) in
      try parse(.file(file), symbols: symbols)
    }
  }

  /// Reads the ELF file at `path` for looking up `addresses` (ELF virtual addresses): its
  /// symbol table scanned for them, not sorted (SymbolScan); the sorted table is read from the
  /// file only if another address is looked up later. The same answers as `read(path:)`.
  package static func read(path: String, answering addresses: [UInt64]) throws(PersistedFileError) -> ELFImage
  {
    try PersistedFile.read(path, as: .elf) { file throws(PersistedFileError) in
      try parse(.file(file), scanning: (path, addresses))
    }
  }

  /// Parses an ELF image held in memory.
  public static func parse(bytes: UnsafeRawBufferPointer) throws(PersistedFileError) -> ELFImage {
    try parse(ByteSource.memory(bytes))
  }

  /// Parses an ELF image held in memory.
  public static func parse(bytes: [UInt8]) throws(PersistedFileError) -> ELFImage {
    let result = bytes.withUnsafeBytes { buffer in
      Result { () throws(PersistedFileError) -> ELFImage in try parse(ByteSource.memory(buffer)) }
    }
    return try result.get()
  }

  static func parse(
    _ source: ByteSource, symbols readsSymbols: Bool = true,
    scanning scan: (path: String, addresses: [UInt64])? = nil
  ) throws(PersistedFileError) -> ELFImage {
    let header = try source.read(0, 64, "ELF header", exact: false)
    guard header.count >= 16, header[0] == 0x7F, header[1] == 0x45, header[2] == 0x4C, header[3] == 0x46
    else {
      throw elfFailure(
        .unrecognized, "not an ELF file (\(header.count < 4 ? "only \(header.count) bytes" : "wrong magic"))")
    }
    guard header[4] == 2 else {
      throw elfFailure(.unsupported, "ELF class \(header[4]) (only ELF64 is read)")
    }
    guard header[5] == 1 else {
      throw elfFailure(.unsupported, "ELF data encoding \(header[5]) (only little-endian is read)")
    }
    guard header[6] == 1 else { throw elfFailure(.unsupported, "ELF version \(header[6])") }
    guard header.count == 64 else {
      throw elfFailure(.truncated, "truncated ELF header: \(header.count) of 64 bytes")
    }
    let fields = LittleEndianBytes(header)
    var image = ELFImage(
      fileType: fields.u16(16), machine: fields.u16(18), buildID: [], segments: [], symbolTable: .none,
      problems: [])
    let programHeaderOffset = fields.u64(32)
    let sectionHeaderOffset = fields.u64(40)
    let programHeaderSize = UInt64(fields.u16(54))
    var programHeaderCount = UInt64(fields.u16(56))
    let sectionHeaderSize = UInt64(fields.u16(58))
    var sectionHeaderCount = UInt64(fields.u16(60))
    var sectionNamesIndex = UInt64(fields.u16(62))

    // Section 0 holds the real counts when they do not fit the header's 16-bit fields.
    var firstSection: LittleEndianBytes?
    if sectionHeaderOffset != 0, sectionHeaderSize >= 64,
      let bytes = try? source.read(sectionHeaderOffset, 64, "section header 0")
    {
      firstSection = LittleEndianBytes(bytes)
    }
    if let firstSection {
      if sectionHeaderCount == 0 { sectionHeaderCount = firstSection.u64(32) }
      if sectionNamesIndex == 0xFFFF { sectionNamesIndex = UInt64(firstSection.u32(40)) }
      if programHeaderCount == 0xFFFF { programHeaderCount = UInt64(firstSection.u32(44)) }
    }

    // Program headers: segments and build-ID notes.
    var noteRanges: [(offset: UInt64, size: UInt64, align: UInt64)] = []
    if programHeaderCount > 0 {
      do throws(PersistedFileError) {
        guard programHeaderSize >= 56 else {
          throw elfFailure(.corrupt, "program header entries of \(programHeaderSize) bytes (need 56)")
        }
        let table = try source.readTable(
          programHeaderOffset, programHeaderCount, programHeaderSize, "program headers")
        for index in 0..<Int(programHeaderCount) {
          let entry = LittleEndianBytes(table, base: index * Int(programHeaderSize))
          let type = entry.u32(0)
          if type == 1 {  // PT_LOAD
            image.segments.append(
              Segment(
                virtualAddress: entry.u64(16), memorySize: entry.u64(40), fileOffset: entry.u64(8),
                fileSize: entry.u64(32), executable: entry.u32(4) & 1 != 0))
          } else if type == 4 {  // PT_NOTE
            noteRanges.append((entry.u64(8), entry.u64(32), entry.u64(48)))
          }
        }
      } catch {
        image.problems.append(error.reason)
      }
    }
    for note in noteRanges where image.buildID.isEmpty {
      guard note.size <= 1 << 20, let bytes = try? source.read(note.offset, note.size, "note segment") else {
        image.problems.append("note segment at \(note.offset) (\(note.size) bytes) outside the file")
        continue
      }
      image.buildID = LoadedModule.buildID(inNotes: bytes, alignment: note.align) ?? []
    }

    // Section headers: the build-ID section when no segment had one, and the symbol tables.
    guard sectionHeaderCount > 0, sectionHeaderOffset != 0 else {
      if image.segments.isEmpty { image.problems.append("no program or section headers") }
      return image
    }
    let sections: [Section]
    do throws(PersistedFileError) {
      guard sectionHeaderSize >= 64 else {
        throw elfFailure(.corrupt, "section header entries of \(sectionHeaderSize) bytes (need 64)")
      }
      let table = try source.readTable(
        sectionHeaderOffset, sectionHeaderCount, sectionHeaderSize, "section headers")
      sections = (0..<Int(sectionHeaderCount)).map { index in
        Section(LittleEndianBytes(table, base: index * Int(sectionHeaderSize)))
      }
    } catch {
      image.problems.append(error.reason)
      return image
    }
    var sectionNames: [UInt8] = []
    if sectionNamesIndex < UInt64(sections.count) {
      let names = sections[Int(sectionNamesIndex)]
      if names.size <= 1 << 24, let bytes = try? source.read(names.offset, names.size, "section names") {
        sectionNames = bytes
      } else {
        image.problems.append("section name table outside the file")
      }
    }
    if image.buildID.isEmpty {
      for section in sections
      where section.type == 7 /* SHT_NOTE */
        && ELFImage.string(in: sectionNames, at: section.nameOffset) == ".note.gnu.build-id"
      {
        if section.size <= 1 << 20,
          let bytes = try? source.read(section.offset, section.size, "build-id note")
        {
          image.buildID = LoadedModule.buildID(inNotes: bytes, alignment: section.alignment) ?? []
        }
      }
    }

    for section in sections {
      switch ELFImage.string(in: sectionNames, at: section.nameOffset) {
      case ".debug_info":
        // SHT_NOBITS (8): a stripped file may keep the header with no content.
        image.hasDebugInfo = image.hasDebugInfo || (section.type != 8 && section.size > 0)
      case ".gnu_debuglink":
        // The file name, NUL-terminated and padded, then a CRC-32 (not checked: the build ID is).
        guard section.size <= 4096, let bytes = try? source.read(section.offset, section.size, "debug link")
        else {
          image.problems.append(".gnu_debuglink outside the file")
          continue
        }
        let name = ELFImage.string(in: bytes, at: 0)
        if !name.isEmpty, !name.utf8.contains(UInt8(ascii: "/")) { image.debugLink = name }
      case PackageNote.sectionName:
        guard section.type == 7 /* SHT_NOTE */, section.size <= UInt64(PackageNote.maxNoteBytes),
          let bytes = try? source.read(section.offset, section.size, "package note")
        else {
          image.packageNote = .failure(.init("\(PackageNote.sectionName) is too large or outside the file"))
          continue
        }
        image.packageNote = PackageNote.parse(notes: bytes, alignment: section.alignment)
      default:
        continue
      }
    }
    guard readsSymbols else { return image }

    for (table, type) in [(SymbolTable.symtab, UInt32(2)), (SymbolTable.dynsym, UInt32(11))] {
      guard let section = sections.first(where: { $0.type == type && $0.size > 0 }) else { continue }
      do throws(PersistedFileError) {
        if let scan {
          let found = try SymbolScan.scan(
            section, sections: sections, source: source, addresses: scan.addresses)
          if found.keptCount == 0 { continue }
          // What SortedSymbols.read would take: a PackedSymbol per entry kept, and the names.
          let names = Int(section.link) < sections.count ? sections[Int(section.link)].size : 0
          image.deferredSymbols = DeferredSymbols(
            path: scan.path, buildID: image.buildID, table: table, scan: found,
            estimatedByteCount: found.keptCount * MemoryLayout<PackedSymbol>.stride + Int(names))
          image.symbolTable = table
          break
        }
        let symbols = try SortedSymbols.read(section, sections: sections, source: source)
        if symbols.count == 0 { continue }
        image.sortedSymbols = symbols
        image.symbolTable = table
        break
      } catch {
        image.problems.append("\(table.rawValue): \(error.reason)")
      }
    }
    return image
  }
}

/// A symbol as kept in the sorted table: 24 bytes, name resolved only on lookup.
package struct PackedSymbol: Sendable {
  package var start: UInt64
  package var size: UInt64
  package var nameOffset: UInt32
  package var rank: UInt8
}

/// One section header (Elf64_Shdr), fields as read (untrusted).
package struct Section {
  package var nameOffset: UInt32
  package var type: UInt32
  package var flags: UInt64
  package var address: UInt64
  package var offset: UInt64
  package var size: UInt64
  package var link: UInt32
  package var alignment: UInt64
  package var entrySize: UInt64

  package init(_ fields: LittleEndianBytes) {
    nameOffset = fields.u32(0)
    type = fields.u32(4)
    flags = fields.u64(8)
    address = fields.u64(16)
    offset = fields.u64(24)
    size = fields.u64(32)
    link = fields.u32(40)
    alignment = fields.u64(48)
    entrySize = fields.u64(56)
  }
}

/// Little-endian loads from an array at offsets the caller has already bounds-checked (the
/// arrays come from `ByteSource.read` with exact sizes).
package struct LittleEndianBytes {
  package var bytes: [UInt8]
  package var base: Int

  package init(_ bytes: [UInt8], base: Int = 0) {
    self.bytes = bytes
    self.base = base
  }

  package func u16(_ offset: Int) -> UInt16 {
    UInt16(bytes[base + offset]) | UInt16(bytes[base + offset + 1]) << 8
  }
  package func u32(_ offset: Int) -> UInt32 {
    UInt32(u16(offset)) | UInt32(u16(offset + 2)) << 16
  }
  package func u64(_ offset: Int) -> UInt64 {
    UInt64(u32(offset)) | UInt64(u32(offset + 4)) << 32
  }
}

/// Where an image's bytes come from. Every read is checked against the size first.
package enum ByteSource {
  case file(PersistedFile)
  case memory(UnsafeRawBufferPointer)

  /// The most one read may ask for: a garbage size in a huge file must not allocate gigabytes.
  package static let largestRead: UInt64 = 512 << 20

  package var size: UInt64 {
    switch self {
    case .file(let file): return file.size
    case .memory(let bytes): return UInt64(bytes.count)
    }
  }

  /// `count` bytes at `offset`; with `exact: false`, as many as there are up to `count`.
  package func read(_ offset: UInt64, _ count: UInt64, _ what: String, exact: Bool = true)
    throws(PersistedFileError) -> [UInt8]
  {
    let length = try check(offset, count, what, exact: exact)
    switch self {
    case .file(let file):
      let bytes = try file.bytes(at: offset, count: Int(length))
      guard !exact || bytes.count == Int(length) else {
        throw elfFailure(.truncated, "shrank while being read")
      }
      return bytes
    case .memory(let bytes):
      let start = Int(offset)
      return Array(bytes[start..<start + Int(length)])
    }
  }

  /// How many bytes a read of `count` at `offset` gives (`count` itself when `exact`), or why
  /// the file cannot give them: outside it, or more than `largestRead`.
  @discardableResult
  package func check(_ offset: UInt64, _ count: UInt64, _ what: String, exact: Bool = true)
    throws(PersistedFileError) -> UInt64
  {
    let available = offset <= size ? size - offset : 0
    guard offset <= size, !exact || count <= available else {
      throw elfFailure(
        .corrupt, "\(what) (\(count) bytes at offset \(offset)) lies outside the file of \(size) bytes")
    }
    let length = min(count, available)
    guard length <= ByteSource.largestRead else {
      throw elfFailure(.corrupt, "\(what) claims \(length) bytes")
    }
    return length
  }

  /// `count` bytes at `offset`, exactly, in pages of their own (PageBuffer): for tables that may
  /// run to megabytes.
  package func readPages(_ offset: UInt64, _ count: UInt64, _ what: String) throws(PersistedFileError)
    -> PageBuffer
  {
    let length = Int(try check(offset, count, what))
    switch self {
    case .file(let file):
      let buffer = try file.pages(at: offset, count: length)
      guard buffer.count == length else { throw elfFailure(.truncated, "shrank while being read") }
      return buffer
    case .memory(let bytes):
      let buffer: PageBuffer
      do throws(SystemCallError) {
        buffer = try PageBuffer(byteCount: length)
      } catch {
        throw PersistedFileError(
          .unreadable, "cannot map \(length) bytes for \(what): \(error.cause)", format: .elf,
          errno: error.errno)
      }
      let start = Int(offset)
      buffer.bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<start + length]))
      return buffer
    }
  }

  /// A table of `count` entries of `entrySize` bytes at `offset`.
  package func readTable(_ offset: UInt64, _ count: UInt64, _ entrySize: UInt64, _ what: String)
    throws(PersistedFileError)
    -> [UInt8]
  {
    let (total, overflow) = count.multipliedReportingOverflow(by: entrySize)
    guard !overflow else { throw elfFailure(.corrupt, "\(what): \(count) entries of \(entrySize) bytes") }
    return try read(offset, total, what)
  }
}

/// An error about an ELF file, thrown by the parser (`PersistedFile.read` adds the path).
func elfFailure(_ kind: PersistedFileError.Kind, _ reason: String) -> PersistedFileError {
  PersistedFileError(kind, reason, format: .elf)
}
