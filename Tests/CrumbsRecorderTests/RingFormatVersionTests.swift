// RingFormatVersionTests.swift — rings written by earlier versions of the format stay readable.
//
// Tests/Fixtures/ring-v1.ring was written by the version-1 writer (commit 9e331c1): 64 slots of
// 128 bytes, app "v1-fixture", seven breadcrumbs (levels, types, attributes, a message cut at a
// character boundary, one appended by the C entry with the signal-handler flag), closed clean.

import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

@Suite struct RingFormatVersionTests {
  static let v1Fixture = ConsumerPackageTests.packageRoot + "/Tests/Fixtures/ring-v1.ring"

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
}
