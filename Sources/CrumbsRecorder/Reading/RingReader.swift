// RingReader.swift — reading a ring, after the fact or live.
//
// Entry points, in call order:
//   RingReader.read(file:)   a ring file left by a live, crashed or killed process: its tables,
//                            then its slots a chunk at a time into one small buffer
//   RingReader.read(image:)  the same from bytes in memory (what the fuzzer drives)
//     → RingHeaderValidation.validate  every header field checked before any slot is touched
//     → decodeSlots                    commit word, position, checksum, then the payload into
//                                      BreadcrumbSlots (text kept as bytes: Breadcrumbs and their
//                                      strings are made only when `breadcrumbs` is read)
//   RingReader.readLive               a mapped ring while writers run (BreadcrumbRing.snapshot)
//   RingReader.readLiveLedger         its in-flight ledger alone (BreadcrumbRing.openOperations)
//
// A reader never returns a torn slot (commit word not DONE, position not matching the slot,
// checksum mismatch, or a payload that does not parse) and never traps on any input: every
// length is bounds-checked and all arithmetic is on values already validated. Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

/// Counts of what the slots held.
public struct SlotCounts: Sendable, Equatable, Codable {
  /// Complete, verified breadcrumbs (returned).
  public var valid = 0
  /// Slots caught mid-write, failing their checksum, or not parsing (never returned).
  public var torn = 0
  /// Breadcrumbs lost to wrap-around: appended, then overwritten by newer ones in their lane.
  public var overwritten = 0
  /// Slots never written.
  public var empty = 0
  /// Breadcrumbs given up at append time: their slots were still being written a whole lap
  /// behind, several times in a row (only under extreme oversubscription).
  public var dropped = 0

  public init() {}
}

/// What a ring's header says about its writer.
public struct RingHeaderInfo: Sendable, Equatable {
  public var version: UInt32
  public var pid: Int32
  public var sessionID: SessionID
  public var bootID: [UInt8]
  public var appName: String
  public var executable: String
  public var state: RingState
  public var slotSize: Int
  public var slotCount: Int
  public var laneCount: Int
  public var generalLaneCount: Int
  /// Ring creation, nanoseconds since the Unix epoch.
  public var createdWallNanoseconds: UInt64
  /// Total appends ever claimed, all lanes.
  public var appendsClaimed: UInt64
  /// A memory-pressure warning was recorded during the session.
  public var receivedMemoryWarning: Bool = false
  /// The writer's cgroup v2 path ("" when unknown).
  public var cgroup: String = ""
  /// The cgroup's oom_kill count when the ring was made, when known.
  public var cgroupOOMKillsAtStart: UInt64? = nil
  /// With state `.terminatedBySignal`: the signal that ended the process.
  public var endSignal: Int32? = nil
  /// A forked child's ring: the pid of the process it was forked from.
  public var parentPID: Int32? = nil
  /// A forked child's ring: the session of the ring it was forked from.
  public var parentSessionID: SessionID? = nil
  /// The writer's start time (clock ticks after boot; 0 when unknown, as in older files).
  public var writerStartTicks: UInt64 = 0
  /// The inode of the writer's pid namespace (0 when unknown).
  public var writerPIDNamespace: UInt64 = 0
  /// The app's version the writer was configured with ("" when unknown, as in older files).
  public var appVersion: String = ""
  /// The resource the writer's environment gave it, as a JSON object of strings ("" when none,
  /// as in older files): see crumbs_ring_header.environment_resource.
  public var environmentResource: String = ""
  /// The hang going on when the header was last written (the client's watchdog records it):
  /// nil when none was (and in files from before the fields), or when the fields were caught
  /// mid-write or are damaged (see OngoingHang.read).
  public var ongoingHang: OngoingHang? = nil
  /// Why the header's hang fields could not be used, when they are damaged (a name without its
  /// NUL or not valid UTF-8, a last look before the start); nil when they are whole or unused.
  public var hangDamage: String? = nil
  /// The real-time signal that asks the writer for a dump of its threads (`crumbs threads PID`),
  /// while its client runs; 0: none (no client, closed, or a file from before the field).
  public var threadDumpSignal: Int32 = 0
  /// What came before an end without a clean exit: a stop request, a limit signal, the limits
  /// at start (none in files written before the fields existed).
  public var uncleanEndSigns = UncleanEndSigns()
}

