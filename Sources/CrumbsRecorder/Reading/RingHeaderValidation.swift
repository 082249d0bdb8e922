// RingHeaderValidation.swift — trusting nothing in a ring file's header.
//
// Entry point: RingHeaderValidation.validate(image) → RingLayout, or a PersistedFileError that
// says in one line what is wrong. Every field a slot decoder depends on is checked against the
// layout rules of crumbs_ring_layout.h before a single slot is read. The hang going on
// (OngoingHang) is checked too, but damage there is named in the info, not thrown: the rest of
// the header still tells how the session ended. Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

/// A validated ring layout: every offset and count in it is within the image.
package struct RingLayout {
  package struct Lane {
    package var head: UInt64
    package var skipped: UInt64 = 0
    package var dropped: UInt64 = 0
    package var firstSlot: Int
    package var slotCount: Int
    package var important: Bool
  }

  package var slotSize: Int
  package var slotCount: Int
  package var slotsOffset: Int
  /// The in-flight ledger's place in the file (nil: none); its header is not checked yet (the
  /// ledger's reader does, and a damaged ledger never hides the breadcrumbs).
  package var ledger: (offset: Int, entryCount: Int)?
  package var lanes: [Lane]
  package var clockKind: UInt32
  package var created: crumbs_clock_anchor
  package var latestAnchor: crumbs_clock_anchor
  package var info: RingHeaderInfo
}

