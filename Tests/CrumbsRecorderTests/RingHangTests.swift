// RingHangTests.swift — the hang going on, in the ring header (issue 23, "killed while hung"):
// what the watchdog writes (BreadcrumbRing.recordHang/refreshHang/clearHang) reads back whole,
// from the file and live; a torn write and an old file read as no hang; damaged fields are
// named, never trusted, never a trap.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Synchronization
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct RingHangTests {
  static let since: UInt64 = 1_700_000_000_000_000_000

  /// A fresh ring in its own directory.
  func makeRing() throws -> BreadcrumbRing {
    var options = RingOptions()
    options.slotCount = 64
    return try RingDirectory(path: TestDirectory().path).createRing(options: options)
  }

  /// The header of `ring`'s file as the next launch reads it.
  func fileHeader(_ ring: BreadcrumbRing) throws -> RingHeaderInfo {
    try RingReader.read(file: ring.path).header
  }

  /// The header of a copy of `ring`'s file changed by `change` (offsets into the header).
  func damagedHeader(_ ring: BreadcrumbRing, _ change: (UnsafeMutableRawBufferPointer) -> Void) throws
    -> RingHeaderInfo
  {
    var bytes = try Syscall.readFile(ring.path)
    bytes.withUnsafeMutableBytes(change)
    return try bytes.withUnsafeBytes { image throws(PersistedFileError) in try RingReader.read(image: image) }
      .header
  }

  static func offset(_ field: PartialKeyPath<crumbs_ring_header>) -> Int {
    MemoryLayout<crumbs_ring_header>.offset(of: field)!
  }

  @Test func aRecordedHangReadsBackFromTheFileAndLive() throws {
    let ring = try makeRing()
    defer { ring.close() }
    ring.recordHang(watch: "event-loop-1", sinceWallNanoseconds: Self.since, frames: "EventLoop.run() ← main")
    ring.refreshHang(seenWallNanoseconds: Self.since + 31_000_000_000)
    let expected = OngoingHang(
      watch: "event-loop-1", sinceWallNanoseconds: Self.since,
      seenWallNanoseconds: Self.since + 31_000_000_000,
      frames: "EventLoop.run() ← main")
    let file = try fileHeader(ring)
    #expect(file.ongoingHang == expected)
    #expect(file.hangDamage == nil)
    #expect(ring.snapshot().header.ongoingHang == expected)
    #expect(expected.durationNanoseconds == 31_000_000_000)
    #expect(expected.summary == "a hang of 31 s of event-loop-1 in EventLoop.run() ← main")
  }

  @Test func recordingTakesNowAsTheFirstLookAndARefreshNeverGoesBeforeTheStart() throws {
    let ring = try makeRing()
    defer { ring.close() }
    let before = SystemClock.wallNanoseconds()
    let since = before - 5_000_000_000
    ring.recordHang(watch: "pool", sinceWallNanoseconds: since, frames: "")
    let recorded = try #require(try fileHeader(ring).ongoingHang)
    #expect(recorded.seenWallNanoseconds >= before)
    #expect(recorded.seenWallNanoseconds <= SystemClock.wallNanoseconds())
    #expect(recorded.frames == "")
    // A look the clock put before the start (a wall clock stepped back) is the start.
    ring.refreshHang(seenWallNanoseconds: since - 1)
    #expect(try fileHeader(ring).ongoingHang?.seenWallNanoseconds == since)
    // A start in the future (another clock) is its own first look.
    ring.recordHang(watch: "pool", sinceWallNanoseconds: UInt64.max - 1, frames: "")
    #expect(try fileHeader(ring).ongoingHang?.durationNanoseconds == 0)
  }

  @Test func aClearedHangAndANeverRecordedOneReadAsNone() throws {
    let ring = try makeRing()
    defer { ring.close() }
    #expect(try fileHeader(ring).ongoingHang == nil)
    ring.refreshHang(seenWallNanoseconds: Self.since)  // no hang recorded: nothing to refresh
    #expect(try fileHeader(ring).ongoingHang == nil)
    ring.recordHang(watch: "w", sinceWallNanoseconds: 0, frames: "f")  // 0 is "no hang"
    #expect(try fileHeader(ring).ongoingHang == nil)

    ring.recordHang(watch: "worker", sinceWallNanoseconds: Self.since, frames: "spin()")
    #expect(try fileHeader(ring).ongoingHang != nil)
    ring.clearHang()
    let cleared = try fileHeader(ring)
    #expect(cleared.ongoingHang == nil && cleared.hangDamage == nil)
    #expect(ring.snapshot().header.ongoingHang == nil)
    // Every hang byte is zero again, as in a file that never had a hang, and the sequence even.
    let bytes = try Syscall.readFile(ring.path)
    let start = Self.offset(\.hang_since_wall_ns)
    let end = Self.offset(\.hang_frames) + MemoryLayout.size(ofValue: crumbs_ring_header().hang_frames)
    #expect(bytes[start..<end].allSatisfy { $0 == 0 })
    #expect(
      bytes.withUnsafeBytes {
        $0.loadUnaligned(fromByteOffset: Self.offset(\.hang_sequence), as: UInt32.self)
      } == 4)
  }

  /// Files from before the fields (all zero there) read as no hang: the version-1 fixture.
  @Test func anOldFileReadsAsNoHang() throws {
    let header = try RingReader.read(file: RingFormatVersionTests.v1Fixture).header
    #expect(header.ongoingHang == nil)
    #expect(header.hangDamage == nil)
  }

  /// A writer killed inside the seqlock leaves the sequence odd: nothing is used, no damage named.
  @Test func aTornWriteReadsAsNoHang() throws {
    let ring = try makeRing()
    defer { ring.close() }
    ring.recordHang(watch: "event-loop-1", sinceWallNanoseconds: Self.since, frames: "f")
    let torn = try damagedHeader(ring) { $0[Self.offset(\.hang_sequence)] |= 1 }
    #expect(torn.ongoingHang == nil)
    #expect(torn.hangDamage == nil)
    // Live: the same, through the mapping.
    ring.handle.pointee.header.pointee.hang_sequence |= 1
    #expect(ring.snapshot().header.ongoingHang == nil)
    ring.handle.pointee.header.pointee.hang_sequence &+= 1
    #expect(ring.snapshot().header.ongoingHang?.watch == "event-loop-1")
  }

  @Test func damagedFieldsAreNamedNeverTrusted() throws {
    let ring = try makeRing()
    defer { ring.close() }
    ring.recordHang(watch: "event-loop-1", sinceWallNanoseconds: Self.since, frames: "f ← g")
    let watch = Self.offset(\.hang_watch)
    let frames = Self.offset(\.hang_frames)
    let cases: [(String, (UnsafeMutableRawBufferPointer) -> Void)] = [
      (
        "its watch name has no terminating NUL in 64 bytes",
        { for index in 0..<64 { $0[watch + index] = 0x41 } }
      ),
      ("its watch name is not valid UTF-8", { $0[watch + 1] = 0xC3 }),  // a lead byte, then "e"
      (
        "its frame list has no terminating NUL in 512 bytes",
        { for index in 0..<512 { $0[frames + index] = 0x41 } }
      ),
      ("its frame list is not valid UTF-8", { $0[frames] = 0xFF }),
      (
        "its last look (\(Self.since - 1) ns) is before its start (\(Self.since) ns)",
        { $0.storeBytes(of: Self.since - 1, toByteOffset: Self.offset(\.hang_seen_wall_ns), as: UInt64.self) }
      ),
      (
        "its last look (0 ns) is before its start (\(Self.since) ns)",
        { $0.storeBytes(of: 0, toByteOffset: Self.offset(\.hang_seen_wall_ns), as: UInt64.self) }
      ),
    ]
    for (damage, change) in cases {
      let header = try damagedHeader(ring, change)
      #expect(header.ongoingHang == nil, "\(damage)")
      #expect(header.hangDamage == damage)
      // The rest of the header still reads.
      #expect(header.state == .running)
      #expect(header.sessionID == ring.sessionID)
    }
    // The worst seen − since: no overflow anywhere (the duration is checked arithmetic).
    let extreme = try damagedHeader(ring) {
      $0.storeBytes(of: 1, toByteOffset: Self.offset(\.hang_since_wall_ns), as: UInt64.self)
      $0.storeBytes(of: UInt64.max, toByteOffset: Self.offset(\.hang_seen_wall_ns), as: UInt64.self)
    }
    let hang = try #require(extreme.ongoingHang)
    #expect(hang.durationNanoseconds == UInt64.max - 1)
    #expect(hang.summary == "a hang of 307445734 min 34 s of event-loop-1 in f ← g")
  }

  /// Each text is cut at a character boundary to fit its field, and NUL-terminated.
  @Test func longTextsAreCutAtACharacterBoundary() throws {
    let ring = try makeRing()
    defer { ring.close() }
    // 62 ASCII bytes, then "é" (2 bytes) would end at byte 64: only 63 fit before the NUL.
    let watch = String(repeating: "w", count: 62) + "é" + "tail"
    let frames = String(repeating: "𝄞", count: 200)  // 4 bytes each: 127 of them fit in 511
    ring.recordHang(watch: watch, sinceWallNanoseconds: Self.since, frames: frames)
    let hang = try #require(try fileHeader(ring).ongoingHang)
    #expect(hang.watch == String(repeating: "w", count: 62))
    #expect(hang.frames == String(repeating: "𝄞", count: 127))
    ring.recordHang(watch: String(repeating: "x", count: 63), sinceWallNanoseconds: Self.since, frames: "")
    #expect(try fileHeader(ring).ongoingHang?.watch == String(repeating: "x", count: 63))
    ring.recordHang(watch: "", sinceWallNanoseconds: Self.since, frames: "")
    #expect(try fileHeader(ring).ongoingHang?.summary.hasSuffix("of an unnamed watch") == true)
  }

  @Test func aClosedRingIgnoresTheWatchdog() throws {
    let ring = try makeRing()
    ring.recordHang(watch: "w", sinceWallNanoseconds: Self.since, frames: "")
    let path = ring.path
    ring.close()
    ring.clearHang()
    ring.recordHang(watch: "other", sinceWallNanoseconds: Self.since + 1, frames: "")
    ring.refreshHang(seenWallNanoseconds: Self.since + 99)
    #expect(try RingReader.read(file: path).header.ongoingHang?.watch == "w")
  }

  /// The seqlock: a reader copying while the watchdog rewrites the hang sees one whole hang or
  /// none, never a mix of two (each hang's texts and times belong together).
  @Test func aLiveReaderNeverSeesAMixOfTwoHangs() throws {
    let ring = try makeRing()
    defer { ring.close() }
    // Different lengths too, so that a mix of the two shows in either text.
    let hangs = [("a", "A", 60, 500), ("b", "B", 61, 501)].enumerated().map { index, shape in
      OngoingHang(
        watch: String(repeating: shape.0, count: shape.2), sinceWallNanoseconds: Self.since + UInt64(index),
        seenWallNanoseconds: Self.since + 1_000 + UInt64(index),
        frames: String(repeating: shape.1, count: shape.3))
    }
    let stop = StopFlag()
    let writer = try BackgroundThread.startJoinable(name: "hang-writer") {
      var turn = 0
      while !stop.value.load(ordering: .relaxed) {
        let hang = hangs[turn & 1]
        ring.recordHang(
          watch: hang.watch, sinceWallNanoseconds: hang.sinceWallNanoseconds, frames: hang.frames)
        ring.refreshHang(seenWallNanoseconds: hang.seenWallNanoseconds)
        if turn % 7 == 0 { ring.clearHang() }
        turn += 1
      }
    }
    var (seen, mixed, damaged) = (0, 0, 0)
    for _ in 0..<20_000 {
      let header = ring.snapshot().header
      if header.hangDamage != nil { damaged += 1 }
      guard var hang = header.ongoingHang else { continue }
      seen += 1
      // Between record and refresh the first look is the record's own: compare the rest.
      hang.seenWallNanoseconds = hang.sinceWallNanoseconds + 1_000
      if !hangs.contains(hang) { mixed += 1 }
    }
    stop.value.store(true, ordering: .relaxed)
    writer.join()
    #expect(seen > 0)
    #expect(mixed == 0)
    #expect(damaged == 0)
  }

  @Test func durationsReadAsAPersonReadsThem() {
    let cases: [(UInt64, String)] = [
      (0, "0.0 s"), (49_999_999, "0.0 s"), (50_000_000, "0.1 s"), (7_340_000_000, "7.3 s"),
      (9_949_999_999, "9.9 s"), (9_950_000_000, "10 s"), (31_000_000_000, "31 s"), (31_499_999_999, "31 s"),
      (119_499_999_999, "119 s"), (119_500_000_000, "2 min 0 s"), (725_000_000_000, "12 min 5 s"),
      (UInt64.max, "307445734 min 34 s"),
    ]
    for (nanoseconds, text) in cases {
      #expect(OngoingHang.durationText(nanoseconds) == text, "\(nanoseconds)")
    }
  }
}

/// A flag the test's threads share (an Atomic cannot be captured by an escaping closure).
private final class StopFlag: Sendable {
  let value = Atomic<Bool>(false)
}