extension RingHeaderInfo {
  /// The process that writes (or wrote) the ring, as the header names it.
  package var writer: ProcessIdentity {
    ProcessIdentity(pid: pid, startTicks: writerStartTicks, bootID: bootID, pidNamespace: writerPIDNamespace)
  }
}

extension RingHeaderInfo {
  package static let unknown = RingHeaderInfo(
    version: 0, pid: 0, sessionID: SessionID(bytes: [UInt8](repeating: 0, count: 16))!,
    bootID: [], appName: "", executable: "", state: .unknown, slotSize: 0, slotCount: 0,
    laneCount: 0, generalLaneCount: 0, createdWallNanoseconds: 0, appendsClaimed: 0)
}

/// `crumbs_ring_state` as Swift sees it.
public enum RingState: String, Sendable, Equatable, Codable {
  case running, clean, crashed, unknown
  /// A terminating signal the app did not handle (SIGTERM, SIGINT...) ended the process.
  case terminatedBySignal = "terminated_by_signal"

  init(raw: UInt32) {
    switch raw {
    case UInt32(CRUMBS_RING_RUNNING.rawValue): self = .running
    case UInt32(CRUMBS_RING_CLEAN.rawValue): self = .clean
    case UInt32(CRUMBS_RING_CRASHED.rawValue): self = .crashed
    case UInt32(CRUMBS_RING_TERMINATED_BY_SIGNAL.rawValue): self = .terminatedBySignal
    default: self = .unknown
    }
  }
}

/// Everything a reader found in a ring.
public struct RingContents: Sendable {
  public var header: RingHeaderInfo
  /// Oldest to newest. Made from the bytes read each time it is read (`slots`): keep the array
  /// rather than reading it again.
  public var breadcrumbs: [Breadcrumb] {
    get { slots.breadcrumbs }
    set { slots = BreadcrumbSlots(newValue) }
  }
  /// The breadcrumbs as read, their text as bytes: what the report path works on (see
  /// BreadcrumbSlots.swift).
  package var slots: BreadcrumbSlots
  public var counts: SlotCounts
  /// False when the ring's clock could not be calibrated (it died within milliseconds of its
  /// creation, in another boot): times are then the creation time plus raw ticks as nanoseconds.
  public var timesAreCalibrated: Bool
  /// The operations open in the ring's in-flight ledger; nil when the ring has none.
  public var ledger: LedgerContents? = nil

  package init(header: RingHeaderInfo, slots: BreadcrumbSlots, counts: SlotCounts, timesAreCalibrated: Bool) {
    self.header = header
    self.slots = slots
    self.counts = counts
    self.timesAreCalibrated = timesAreCalibrated
  }

  init(header: RingHeaderInfo, breadcrumbs: [Breadcrumb], counts: SlotCounts, timesAreCalibrated: Bool) {
    self.init(
      header: header, slots: BreadcrumbSlots(breadcrumbs), counts: counts,
      timesAreCalibrated: timesAreCalibrated)
  }
}