package enum RingHeaderValidation {
  package static let headerSize = Int(CRUMBS_RING_HEADER_SIZE)
  package static let laneSize = Int(CRUMBS_RING_LANE_SIZE)

  /// Validates the header and lane table of `image`, a whole ring file.
  package static func validate(_ image: UnsafeRawBufferPointer) throws(PersistedFileError) -> RingLayout {
    try validate(image, availableBytes: image.count)
  }

  /// Validates the header and lane table at the start of `image`; `availableBytes` is how long
  /// the whole file is (the slots need not be in `image`).
  package static func validate(_ image: UnsafeRawBufferPointer, availableBytes: Int)
    throws(PersistedFileError)
    -> RingLayout
  {
    let header = try checked(image, availableBytes: availableBytes)
    let slotSize = Int(header.slot_size)
    let slotCount = Int(header.slot_count)
    let laneCount = Int(header.lane_count)
    let generalLanes = Int(header.general_lane_count)
    let expectedSlotsOffset = Int(header.slots_offset)
    // Every lane was checked above: this only collects them.
    var lanes: [RingLayout.Lane] = []
    var nextSlot = 0
    var appendsClaimed: UInt64 = 0
    for index in 0..<laneCount {
      let lane = image.loadUnaligned(fromByteOffset: headerSize + index * laneSize, as: crumbs_ring_lane.self)
      let count = Int(lane.slot_count)
      lanes.append(
        .init(
          head: lane.head, skipped: lane.skipped, dropped: lane.dropped, firstSlot: nextSlot,
          slotCount: count, important: lane.important != 0))
      nextSlot += count
      appendsClaimed &+= lane.head
    }

    var info = RingHeaderInfo(
      version: header.version,
      pid: Int32(bitPattern: header.pid),
      sessionID: SessionID(bytes: bytes(of: header.session_id))!,
      bootID: bytes(of: header.boot_id),
      appName: string(of: header.app_name),
      executable: string(of: header.executable),
      state: RingState(raw: header.state),
      slotSize: slotSize,
      slotCount: slotCount,
      laneCount: laneCount,
      generalLaneCount: generalLanes,
      createdWallNanoseconds: header.created.wall_ns,
      appendsClaimed: appendsClaimed,
      receivedMemoryWarning: header.session_flags & UInt32(CRUMBS_SESSION_MEMORY_WARNING) != 0,
      cgroup: string(of: header.cgroup),
      cgroupOOMKillsAtStart: header.cgroup_oom_kills_at_start == UInt64.max
        ? nil : header.cgroup_oom_kills_at_start,
      endSignal: header.state == UInt32(CRUMBS_RING_TERMINATED_BY_SIGNAL.rawValue) && header.end_signal > 0
        && header.end_signal < 65 ? Int32(header.end_signal) : nil,
      parentPID: header.parent_pid == 0 ? nil : Int32(bitPattern: header.parent_pid),
      parentSessionID: SessionID(bytes: bytes(of: header.parent_session_id)).flatMap { $0.isZero ? nil : $0 },
      writerStartTicks: header.writer_start_ticks,
      writerPIDNamespace: header.writer_pid_namespace,
      appVersion: string(of: header.app_version),
      environmentResource: string(of: header.environment_resource),
      threadDumpSignal: realTimeSignal(header.thread_dump_signal))
    (info.ongoingHang, info.hangDamage) = withUnsafePointer(to: header) { OngoingHang.read($0) }
    info.uncleanEndSigns = withUnsafePointer(to: header) { UncleanEndSigns.read($0) }
    let latest = withUnsafePointer(to: header) { crumbs_ring_header_latest_anchor($0) }
    let ledger = try ledgerPlace(header, slotsEnd: expectedSlotsOffset + slotCount * slotSize)
    return RingLayout(
      slotSize: slotSize, slotCount: slotCount, slotsOffset: expectedSlotsOffset, ledger: ledger,
      lanes: lanes,
      clockKind: header.clock_kind, created: header.created, latestAnchor: latest, info: info)
  }

  /// Every rule `validate` checks, without building anything from the header: the header,
  /// or the error `validate` throws. For a reader that needs a few fields of many headers
  /// (RingHeaderSummary, at start): no string, array or hang field is made here.
  package static func checked(_ image: UnsafeRawBufferPointer, availableBytes: Int)
    throws(PersistedFileError) -> crumbs_ring_header
  {
    guard image.count >= 8 else {
      throw failure(.unrecognized, "not a Crumbs ring: only \(image.count) bytes")
    }
    let magic = image.loadUnaligned(as: UInt64.self)
    guard magic == CRUMBS_RING_MAGIC else {
      if magic == 0 {
        throw failure(.unrecognized, "not a Crumbs ring: no magic (creation never finished?)")
      }
      throw failure(.unrecognized, "not a Crumbs ring: magic is \(hex(magic))")
    }
    guard image.count >= headerSize else {
      throw failure(.truncated, "truncated ring: \(image.count) bytes, header alone is \(headerSize)")
    }
    let header = image.loadUnaligned(as: crumbs_ring_header.self)
    guard header.version != 0 else { throw corrupt("format version 0") }
    guard header.version <= CRUMBS_RING_VERSION else {
      throw failure(
        .unsupported,
        "ring format version \(header.version) is newer than this reader's (\(CRUMBS_RING_VERSION)); use a newer crumbs"
      )
    }
    guard header.header_size == CRUMBS_RING_HEADER_SIZE else {
      throw corrupt("header size \(header.header_size), expected \(CRUMBS_RING_HEADER_SIZE)")
    }
    let slotSize = Int(header.slot_size)
    guard slotSize >= Int(CRUMBS_SLOT_MIN_SIZE), slotSize <= Int(CRUMBS_SLOT_MAX_SIZE),
      slotSize.nonzeroBitCount == 1
    else {
      throw corrupt(
        "slot size \(slotSize) is not a power of two in \(CRUMBS_SLOT_MIN_SIZE)...\(CRUMBS_SLOT_MAX_SIZE)")
    }
    let laneCount = Int(header.lane_count)
    let generalLanes = Int(header.general_lane_count)
    guard laneCount >= 2, laneCount <= Int(CRUMBS_RING_MAX_LANES), generalLanes >= 1,
      generalLanes < laneCount, generalLanes.nonzeroBitCount == 1,
      (laneCount - generalLanes).nonzeroBitCount == 1
    else { throw corrupt("lane counts \(generalLanes)+\(laneCount - generalLanes) are not valid") }
    let lanesEnd = headerSize + laneCount * laneSize
    let expectedSlotsOffset = Int(crumbs_ring_slots_offset(UInt32(laneCount)))
    guard header.slots_offset == UInt64(expectedSlotsOffset) else {
      throw corrupt("slots offset \(header.slots_offset), expected \(expectedSlotsOffset)")
    }
    let slotCount = Int(header.slot_count)
    guard slotCount >= 1 else { throw corrupt("slot count \(slotCount)") }
    // More than any client makes (RingOptions.maxPlannedSlotCount): a crafted file, whose
    // millions of slots would be decoded for nothing.
    guard slotCount <= RingOptions.maxPlannedSlotCount else {
      throw corrupt(
        "slot count \(slotCount) is more than a client makes (\(RingOptions.maxPlannedSlotCount))")
    }
    let slotsEnd = expectedSlotsOffset + slotCount * slotSize
    let ledger = try ledgerPlace(header, slotsEnd: slotsEnd)
    let fileSize = slotsEnd + Int(crumbs_ledger_bytes(UInt32(ledger?.entryCount ?? 0)))
    guard header.file_size == UInt64(fileSize) else {
      throw corrupt(
        "file size field \(header.file_size) does not match \(slotCount) slots of \(slotSize) bytes"
          + (ledger.map { " and a ledger of \($0.entryCount) entries" } ?? ""))
    }
    guard availableBytes >= fileSize else {
      throw failure(.truncated, "truncated ring: \(availableBytes) bytes, header says \(fileSize)")
    }
    guard image.count >= lanesEnd else {
      throw failure(.truncated, "truncated ring: lane table cut off")
    }
    guard
      header.clock_kind == CRUMBS_CLOCK_CPU_COUNTER.rawValue
        || header.clock_kind == CRUMBS_CLOCK_MONOTONIC_NS.rawValue
    else { throw corrupt("unknown clock kind \(header.clock_kind)") }

    var nextSlot = 0
    for index in 0..<laneCount {
      let lane = image.loadUnaligned(fromByteOffset: headerSize + index * laneSize, as: crumbs_ring_lane.self)
      let count = Int(lane.slot_count)
      guard count >= 1, count.nonzeroBitCount == 1, Int(lane.first_slot) == nextSlot,
        count <= slotCount - nextSlot
      else { throw corrupt("lane \(index) (first slot \(lane.first_slot), \(count) slots) does not fit") }
      guard (lane.important != 0) == (index >= generalLanes) else {
        throw corrupt("lane \(index) has the wrong class")
      }
      nextSlot += count
    }
    guard nextSlot == slotCount else {
      throw corrupt("lanes hold \(nextSlot) slots, header says \(slotCount)")
    }
    return header
  }

  /// Where the in-flight ledger is (version 3 and later, when the header names one): right after
  /// the slots, with a valid entry count. Earlier versions have none, whatever those bytes say.
  package static func ledgerPlace(_ header: crumbs_ring_header, slotsEnd: Int)
    throws(PersistedFileError) -> (offset: Int, entryCount: Int)?
  {
    guard header.version >= 3, header.ledger_entry_count != 0 || header.ledger_offset != 0 else { return nil }
    guard crumbs_ledger_entry_count_is_valid(header.ledger_entry_count) else {
      throw corrupt(
        "ledger of \(header.ledger_entry_count) entries (a power of two in "
          + "\(CRUMBS_LEDGER_MIN_ENTRIES)...\(CRUMBS_LEDGER_MAX_ENTRIES))")
    }
    guard header.ledger_offset == UInt64(slotsEnd) else {
      throw corrupt("ledger offset \(header.ledger_offset), expected \(slotsEnd) (the end of the slots)")
    }
    return (slotsEnd, Int(header.ledger_entry_count))
  }

  private static func corrupt(_ reason: String) -> PersistedFileError {
    failure(.corrupt, "corrupt ring header: \(reason)")
  }

  private static func failure(_ kind: PersistedFileError.Kind, _ reason: String) -> PersistedFileError {
    PersistedFileError(kind, reason, format: .ring)
  }

  /// A real-time signal number (the kernel's 32...64), else 0: a damaged field never names a
  /// signal that would do something else (SIGKILL) to the process it is sent to.
  private static func realTimeSignal(_ value: Int32) -> Int32 {
    (32...64).contains(value) ? value : 0
  }

  private static func hex(_ value: UInt64) -> String {
    "0x" + String(value, radix: 16)
  }

  private static func bytes<T>(of tuple: T) -> [UInt8] {
    withUnsafeBytes(of: tuple) { Array($0) }
  }

  /// A NUL-terminated C string in a fixed field; invalid UTF-8 is repaired, not trusted.
  private static func string<T>(of tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
      let end = raw.firstIndex(of: 0) ?? raw.count
      return String(decoding: raw[0..<end], as: UTF8.self)
    }
  }
}

