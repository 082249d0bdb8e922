// RingFormatVersionTests.swift — rings written by earlier versions of the format stay readable,
// and version 2's checksum (computed while copying, recomputed by walking the payload) still
// rejects every damaged, torn or lapped slot.
//
// Tests/Fixtures/ring-v1.ring was written by the version-1 writer (commit 9e331c1): 64 slots of
// 128 bytes, app "v1-fixture", seven breadcrumbs (levels, types, attributes, a message cut at a
// character boundary, one appended by the C entry with the signal-handler flag), closed clean.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct RingFormatVersionTests {
  static let v1Fixture = ConsumerPackage.packageRoot + "/Tests/Fixtures/ring-v1.ring"

  @Test func aVersion1RingIsReadAsItWasWritten() throws {
    let contents = try RingReader.read(file: Self.v1Fixture)
    #expect(contents.header.version == 1)
    #expect(contents.header.appName == "v1-fixture")
    #expect(contents.header.state == .clean)
    #expect(contents.counts.valid == 7)
    #expect(contents.counts.torn == 0)
    let crumbs = contents.breadcrumbs
    #expect(
      crumbs.map(\.message) == [
        "first", "GET /v1/cart → 200", "disk almost full", String(repeating: "é", count: 46), "many",
        "signal", "last",
      ])
    #expect(crumbs.map(\.level) == [.debug, .info, .warning, .error, .info, .fatal, .info])
    #expect(crumbs.map(\.type) == [.manual, .http, .system, .log, .user, .system, .navigation])
    #expect(crumbs.map(\.threadSequence) == Array(0..<7))
    #expect(
      crumbs[1].attributes == [
        .init(key: "http.route", value: "/v1/cart"), .init(key: "http.status_code", value: "200"),
      ])
    #expect(crumbs[2].attributes == [.init(key: "free", value: "1%")])
    #expect(crumbs[3].messageTruncated && !crumbs[3].attributesTruncated)
    #expect(crumbs[4].attributes.map(\.value) == ["1", "2", "3"])
    #expect(crumbs[5].fromSignalHandler)
    #expect(crumbs.filter(\.fromSignalHandler).count == 1)
    #expect(crumbs[6].attributes == [.init(key: "to", value: "/checkout")])
    #expect(crumbs.filter(\.truncated).count == 1)
  }

  /// The version-1 checksum still guards version-1 files: one changed payload byte makes that
  /// slot torn, never a different breadcrumb.
  @Test func aDamagedVersion1SlotIsTorn() throws {
    var bytes = try Syscall.readFile(Self.v1Fixture)
    let good = try bytes.withUnsafeBytes { image throws(PersistedFileError) in
      try RingReader.read(image: image)
    }
    let slotsOffset = bytes.withUnsafeBytes {
      Int(
        $0.loadUnaligned(
          fromByteOffset: MemoryLayout<crumbs_ring_header>.offset(of: \.slots_offset)!, as: UInt64.self))
    }
    // The general lane's second slot ("GET /v1/cart → 200"): one byte of its message.
    bytes[slotsOffset + 128 + Int(CRUMBS_SLOT_MESSAGE_OFFSET) + 2] ^= 0x20
    let damaged = try bytes.withUnsafeBytes { image throws(PersistedFileError) in
      try RingReader.read(image: image)
    }
    #expect(damaged.counts.valid == good.counts.valid - 1)
    #expect(damaged.counts.torn == 1)
    #expect(
      !damaged.breadcrumbs.contains { $0.message.hasPrefix("GE") && $0.message != "GET /v1/cart → 200" })
    #expect(
      damaged.breadcrumbs.map(\.message)
        == good.breadcrumbs.map(\.message).filter { $0 != "GET /v1/cart → 200" })
  }

  /// A ring of one breadcrumb (256-byte slots) and where its slot is.
  static func oneBreadcrumb(_ directory: TestDirectory) throws -> (bytes: [UInt8], slot: Int, lane: Int) {
    let ring = try BreadcrumbRing.create(at: directory.file("one.ring"))
    ring.append(
      "GET /api/v1/orders/8c2f41e0 answered 200", level: .info, type: .http,
      attributes: ["method": "GET", "status": "200", "route": "/api/v1/orders/:id"])
    let id = try #require(ring.snapshot().breadcrumbs.first?.id)
    ring.close(clean: false)
    let bytes = try Syscall.readFile(directory.file("one.ring"))
    let lane = Int(id >> 48)
    let slotsOffset = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 32, as: UInt64.self) })
    let firstSlot = Int(
      bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4096 + lane * 64 + 8, as: UInt32.self) })
    return (bytes, slotsOffset + firstSlot * 256, lane)
  }

  static func read(_ bytes: [UInt8]) throws -> RingContents {
    try bytes.withUnsafeBytes { image throws(PersistedFileError) in try RingReader.read(image: image) }
  }

  @Test func newRingsAreWrittenAsVersion3WithALedger() throws {
    let directory = TestDirectory()
    let (bytes, _, _) = try Self.oneBreadcrumb(directory)
    #expect(CRUMBS_RING_VERSION == 3)
    let contents = try Self.read(bytes)
    #expect(contents.header.version == 3)
    #expect(contents.breadcrumbs.map(\.attributes.count) == [3])
    #expect(contents.ledger?.capacity == 512)
  }

  /// Version 3 only added the ledger after the slots (and its two header fields, reserved zero
  /// before): a version-3 ring without a ledger, its version word set to 2, is byte for byte what
  /// the version-2 writer wrote. It is read as before; in a version-2 file the ledger fields are
  /// not trusted, whatever they hold.
  @Test func aVersion2RingIsReadAsBeforeAndItsReservedBytesNameNoLedger() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.ledgerEntryCount = 0
    let ring = try BreadcrumbRing.create(at: directory.file("v2.ring"), options: options)
    ring.append("from version 2")
    ring.close(clean: true)
    var bytes = try Syscall.readFile(directory.file("v2.ring"))
    let versionOffset = 8
    bytes.replaceSubrange(versionOffset..<versionOffset + 4, with: [2, 0, 0, 0])
    var contents = try Self.read(bytes)
    #expect(contents.header.version == 2)
    #expect(contents.breadcrumbs.map(\.message) == ["from version 2"])
    #expect(contents.ledger == nil)
    // The ledger fields (offset 3592, count 3600) set in a version-2 file: ignored.
    bytes.replaceSubrange(3600..<3604, with: [8, 0, 0, 0])
    contents = try Self.read(bytes)
    #expect(contents.ledger == nil && contents.breadcrumbs.count == 1)
  }

  /// Every byte the checksum covers matters: the header words, the lengths, the message, each
  /// key and value. One flipped bit anywhere in them and the slot is torn, never misread.
  @Test func flippingAnyCoveredByteOfAVersion2SlotMakesItTorn() throws {
    let directory = TestDirectory()
    let (bytes, slot, _) = try Self.oneBreadcrumb(directory)
    let payloadLength = Int(bytes[slot + 32]) | Int(bytes[slot + 33]) << 8
    // 8..<24: ticks, thread id and sequence; 28..<32: level, type, flags, attribute count;
    // then the payload (24..<28 is the checksum itself).
    let covered = Array(8..<24) + Array(28..<32) + Array(32..<(32 + payloadLength))
    for offset in covered {
      var damaged = bytes
      damaged[slot + offset] ^= 0x01
      let contents = try Self.read(damaged)
      #expect(contents.counts.valid == 0 && contents.counts.torn == 1, "byte \(offset) of the slot")
    }
  }

  /// A slot holding lane position n, relabelled as the same slot's position one lap later (its
  /// commit word rewritten, the lane head moved past it), does not verify: the checksum is
  /// seeded with the position.
  @Test func aSlotFromAnotherLapDoesNotVerifyAsThisOne() throws {
    let directory = TestDirectory()
    var (bytes, slot, lane) = try Self.oneBreadcrumb(directory)
    let laneSlots = UInt64(
      bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4096 + lane * 64 + 12, as: UInt32.self) })
    let laterPosition = laneSlots  // same slot, next lap
    bytes.withUnsafeMutableBytes {
      $0.storeBytes(of: (laterPosition + 1) << 1, toByteOffset: slot, as: UInt64.self)  // DONE(n)
      $0.storeBytes(of: laterPosition + 1, toByteOffset: 4096 + lane * 64, as: UInt64.self)  // head
    }
    let contents = try Self.read(bytes)
    #expect(contents.counts.valid == 0)
    #expect(contents.counts.torn == 1)
  }
}