public enum RingReader {
  /// Reads a ring file. Errors say why the file is not a readable ring; damaged slots inside a
  /// good header are counted as torn, not thrown.
  public static func read(file path: String) throws(PersistedFileError) -> RingContents {
    try PersistedFile.read(path, as: .ring) { file throws(PersistedFileError) in
      guard file.size <= UInt64(RingOptions.maxFileSize) else {
        throw PersistedFileError(
          .unreadable, "cannot read: \(file.size) bytes, more than \(RingOptions.maxFileSize)", format: .ring)
      }
      let tables = Int(CRUMBS_RING_HEADER_SIZE + CRUMBS_RING_MAX_LANES * CRUMBS_RING_LANE_SIZE)
      let layout = try file.bytes(at: 0, count: tables).withUnsafeBytes { image in
        Result { () throws(PersistedFileError) in
          try RingHeaderValidation.validate(image, availableBytes: Int(clamping: file.size))
        }
      }.get()
      // The slots are read a chunk at a time into one small buffer, in the order decodeSlots
      // takes them (lane by lane, each in file order), and decoded there: the whole file read
      // into fresh pages cost as much again as decoding it (the kernel zeroing and charging a
      // page for each 4 KiB). A slot is whole in a chunk; a failed or short read ends
      // the reading with the error, as the whole file's read did.
      let slotSize = layout.slotSize
      let chunkSlots = max(1, Self.chunkBytes / slotSize)
      let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSlots * slotSize, alignment: 8)
      defer { chunk.deallocate() }
      var chunkStart = 0
      var chunkCount = 0
      var failure: PersistedFileError?
      let contents = decodeSlots(layout: layout) { slotIndex, _ in
        if slotIndex < chunkStart || slotIndex >= chunkStart + chunkCount {
          chunkStart = slotIndex
          chunkCount = 0
          guard failure == nil else { return (1, UnsafeRawBufferPointer(start: nil, count: 0)) }
          let wanted = min(chunkSlots, layout.slotCount - slotIndex)
          do throws(PersistedFileError) {
            let read = try file.read(
              at: UInt64(layout.slotsOffset + slotIndex * slotSize),
              into: UnsafeMutableRawBufferPointer(start: chunk.baseAddress, count: wanted * slotSize))
            guard read == wanted * slotSize else {
              throw PersistedFileError(
                .unreadable, "cannot read: the file shrank while it was read", format: .ring)
            }
            chunkCount = wanted
          } catch {
            failure = error
            return (1, UnsafeRawBufferPointer(start: nil, count: 0))
          }
        }
        let start = (slotIndex - chunkStart) * slotSize
        let slot = UnsafeRawBufferPointer(rebasing: chunk[start..<start + slotSize])
        return (slot.loadUnaligned(as: UInt64.self), slot)
      }
      if let failure { throw failure }
      var withLedger = contents
      if let place = layout.ledger {
        // A ledger that cannot be read is named; the breadcrumbs stand.
        do throws(PersistedFileError) {
          let bytes = try file.bytes(at: UInt64(place.offset), count: LedgerReader.byteCount(place))
          withLedger.ledger = bytes.withUnsafeBytes { LedgerReader.read(ledger: $0, layout: layout) }
        } catch {
          withLedger.ledger = LedgerContents(
            capacity: place.entryCount, damage: "cannot read the ledger: \(error)")
        }
      }
      return withLedger
    }
  }

  /// How much of a ring file `read(file:)` reads at once: a small block malloc serves from its
  /// arena (below its mmap threshold, see PageBuffer.swift), sixteen pages.
  static let chunkBytes = 64 << 10

  /// Reads only a ring file's header (and lane table), validated as `read(file:)` validates it:
  /// the contents it returns hold no breadcrumbs (counts zero, times not calibrated). Costs one
  /// small read however large the ring: for deciding about a ring without decoding its slots.
  public static func readHeader(file path: String) throws(PersistedFileError) -> RingContents {
    try PersistedFile.read(path, as: .ring) { file throws(PersistedFileError) in
      let tables = Int(CRUMBS_RING_HEADER_SIZE + CRUMBS_RING_MAX_LANES * CRUMBS_RING_LANE_SIZE)
      let bytes = try file.bytes(at: 0, count: tables)
      let layout = try bytes.withUnsafeBytes { image in
        Result { () throws(PersistedFileError) in
          try RingHeaderValidation.validate(image, availableBytes: Int(clamping: file.size))
        }
      }.get()
      return RingContents(
        header: layout.info, breadcrumbs: [], counts: SlotCounts(), timesAreCalibrated: false)
    }
  }

  /// The header of a ring file the caller opened itself as `fd` (`size` bytes long: beneath a
  /// directory, without following links), checked as `readHeader(file:)` checks it.
  package static func readHeader(descriptor fd: Int32, size: UInt64, path: String) throws(PersistedFileError)
    -> RingHeaderInfo
  {
    let tables = Int(CRUMBS_RING_HEADER_SIZE + CRUMBS_RING_MAX_LANES * CRUMBS_RING_LANE_SIZE)
    let bytes: [UInt8]
    do {
      bytes = try Syscall.read(fd, at: 0, count: tables, path: path)
    } catch {
      throw PersistedFileError(
        .unreadable, "cannot read: \(error.cause)", format: .ring, path: path, errno: error.errno)
    }
    return try bytes.withUnsafeBytes { image in
      Result { () throws(PersistedFileError) in
        try RingHeaderValidation.validate(image, availableBytes: Int(clamping: size)).info
      }
    }.get()
  }

  /// The in-flight ledger of a ring file the caller opened itself as `fd` (`size` bytes long),
  /// whose process may still be writing it (`crumbs threads`): untrusted bytes, checked as
  /// `read(file:)` checks them. Read twice: an entry that changed between the two reads (begun,
  /// renamed or ended meanwhile) is counted unreadable, or left out when the second read found
  /// it free. Nil when the ring has no ledger.
  package static func readLedger(descriptor fd: Int32, size: UInt64, path: String) throws(PersistedFileError)
    -> LedgerContents?
  {
    let tables = Int(CRUMBS_RING_HEADER_SIZE + CRUMBS_RING_MAX_LANES * CRUMBS_RING_LANE_SIZE)
    func read(at offset: UInt64, count: Int) throws(PersistedFileError) -> [UInt8] {
      do {
        return try Syscall.read(fd, at: offset, count: count, path: path)
      } catch {
        throw PersistedFileError(
          .unreadable, "cannot read: \(error.cause)", format: .ring, path: path, errno: error.errno)
      }
    }
    let layout = try read(at: 0, count: tables).withUnsafeBytes { image in
      Result { () throws(PersistedFileError) in
        try RingHeaderValidation.validate(image, availableBytes: Int(clamping: size))
      }
    }.get()
    guard let place = layout.ledger else { return nil }
    let count = LedgerReader.byteCount(place)
    var first = try read(at: UInt64(place.offset), count: count)
    let second = try read(at: UInt64(place.offset), count: count)
    guard first.count == count, second.count == count else {
      return LedgerContents(capacity: place.entryCount, damage: "the ledger is cut off")
    }
    for index in 0..<place.entryCount {
      let start = LedgerReader.headerSize + index * LedgerReader.entrySize
      let range = start..<start + LedgerReader.entrySize
      guard first[range] != second[range] else { continue }
      let state = second.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: start, as: UInt64.self) }
      let phase = UInt64(state & 3 == UInt64(CRUMBS_LEDGER_FREE) ? CRUMBS_LEDGER_FREE : CRUMBS_LEDGER_WRITING)
      // The state word's phase, in the file's (little-endian) byte order, as the decoder reads it.
      first.withUnsafeMutableBytes { $0.storeBytes(of: phase, toByteOffset: start, as: UInt64.self) }
    }
    return first.withUnsafeBytes { LedgerReader.read(ledger: $0, layout: layout) }
  }

  /// Reads a ring from a file image in memory.
  public static func read(image: UnsafeRawBufferPointer) throws(PersistedFileError) -> RingContents {
    let layout = try RingHeaderValidation.validate(image)
    let slotSize = layout.slotSize
    let slotsStart = layout.slotsOffset
    // The image does not change under the reader: each slot is decoded where it is, not copied.
    var contents = decodeSlots(layout: layout) { slotIndex, _ in
      let start = slotsStart + slotIndex * slotSize
      let slot = UnsafeRawBufferPointer(rebasing: image[start..<start + slotSize])
      return (slot.loadUnaligned(as: UInt64.self), slot)
    }
    contents.ledger = LedgerReader.read(image: image, layout: layout)
    return contents
  }

  /// Reads a mapped ring while writers run: each slot is copied with a seqlock read and skipped
  /// (as torn) if it changed during the copy.
  static func readLive(_ ring: UnsafePointer<crumbs_ring>) -> RingContents {
    let header = ring.pointee.header!
    // Our own ring, formatted by this process: validation cannot fail unless memory was
    // overwritten, and then an empty result is the honest answer.
    guard var layout = liveLayout(ring) else {
      return RingContents(
        header: RingHeaderInfo.unknown, breadcrumbs: [], counts: SlotCounts(),
        timesAreCalibrated: false)
    }
    // Validation read the hang fields from a plain copy of the header, which the watchdog may
    // have been writing: read them again with the seqlock, from the mapping.
    (layout.info.ongoingHang, layout.info.hangDamage) = OngoingHang.read(UnsafePointer(header))
    var contents = decodeSlots(layout: layout) { slotIndex, destination in
      (
        crumbs_ring_read_slot(ring, UInt32(slotIndex), destination.baseAddress),
        UnsafeRawBufferPointer(destination)
      )
    }
    contents.ledger = LedgerReader.readLive(ring, layout: layout)
    return contents
  }

  /// The layout of this process's own mapped ring, from its header; nil only when that memory
  /// was overwritten.
  static func liveLayout(_ ring: UnsafePointer<crumbs_ring>) -> RingLayout? {
    let header = ring.pointee.header!
    let tables = UnsafeRawBufferPointer(start: header, count: Int(header.pointee.slots_offset))
    return try? RingHeaderValidation.validate(tables, availableBytes: Int(header.pointee.file_size))
  }

  /// The in-flight ledger of a mapped ring while writers run, without its slots (the hang
  /// watchdog's look, a thread dump); nil when the ring has none or its header does not validate.
  static func readLiveLedger(_ ring: UnsafePointer<crumbs_ring>) -> LedgerContents? {
    guard let layout = liveLayout(ring) else { return nil }
    return LedgerReader.readLive(ring, layout: layout)
  }

  /// Decodes every slot through `copySlot(index, buffer) -> (commit word, slot)` (commit 0:
  /// never written; odd: being written or changed during the copy; even: a consistent slot, in
  /// the buffer or, from an image that cannot change, in place).
  static func decodeSlots(
    layout: RingLayout, copySlot: (Int, UnsafeMutableRawBufferPointer) -> (UInt64, UnsafeRawBufferPointer)
  ) -> RingContents {
    var counts = SlotCounts()
    // Room for a typical breadcrumb's text (it grows past that): not the whole payload of every
    // slot, a block that large freed would raise malloc's mmap threshold past the ring image's
    // (PageBuffer.swift; PlatformTests).
    var slots = BreadcrumbSlots(reservingCapacity: layout.slotCount, textBytes: layout.slotCount * 80)
    let clock = RingClock(layout: layout)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: layout.slotSize, alignment: 8)
    defer { buffer.deallocate() }

    for (laneIndex, lane) in layout.lanes.enumerated() {
      let laneSlots = UInt64(lane.slotCount)
      var validInLane: UInt64 = 0
      var tornInLane: UInt64 = 0
      for offset in 0..<lane.slotCount {
        let (commit, slot) = copySlot(lane.firstSlot + offset, buffer)
        if commit == 0 {
          counts.empty += 1
          continue
        }
        guard commit & 1 == 0 else {
          tornInLane += 1
          continue
        }
        let position = (commit >> 1) &- 1
        // The position must belong to this slot and must have been claimed (< head).
        guard position & (laneSlots - 1) == UInt64(offset), position < lane.head,
          SlotDecoder.decode(
            slot, position: position, lane: laneIndex, version: layout.info.version, into: &slots)
        else {
          tornInLane += 1
          continue
        }
        clock.stamp(&slots.entries[slots.entries.count - 1])
        validInLane += 1
      }
      counts.valid += Int(validInLane)
      counts.torn += Int(tornInLane)
      // Lane counters come from the file: saturate rather than trap on absurd values.
      counts.dropped = counts.dropped.saturatingAdd(Int(clamping: lane.dropped))
      // Every claimed position that was written and is not in a slot any more was overwritten.
      let written = lane.head &- min(lane.head, lane.skipped)
      let present = validInLane + tornInLane
      counts.overwritten = counts.overwritten.saturatingAdd(
        Int(clamping: written > present ? written - present : 0))
    }
    slots.sortByTime()
    return RingContents(
      header: layout.info, slots: slots, counts: counts, timesAreCalibrated: clock.isCalibrated)
  }
}

