// LedgerReader.swift — the in-flight ledger of a ring (crumbs_ledger.h), read as untrusted bytes.
//
// Entry points: LedgerReader.read(image:layout:) for a file (the next launch, the collector),
// LedgerReader.readLive(_:) for this process's own mapped ring while writers run (a thread dump),
// and readLive(_:handle:layout:) for one operation of it (the scope of a non-fatal report).
// Both decode each entry with `decode`, which checks every length against the layout before it
// reads a byte: a damaged entry is counted as unreadable, never trusted, never a trap; a damaged
// ledger header is named in `LedgerContents.damage` and hides no breadcrumb. Not signal-safe.

import CrumbsSignalPath

package enum LedgerReader {
  static let entrySize = Int(CRUMBS_LEDGER_ENTRY_SIZE)
  static let headerSize = Int(CRUMBS_LEDGER_HEADER_SIZE)
  static let entryHeaderSize = Int(CRUMBS_LEDGER_ENTRY_HEADER_SIZE)
  static let nameMax = Int(CRUMBS_LEDGER_NAME_MAX)
  static let pairsSize = Int(CRUMBS_LEDGER_PAIRS_SIZE)

  /// How many bytes of the file the ledger `layout` names takes from its offset.
  package static func byteCount(_ place: (offset: Int, entryCount: Int)) -> Int {
    headerSize + place.entryCount * entrySize
  }

  /// The ledger of a whole ring file image whose header `layout` validated; nil when the ring
  /// has none.
  package static func read(image: UnsafeRawBufferPointer, layout: RingLayout) -> LedgerContents? {
    guard let place = layout.ledger else { return nil }
    let bytes = byteCount(place)
    guard place.offset <= image.count, bytes <= image.count - place.offset else {
      return LedgerContents(capacity: place.entryCount, damage: "the ledger is cut off")
    }
    return read(
      ledger: UnsafeRawBufferPointer(rebasing: image[place.offset..<place.offset + bytes]), layout: layout)
  }

  /// The ledger from its own bytes (`byteCount` of them, from its offset).
  package static func read(ledger: UnsafeRawBufferPointer, layout: RingLayout) -> LedgerContents? {
    guard let place = layout.ledger else { return nil }
    guard ledger.count == byteCount(place) else {
      return LedgerContents(capacity: place.entryCount, damage: "the ledger is cut off")
    }
    let header = ledger.loadUnaligned(as: crumbs_ledger_header.self)
    if let damage = damage(of: header, entryCount: place.entryCount) {
      return LedgerContents(capacity: place.entryCount, damage: damage)
    }
    let clock = RingClock(layout: layout)
    var contents = LedgerContents(capacity: place.entryCount, overflow: header.overflow)
    for index in 0..<place.entryCount {
      let start = headerSize + index * entrySize
      let entry = UnsafeRawBufferPointer(rebasing: ledger[start..<start + entrySize])
      let state = entry.loadUnaligned(as: UInt64.self)
      switch UInt32(state & 3) {
      case UInt32(CRUMBS_LEDGER_FREE): continue
      case UInt32(CRUMBS_LEDGER_OPEN):
        if let operation = decode(entry, clock: clock) {
          contents.open.append(operation)
        } else {
          contents.unreadable += 1
        }
      default: contents.unreadable += 1
      }
    }
    contents.open.sort { $0.startMonotonicNanoseconds < $1.startMonotonicNanoseconds }
    return contents
  }

  /// The ledger of this process's own ring while writers run: each entry copied with the
  /// seqlock read, tried again a few times when it changed during the copy.
  package static func readLive(_ ring: UnsafePointer<crumbs_ring>, layout: RingLayout) -> LedgerContents? {
    guard let place = layout.ledger, ring.pointee.ledger != nil else { return nil }
    let clock = RingClock(layout: layout)
    var contents = LedgerContents(capacity: place.entryCount, overflow: crumbs_ledger_overflow(ring))
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: entrySize, alignment: 8)
    defer { buffer.deallocate() }
    for index in 0..<place.entryCount {
      // An entry busy four times in a row (a writer that died halfway, or a very busy one) is
      // counted, not waited for.
      var phase = UInt32(CRUMBS_LEDGER_WRITING)
      for _ in 0..<4 where phase == UInt32(CRUMBS_LEDGER_WRITING) {
        phase = crumbs_ledger_read_entry(ring, UInt32(index), buffer.baseAddress)
      }
      switch phase {
      case UInt32(CRUMBS_LEDGER_FREE): continue
      case UInt32(CRUMBS_LEDGER_OPEN):
        if let operation = decode(UnsafeRawBufferPointer(buffer), clock: clock) {
          contents.open.append(operation)
        } else {
          contents.unreadable += 1
        }
      default: contents.unreadable += 1
      }
    }
    contents.open.sort { $0.startMonotonicNanoseconds < $1.startMonotonicNanoseconds }
    return contents
  }

  /// One operation of this process's own ring, while `handle`'s entry still holds it (OPEN, of
  /// the handle's generation): a seqlock copy, tried 4 times while a writer is busy in it.
  package static func readLive(
    _ ring: UnsafePointer<crumbs_ring>, handle: crumbs_ledger_handle, layout: RingLayout
  ) -> OpenOperation? {
    guard layout.ledger != nil, ring.pointee.ledger != nil, handle.valid != 0 else { return nil }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: entrySize, alignment: 8)
    defer { buffer.deallocate() }
    var phase = UInt32(CRUMBS_LEDGER_WRITING)
    for _ in 0..<4 where phase == UInt32(CRUMBS_LEDGER_WRITING) {
      phase = crumbs_ledger_read_entry(ring, handle.index, buffer.baseAddress)
    }
    // The state word is the generation above the phase: another operation's entry now, or ours.
    guard phase == UInt32(CRUMBS_LEDGER_OPEN),
      buffer.load(as: UInt64.self) == handle.generation << 2 | UInt64(CRUMBS_LEDGER_OPEN)
    else { return nil }
    return decode(UnsafeRawBufferPointer(buffer), clock: RingClock(layout: layout))
  }

  /// What is wrong with a ledger header, or nil.
  static func damage(of header: crumbs_ledger_header, entryCount: Int) -> String? {
    guard header.magic == CRUMBS_LEDGER_MAGIC else {
      return header.magic == 0 ? "the ledger has no magic" : "the ledger's magic is damaged"
    }
    guard header.header_size == CRUMBS_LEDGER_HEADER_SIZE, header.entry_size == CRUMBS_LEDGER_ENTRY_SIZE
    else {
      return "the ledger's sizes (\(header.header_size), \(header.entry_size)) are not this reader's"
    }
    guard Int(header.entry_count) == entryCount else {
      return "the ledger says \(header.entry_count) entries, the ring header \(entryCount)"
    }
    return nil
  }

  /// One OPEN entry's operation, or nil when a length in it is out of range.
  static func decode(_ entry: UnsafeRawBufferPointer, clock: RingClock) -> OpenOperation? {
    guard entry.count == entrySize else { return nil }
    let header = entry.loadUnaligned(as: crumbs_ledger_entry_header.self)
    // Every begin stores a thread and a start: an entry without them was never begun (a damaged
    // state word), whatever its phase says.
    guard header.state >> 2 != 0, header.thread_id != 0, header.start_ticks != 0 else { return nil }
    let shape = header.shape
    let nameLength = Int(shape.name_length)
    let pairsLength = Int(shape.pairs_length)
    let attributeCount = Int(shape.attribute_count)
    guard nameLength <= nameMax, pairsLength <= pairsSize, attributeCount <= Int(CRUMBS_LEDGER_MAX_ATTRIBUTES)
    else { return nil }
    let nameStart = entryHeaderSize
    let name = String(decoding: entry[nameStart..<nameStart + nameLength], as: UTF8.self)
    var attributes: [Breadcrumb.Attribute] = []
    var offset = nameStart + nameMax
    let pairsEnd = offset + pairsLength
    for _ in 0..<attributeCount {
      guard offset + 2 <= pairsEnd else { return nil }
      let keyLength = Int(entry[offset])
      let valueLength = Int(entry[offset + 1])
      let keyStart = offset + 2
      let valueStart = keyStart + keyLength
      guard valueStart + valueLength <= pairsEnd else { return nil }
      attributes.append(
        Breadcrumb.Attribute(
          key: String(decoding: entry[keyStart..<valueStart], as: UTF8.self),
          value: String(decoding: entry[valueStart..<valueStart + valueLength], as: UTF8.self)))
      offset = valueStart + valueLength
    }
    guard offset == pairsEnd else { return nil }
    let flags = UInt32(shape.flags)
    var trace: TraceContext?
    var parent: String?
    if flags & UInt32(CRUMBS_LEDGER_HAS_TRACE) != 0 {
      trace = TraceContext(
        traceID: LoadedModule.hex(bytes(of: header.trace_id)),
        spanID: LoadedModule.hex(bytes(of: header.span_id)))
      if flags & UInt32(CRUMBS_LEDGER_HAS_PARENT) != 0 {
        let parentBytes = bytes(of: header.parent_span_id)
        if parentBytes.contains(where: { $0 != 0 }) { parent = LoadedModule.hex(parentBytes) }
      }
    }
    let times = clock.times(ofTicks: header.start_ticks)
    var operation = OpenOperation(
      name: name, kind: OpenOperation.Kind(raw: shape.kind), trace: trace, parentSpanID: parent,
      startWallNanoseconds: times.wall, startMonotonicNanoseconds: times.monotonic,
      threadID: header.thread_id,
      attributes: attributes,
      nameTruncated: flags & UInt32(CRUMBS_LEDGER_NAME_TRUNCATED) != 0,
      attributesTruncated: flags & UInt32(CRUMBS_LEDGER_ATTRIBUTES_TRUNCATED) != 0)
    operation.startTicks = header.start_ticks
    return operation
  }

  private static func bytes<T>(of tuple: T) -> [UInt8] {
    withUnsafeBytes(of: tuple) { Array($0) }
  }
}