/// Converts a ring's clock ticks to monotonic and wall-clock time, from the header's anchors.
package struct RingClock {
  package let anchor: crumbs_clock_anchor
  package let ticksPerNanosecond: Double
  package let isCalibrated: Bool

  package init(layout: RingLayout) {
    anchor = layout.latestAnchor
    if layout.clockKind == CRUMBS_CLOCK_MONOTONIC_NS.rawValue {
      ticksPerNanosecond = 1
      isCalibrated = true
      return
    }
    let created = layout.created
    var later = layout.latestAnchor
    if later.monotonic_ns &- created.monotonic_ns < 1_000_000,
      SystemFacts.isCurrentBoot(layout.info.bootID)
    {
      // Died before the first refresh, but in this boot: the counter is still running, so an
      // anchor taken now calibrates it.
      later = crumbs_clock_anchor(
        ticks: crumbs_clock_now_ticks(layout.clockKind), monotonic_ns: SystemClock.monotonicNanoseconds(),
        wall_ns: 0)
    }
    let elapsedNanoseconds = later.monotonic_ns &- created.monotonic_ns
    let elapsedTicks = later.ticks &- created.ticks
    // A short interval calibrates well enough for the short span of ticks it has to convert:
    // the error is proportional to the distance from the anchor.
    if later.monotonic_ns > created.monotonic_ns, elapsedNanoseconds >= 10_000,
      later.ticks > created.ticks
    {
      ticksPerNanosecond = Double(elapsedTicks) / Double(elapsedNanoseconds)
      isCalibrated = true
    } else {
      ticksPerNanosecond = 1
      isCalibrated = false
    }
  }

  package func stamp(_ breadcrumb: inout BreadcrumbSlots.Entry) {
    (breadcrumb.monotonicNanoseconds, breadcrumb.wallTimeNanoseconds) = times(ofTicks: breadcrumb.ticks)
  }

  /// The monotonic and wall times (ns) of a tick count of this ring's clock.
  package func times(ofTicks ticks: UInt64) -> (monotonic: UInt64, wall: UInt64) {
    let deltaTicks = Double(Int64(bitPattern: ticks &- anchor.ticks))
    let scaled = (deltaTicks / ticksPerNanosecond).rounded()
    // Garbage ticks (a damaged file that still verified) must not trap the conversion.
    let deltaNanoseconds = scaled.isFinite && abs(scaled) < 9.0e18 ? Int64(scaled) : 0
    return (
      UInt64(bitPattern: Int64(bitPattern: anchor.monotonic_ns) &+ deltaNanoseconds),
      UInt64(bitPattern: Int64(bitPattern: anchor.wall_ns) &+ deltaNanoseconds)
    )
  }

}