/// Decodes the payload of one slot copy whose commit word said DONE. Returns nil for anything
/// that does not verify or parse; never traps.
package enum SlotDecoder {
  /// Where the text at `offset..<offset + count` of `slot` is in `slots`, whose bytes from `base`
  /// on are a copy of the slot's from `copied` on; and whether it had to be repaired: the C
  /// entry takes any bytes, and invalid UTF-8 is appended as `String(decoding:)` repairs it
  /// (U+FFFD), which the breadcrumb's truncated flags then report. Valid text is used where the
  /// copy has it: no String is made (see BreadcrumbSlots.swift).
  static func text(
    _ slot: UnsafeRawBufferPointer, _ offset: Int, _ count: Int, copiedFrom copied: Int, at base: Int,
    into slots: inout BreadcrumbSlots
  ) -> (BreadcrumbSlots.Span, repaired: Bool) {
    let raw = UnsafeRawBufferPointer(rebasing: slot[offset..<offset + count])
    let typed = raw.assumingMemoryBound(to: UInt8.self)
    // ASCII (most breadcrumbs) is valid as it is; String(validating:) only for the rest.
    if isASCII(raw) || String(validating: typed, as: UTF8.self) != nil {
      return (BreadcrumbSlots.Span(start: base + offset - copied, count: count), false)
    }
    return (slots.append(String(decoding: typed, as: UTF8.self)), true)
  }

  /// Whether every byte is below 0x80, eight at a time.
  private static func isASCII(_ raw: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    while raw.count - index >= 8 {
      if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
        return false
      }
      index += 8
    }
    while index < raw.count {
      if raw[index] >= 0x80 { return false }
      index += 1
    }
    return true
  }

  /// The checksum a slot of a ring of format `version` should carry, or nil when its payload does
  /// not even parse (version 2 walks the payload to compute it; see crumbs_ring_layout.h).
  package static func checksum(_ slot: UnsafeRawBufferPointer, position: UInt64, version: UInt32) -> UInt32? {
    let payloadOffset = Int(CRUMBS_SLOT_PAYLOAD_OFFSET)
    guard slot.count >= Int(CRUMBS_SLOT_MIN_SIZE) else { return nil }
    if version == 1 {
      let payloadLength = Int(slot.loadUnaligned(fromByteOffset: payloadOffset, as: UInt16.self))
      guard payloadOffset + payloadLength <= slot.count else { return nil }
      return crumbs_slot_checksum_v1(slot.baseAddress, UInt32(payloadOffset + payloadLength), position)
    }
    var checksum: UInt32 = 0
    guard crumbs_slot_checksum_v2(slot.baseAddress, UInt32(slot.count), position, &checksum) else {
      return nil
    }
    return checksum
  }

  /// Appends the breadcrumb in `slot` to `slots`; false (and `slots` as it was) when the slot
  /// does not verify or parse. Never traps.
  package static func decode(
    _ slot: UnsafeRawBufferPointer, position: UInt64, lane: Int, version: UInt32,
    into slots: inout BreadcrumbSlots
  ) -> Bool {
    let bytesBefore = slots.bytes.count
    let spansBefore = slots.attributeSpans.count
    guard let entry = decodeEntry(slot, position: position, lane: lane, version: version, into: &slots) else {
      slots.bytes.removeSubrange(bytesBefore...)
      slots.attributeSpans.removeSubrange(spansBefore...)
      return false
    }
    slots.entries.append(entry)
    return true
  }

  /// The entry of `slot`, its text appended to `slots` (left there on failure: `decode` trims it).
  private static func decodeEntry(
    _ slot: UnsafeRawBufferPointer, position: UInt64, lane: Int, version: UInt32,
    into slots: inout BreadcrumbSlots
  ) -> BreadcrumbSlots.Entry? {
    let slotSize = slot.count
    let payloadOffset = Int(CRUMBS_SLOT_PAYLOAD_OFFSET)
    guard slotSize >= Int(CRUMBS_SLOT_MIN_SIZE) else { return nil }
    let payloadLength = Int(slot.loadUnaligned(fromByteOffset: payloadOffset, as: UInt16.self))
    let covered = payloadOffset + payloadLength
    guard payloadLength >= 2, covered <= slotSize else { return nil }
    let stored = slot.loadUnaligned(
      fromByteOffset: MemoryLayout<crumbs_slot_header>.offset(of: \.checksum)!, as: UInt32.self)
    guard checksum(slot, position: position, version: version) == stored else { return nil }
    let header = slot.loadUnaligned(as: crumbs_slot_header.self)
    guard let level = BreadcrumbLevel(rawValue: header.level),
      let type = BreadcrumbType(rawValue: header.type)
    else { return nil }

    var cursor = payloadOffset + 2
    let end = covered
    let messageLength = Int(slot.loadUnaligned(fromByteOffset: cursor, as: UInt16.self))
    cursor += 2
    guard messageLength <= end - cursor else { return nil }
    // The payload from the message on, copied whole (one copy a slot, not one a text): the
    // texts' spans point into it, past the attributes' length bytes.
    let copied = cursor
    let base = slots.bytes.count
    slots.bytes.append(
      contentsOf: UnsafeRawBufferPointer(rebasing: slot[copied..<end]).assumingMemoryBound(to: UInt8.self))
    let (message, messageRepaired) = text(
      slot, cursor, messageLength, copiedFrom: copied, at: base, into: &slots)
    cursor += messageLength

    var attributesRepaired = false
    let firstAttribute = slots.attributeSpans.count / 2
    let attributeCount = Int(header.attribute_count)
    for _ in 0..<attributeCount {
      guard end - cursor >= 2 else { return nil }
      let keyLength = Int(slot[cursor])
      let valueLength = Int(slot[cursor + 1])
      cursor += 2
      guard keyLength + valueLength <= end - cursor else { return nil }
      let (key, keyRepaired) = text(slot, cursor, keyLength, copiedFrom: copied, at: base, into: &slots)
      cursor += keyLength
      let (value, valueRepaired) = text(slot, cursor, valueLength, copiedFrom: copied, at: base, into: &slots)
      cursor += valueLength
      attributesRepaired = attributesRepaired || keyRepaired || valueRepaired
      slots.attributeSpans.append(key)
      slots.attributeSpans.append(value)
    }
    guard cursor == end else { return nil }

    let flags = UInt32(header.flags)
    return BreadcrumbSlots.Entry(
      id: UInt64(lane) << 48 | (position & 0xFFFF_FFFF_FFFF),
      ticks: header.ticks,
      threadSequence: header.thread_seq,
      threadID: header.thread_id,
      level: level,
      type: type,
      messageTruncated: flags & UInt32(CRUMBS_SLOT_MESSAGE_TRUNCATED) != 0 || messageRepaired,
      attributesTruncated: flags & UInt32(CRUMBS_SLOT_ATTRIBUTES_TRUNCATED) != 0 || attributesRepaired,
      fromSignalHandler: flags & UInt32(CRUMBS_SLOT_FROM_SIGNAL_HANDLER) != 0,
      message: message,
      firstAttribute: firstAttribute,
      attributeCount: attributeCount)
  }
}

extension Int {
  /// `self + other`, pinned at `Int.max` instead of trapping.
  package func saturatingAdd(_ other: Int) -> Int {
    let (sum, overflow) = addingReportingOverflow(other)
    return overflow ? Int.max : sum
  }
}
