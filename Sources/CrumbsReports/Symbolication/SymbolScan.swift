// SymbolScan.swift — naming a few addresses from a module's symbol table without sorting it:
// what a next launch needs (a crash's 70 frames fall in a handful of functions), for a fraction
// of what the sorted table costs (SortedSymbols.read: every entry kept, every name read, a sort).
//
// Entry points, in call order:
//   SymbolScan.scan(section, sections:, source:, addresses:)   one pass over the entries, in
//                                       chunks, keeping per address only what
//                                       SortedSymbols.symbol(containing:) would look at: the
//                                       `lookBack` highest symbol starts at or below it (the
//                                       best-ranked symbol at each) and the lowest start above
//                                       it (which cuts an unsized symbol short) — so the answer
//                                       is the same symbol, with the same size
//     → names read for the answers only, and a name's first byte only where two symbols share
//       a start (the rank prefers the public spelling)
//   DeferredSymbols                     an ELFImage's table after a scan: the scan's answers,
//                                       and the sorted table read on the first lookup of any
//                                       other address (a later report of the same process), once
//
// The scan makes the checks SortedSymbols.read makes (entry size, ranges, the string table's
// link), so a damaged file gives the same problems either way. Which entries can name code, and
// their rank, is the crash handler's rule (SortedSymbols.keep → ELFSymbolRule →
// crumbs_elf_symbol_rank). The handler's own scan (crumbs_elf_symbol.c) is not this one, and
// why: in a signal handler it may not allocate, sort or read a section per symbol, so it takes
// the first sized function holding each of its few frames; a report names what the sorted
// table names (innermost, best ranked, unsized symbols too), for any number of addresses, with
// the problems of a damaged file said in words. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import Synchronization

