// SortedSymbols.swift — one module's symbols, sorted by address, and the string table their
// names point into, kept in pages of their own (PageBuffer) rather than in malloc's arenas.
//
// Entry points, in call order:
//   SortedSymbols.read(section, sections:, source:)   the symbol table's entries in chunks of
//                                                     64 KiB, what can hold code kept, sorted
//                                                     (stable: insertion runs, then merges),
//                                                     one symbol per address
//   symbols.symbol(containing:)                       binary search, for symbolication
//   symbols.all                                       every symbol with its name, for tools/tests
//
// Why pages: a module's tables run to megabytes (this repository's test binary: a 1.3 MB
// symbol table, 6 MB of names; a server with its dependencies more). Freed through malloc, each
// such block raises glibc's mmap threshold to its size for the rest of the process, and the
// app's own blocks under it then stay in arenas (see PageBuffer.swift). So the names, the kept
// symbols and the sort's scratch are PageBuffers, the entries are read a chunk at a time, and
// the standard library's sort (which takes its scratch from malloc) is not used.
//
// Every value read is untrusted; offsets and sizes are checked by ByteSource, counts and
// products with overflow-reporting arithmetic. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

/// Sorted by start address; among symbols at one address only the best one is kept. Never
/// changes once read, so it may be shared between threads.
package final class SortedSymbols: @unchecked Sendable {
  package static let empty = SortedSymbols(symbols: nil, count: 0, names: nil)

  /// `count` PackedSymbols.
  private let symbols: PageBuffer?
  package let count: Int
  /// The string table the symbols' names point into.
  private let names: PageBuffer?

  private init(symbols: PageBuffer?, count: Int, names: PageBuffer?) {
    self.symbols = symbols
    self.count = count
    self.names = names
  }

  private subscript(index: Int) -> PackedSymbol {
    symbols!.bytes.load(fromByteOffset: index * MemoryLayout<PackedSymbol>.stride, as: PackedSymbol.self)
  }

  /// The symbol whose range holds `address` (an ELF virtual address), or nil.
  package func symbol(containing address: UInt64) -> ELFSymbol? {
    // The last symbol starting at or below the address…
    var low = 0
    var high = count
    while low < high {
      let middle = low + (high - low) / 2
      if self[middle].start <= address { low = middle + 1 } else { high = middle }
    }
    // …or, rarely, an earlier, larger one around a nested symbol: look back a little.
    var index = low - 1
    let stop = max(-1, index - 8)
    while index > stop {
      let candidate = self[index]
      if address - candidate.start < candidate.size { return unpack(candidate) }
      index -= 1
    }
    return nil
  }

  /// The pages its tables take (the symbols as read, before duplicates went, and the names).
  package var byteCount: Int { (symbols?.count ?? 0) + (names?.count ?? 0) }

  /// Every symbol, in address order.
  package var all: [ELFSymbol] { (0..<count).map { unpack(self[$0]) } }

  private func unpack(_ packed: PackedSymbol) -> ELFSymbol {
    let table = names.map { UnsafeRawBufferPointer($0.bytes) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
    return withExtendedLifetime(names) {
      ELFSymbol(
        name: ELFImage.string(in: table, at: packed.nameOffset), start: packed.start, size: packed.size)
    }
  }

  // MARK: Reading

  /// Entries read at a time: small enough to come from (and go back to) an arena without moving
  /// malloc's thresholds.
  static let chunkBytes: UInt64 = 64 << 10

  /// A symbol table's entry size, entry count and string table, checked against the file: the
  /// same checks for the sorted read and the scan (SymbolScan), so a damaged file gives the same
  /// problem either way.
  static func tableShape(_ section: Section, sections: [Section], source: ByteSource)
    throws(PersistedFileError)
    -> (entrySize: UInt64, count: UInt64, names: Section)
  {
    let entrySize = section.entrySize == 0 ? 24 : section.entrySize
    // Real tables use 24; an absurd size (found by the fuzzer: above 2^63, with a table smaller
    // than one entry) must not reach `Int(entrySize)`.
    guard entrySize >= 24, entrySize <= 4096 else {
      throw elfFailure(.corrupt, "symbol entries of \(entrySize) bytes (need 24)")
    }
    let count = section.size / entrySize
    try source.check(section.offset, count * entrySize, "symbol table")  // no overflow: ≤ size
    guard section.link < UInt64(sections.count) else {
      throw elfFailure(.corrupt, "symbol table links to string table \(section.link) of \(sections.count)")
    }
    return (entrySize, count, sections[Int(section.link)])
  }

  /// Reads one symbol table (`section`), keeps what can hold code, and sorts it.
  static func read(_ section: Section, sections: [Section], source: ByteSource) throws(PersistedFileError)
    -> SortedSymbols
  {
    let (entrySize, count, stringSection) = try tableShape(section, sections: sections, source: source)
    let names = try source.readPages(stringSection.offset, stringSection.size, "symbol names")
    let nameBytes = UnsafeRawBufferPointer(names.bytes)

    // At most one kept symbol per entry; pages never written are never resident.
    let stride = MemoryLayout<PackedSymbol>.stride
    let kept = try pages(Int(count) * stride)
    let keptSymbols = kept.bytes.bindMemory(to: PackedSymbol.self)
    var keptCount = 0
    let entriesPerChunk = max(1, chunkBytes / entrySize)
    var first: UInt64 = 0
    while first < count {
      let chunkCount = min(entriesPerChunk, count - first)
      let entries = try source.read(
        section.offset + first * entrySize, chunkCount * entrySize, "symbol table")
      entries.withUnsafeBytes { raw in
        for index in 0..<Int(chunkCount) {
          if var symbol = keep(
            raw, at: index * Int(entrySize), nameTableSize: nameBytes.count, sections: sections)
          {
            if nameBytes[Int(symbol.nameOffset)] != UInt8(ascii: "_") { symbol.rank += plainNameRank }
            keptSymbols[keptCount] = symbol
            keptCount += 1
          }
        }
      }
      first += chunkCount
    }
    guard keptCount > 0 else { return .empty }

    // By address; at one address the best ranked first, then the table's order (stable).
    let scratch = try pages(keptCount * stride)
    mergeSort(
      UnsafeMutableBufferPointer(rebasing: keptSymbols[..<keptCount]),
      scratch: scratch.bytes.bindMemory(to: PackedSymbol.self)
    ) { $0.start != $1.start ? $0.start < $1.start : $0.rank > $1.rank }
    // One symbol per address: the best ranked, which sorts first.
    var unique = 0
    for index in 0..<keptCount where unique == 0 || keptSymbols[unique - 1].start != keptSymbols[index].start
    {
      keptSymbols[unique] = keptSymbols[index]
      unique += 1
    }
    for index in 0..<unique - 1 where keptSymbols[index].rank & 1 == 0 {
      keptSymbols[index].size = min(
        keptSymbols[index].size, keptSymbols[index + 1].start - keptSymbols[index].start)
    }
    return SortedSymbols(symbols: kept, count: unique, names: names)
  }

  /// The rank a name not starting with `_` adds (see `keep`): the public spelling of an alias.
  static let plainNameRank: UInt8 = 8

  /// The entry at `base` of `raw` as a PackedSymbol, or nil when it cannot hold code. Its rank
  /// leaves out `plainNameRank`, which needs the name's first byte: the caller adds it.
  static func keep(
    _ raw: UnsafeRawBufferPointer, at base: Int, nameTableSize: Int, sections: [Section]
  ) -> PackedSymbol? {
    let nameOffset = raw.loadUnaligned(fromByteOffset: base, as: UInt32.self).littleEndian
    let info = raw[base + 4]
    let sectionIndex = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: base + 6, as: UInt16.self))
    let value = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: base + 8, as: UInt64.self))
    let size = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: base + 16, as: UInt64.self))
    // Which entries hold code and how they rank: the crash handler's rule (ELFSymbolRule); the
    // name's first byte, which adds `plainNameRank`, is the caller's to read.
    let rank = ELFSymbolRule.rank(
      info: info, section: sectionIndex, size: size, nameOffset: nameOffset, namesSize: nameTableSize
    ) {
      Int(sectionIndex) < sections.count && sections[Int(sectionIndex)].flags & 0x4 != 0  // SHF_EXECINSTR
    }
    guard rank > 0 else { return nil }
    var extent = size
    if size == 0 {
      // Unsized (hand-written assembly, `_init`): provisionally up to the end of its section,
      // cut at the next symbol below.
      guard Int(sectionIndex) < sections.count else { return nil }
      let section = sections[Int(sectionIndex)]
      let (end, overflow) = section.address.addingReportingOverflow(section.size)
      guard !overflow, section.address <= value, value < end else { return nil }
      extent = end - value
    }
    return PackedSymbol(start: value, size: extent, nameOffset: nameOffset, rank: rank)
  }

  private static func pages(_ byteCount: Int) throws(PersistedFileError) -> PageBuffer {
    do throws(SystemCallError) {
      return try PageBuffer(byteCount: byteCount)
    } catch {
      throw PersistedFileError(
        .unreadable, "cannot map \(byteCount) bytes for the symbols: \(error.cause)", format: .elf,
        errno: error.errno)
    }
  }

  /// Sorts `items` stably, merging runs through `scratch` (at least as many elements): runs of
  /// 32 sorted by insertion, then merged pairwise (widths 32, 64, …), a pair already in order
  /// copied as it is. Allocates nothing.
  static func mergeSort(
    _ items: UnsafeMutableBufferPointer<PackedSymbol>, scratch: UnsafeMutableBufferPointer<PackedSymbol>,
    by areInIncreasingOrder: (PackedSymbol, PackedSymbol) -> Bool
  ) {
    let count = items.count
    precondition(scratch.count >= count, "SortedSymbols.mergeSort: scratch smaller than the items")
    let run = 32
    var runStart = 0
    while runStart < count {
      let runEnd = min(runStart + run, count)
      for index in runStart..<runEnd {
        // Stable: an item moves only past items strictly greater than it.
        let item = items[index]
        var position = index
        while position > runStart && areInIncreasingOrder(item, items[position - 1]) {
          items[position] = items[position - 1]
          position -= 1
        }
        items[position] = item
      }
      runStart = runEnd
    }
    var from = items
    var to = scratch
    var width = run
    while width < count {
      var start = 0
      while start < count {
        let middle = min(start + width, count)
        let end = min(start + 2 * width, count)
        if middle == end || !areInIncreasingOrder(from[middle], from[middle - 1]) {
          for output in start..<end { to[output] = from[output] }
          start = end
          continue
        }
        var left = start
        var right = middle
        for output in start..<end {
          // Stable: the left run's element wins unless the right one is strictly smaller.
          if right < end && (left == middle || areInIncreasingOrder(from[right], from[left])) {
            to[output] = from[right]
            right += 1
          } else {
            to[output] = from[left]
            left += 1
          }
        }
        start = end
      }
      swap(&from, &to)
      width *= 2
    }
    if from.baseAddress != items.baseAddress {
      for index in 0..<count { items[index] = from[index] }
    }
  }
}