package struct SymbolScan {
  /// How many symbols below an address a lookup considers (SortedSymbols.symbol(containing:)).
  static let lookBack = 8

  /// How many of the table's entries can hold code (0: the table names nothing).
  package var keptCount: Int
  /// For each address asked about, its symbol, or nil when none covers it.
  package var answers: [UInt64: ELFSymbol?]

  private struct Candidate {
    var symbol: PackedSymbol
    /// Whether its name does not start with `_`, once read (only needed to break a tie).
    var plainName: Bool?
  }

  /// The symbols starting after the address before it, up to its own address.
  private struct Bucket {
    /// Ascending by start, distinct starts, at most `lookBack`.
    var top: [Candidate] = []
    var lowestStart: UInt64 = .max
    var isEmpty = true
  }

  /// Scans one symbol table (`section`) for the symbols covering `addresses` (ELF virtual
  /// addresses, exactly as they will be looked up).
  package static func scan(
    _ section: Section, sections: [Section], source: ByteSource, addresses: [UInt64]
  ) throws(PersistedFileError) -> SymbolScan {
    let (entrySize, count, names) = try SortedSymbols.tableShape(section, sections: sections, source: source)
    let nameTableSize = Int(try source.check(names.offset, names.size, "symbol names"))

    let queries = Array(Set(addresses)).sorted()
    // Bucket j holds the starts in (queries[j-1], queries[j]]; the last one those above all.
    var buckets = [Bucket](repeating: Bucket(), count: queries.count + 1)
    var keptCount = 0
    var pending: [(symbol: PackedSymbol, bucket: Int)] = []
    let entriesPerChunk = max(1, SortedSymbols.chunkBytes / entrySize)
    var first: UInt64 = 0
    while first < count {
      let chunkCount = min(entriesPerChunk, count - first)
      let entries = try source.read(
        section.offset + first * entrySize, chunkCount * entrySize, "symbol table")
      pending.removeAll(keepingCapacity: true)
      entries.withUnsafeBytes { raw in
        for index in 0..<Int(chunkCount) {
          guard
            let symbol = SortedSymbols.keep(
              raw, at: index * Int(entrySize), nameTableSize: nameTableSize, sections: sections)
          else { continue }
          keptCount += 1
          var low = 0
          var high = queries.count
          while low < high {
            let middle = low + (high - low) / 2
            if queries[middle] < symbol.start { low = middle + 1 } else { high = middle }
          }
          buckets[low].isEmpty = false
          buckets[low].lowestStart = min(buckets[low].lowestStart, symbol.start)
          if low < queries.count,
            buckets[low].top.count < lookBack || symbol.start >= buckets[low].top[0].symbol.start
          {
            pending.append((symbol, low))
          }
        }
      }
      for (symbol, bucket) in pending {
        try insert(symbol, into: &buckets[bucket], names: names, source: source)
      }
      first += chunkCount
    }
    guard keptCount > 0 else { return SymbolScan(keptCount: 0, answers: [:]) }

    var answers: [UInt64: ELFSymbol?] = [:]
    for (position, address) in queries.enumerated() {
      // The lowest start above the address: what SortedSymbols.read cuts an unsized symbol at.
      var above = buckets[(position + 1)...].first { !$0.isEmpty }?.lowestStart
      var found: ELFSymbol?
      var considered = 0
      var bucket = position
      search: while bucket >= 0 {
        for candidate in buckets[bucket].top.reversed() {
          guard considered < lookBack else { break search }
          considered += 1
          let symbol = candidate.symbol
          var size = symbol.size
          if symbol.rank & 1 == 0, let above { size = min(size, above - symbol.start) }
          if address - symbol.start < size {
            found = ELFSymbol(
              name: try name(at: symbol.nameOffset, names: names, source: source), start: symbol.start,
              size: size)
            break search
          }
          above = symbol.start
        }
        bucket -= 1
      }
      answers[address] = .some(found)
    }
    return SymbolScan(keptCount: keptCount, answers: answers)
  }

  /// Adds `symbol` to the bucket's highest starts, keeping at each start the best ranked (the
  /// earlier in the table on a tie), as SortedSymbols.read does.
  private static func insert(
    _ symbol: PackedSymbol, into bucket: inout Bucket, names: Section, source: ByteSource
  ) throws(PersistedFileError) {
    if let index = bucket.top.firstIndex(where: { $0.symbol.start == symbol.start }) {
      var incoming = Candidate(symbol: symbol, plainName: nil)
      if try rank(&incoming, names, source) > rank(&bucket.top[index], names, source) {
        bucket.top[index] = incoming
      }
      return
    }
    if bucket.top.count == lookBack {
      guard symbol.start > bucket.top[0].symbol.start else { return }
      bucket.top.removeFirst()
    }
    let position = bucket.top.firstIndex { $0.symbol.start > symbol.start } ?? bucket.top.count
    bucket.top.insert(Candidate(symbol: symbol, plainName: nil), at: position)
  }

  /// The candidate's full rank, its name's first byte read once.
  private static func rank(_ candidate: inout Candidate, _ names: Section, _ source: ByteSource)
    throws(PersistedFileError) -> UInt8
  {
    if candidate.plainName == nil {
      let first = try source.read(names.offset + UInt64(candidate.symbol.nameOffset), 1, "symbol name")
      candidate.plainName = first[0] != UInt8(ascii: "_")
    }
    return candidate.symbol.rank + (candidate.plainName! ? SortedSymbols.plainNameRank : 0)
  }

  /// The NUL-terminated name at `offset` of the string table (to its end when unterminated), as
  /// ELFImage.string reads it from the whole table.
  private static func name(at offset: UInt32, names: Section, source: ByteSource) throws(PersistedFileError)
    -> String
  {
    var bytes: [UInt8] = []
    var position = UInt64(offset)
    while position < names.size {
      let chunk = try source.read(names.offset + position, min(256, names.size - position), "symbol name")
      if let end = chunk.firstIndex(of: 0) {
        bytes += chunk[..<end]
        break
      }
      bytes += chunk
      position += UInt64(chunk.count)
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// A module's symbol table as a scan left it: the answers for the addresses the scan was asked
/// about, and for any other address the sorted table, read from the file on first need (checked
/// to be the same file: same build ID and table) and kept, so that every copy of the image (the
/// ParsedModuleCache's too) has it from then on. Thread-safe.
package final class DeferredSymbols: Sendable {
  private let path: String
  private let buildID: [UInt8]
  private let table: ELFImage.SymbolTable
  private let scan: SymbolScan
  /// What the sorted table will take, for the cache's bound before it is read.
  package let estimatedByteCount: Int
  private let sorted = Mutex<SortedSymbols?>(nil)

  init(path: String, buildID: [UInt8], table: ELFImage.SymbolTable, scan: SymbolScan, estimatedByteCount: Int)
  {
    self.path = path
    self.buildID = buildID
    self.table = table
    self.scan = scan
    self.estimatedByteCount = estimatedByteCount
  }

  package var keptCount: Int { scan.keptCount }

  package func symbol(containing address: UInt64) -> ELFSymbol? {
    if let answer = scan.answers[address] { return answer }
    return sortedSymbols.symbol(containing: address)
  }

  /// The whole table, sorted (read once).
  package var sortedSymbols: SortedSymbols {
    sorted.withLock { sorted in
      if let sorted { return sorted }
      var read = SortedSymbols.empty
      if let image = try? ELFImage.read(path: path), image.buildID == buildID, image.symbolTable == table {
        read = image.sortedSymbols
      }
      sorted = read
      return read
    }
  }
}

extension SymbolScan: Sendable {}
