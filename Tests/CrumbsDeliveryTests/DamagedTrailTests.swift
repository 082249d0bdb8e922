// DamagedTrailTests.swift — a report folder whose breadcrumbs.jsonl.lz4 is not the frame we
// wrote: random bytes, a flipped bit in the frame descriptor or the content, a cut-off end, an
// impossible block size. Neither destination sends it; both name it among the omitted
// attachments with the same reason. The OTLP body is read with the official decoder.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct DamagedTrailTests {
  /// How to damage a valid frame, and the reason the note then gives.
  struct Damage: Sendable, CustomTestStringConvertible {
    var name: String
    var reason: String
    var apply: @Sendable ([UInt8]) -> [UInt8]
    var testDescription: String { name }
  }

  // A frame we write: magic (4), FLG, BD, content size (8), descriptor checksum, then blocks
  // (4-byte size, the compressed bytes, a 4-byte checksum each) and the end mark (4).
  static let damages = [
    Damage(name: "3000 random bytes", reason: "not an LZ4 frame (bad magic number)") { _ in
      var generator = SystemRandomNumberGenerator()
      return (0..<3000).map { _ in UInt8.random(in: 0...255, using: &generator) }
    },
    Damage(name: "a content size bit flipped", reason: "frame descriptor checksum mismatch") { frame in
      var frame = frame
      frame[6] ^= 0x01
      return frame
    },
    Damage(name: "a block checksum bit flipped", reason: "block checksum mismatch") { frame in
      var frame = frame
      frame[frame.count - 5] ^= 0x80
      return frame
    },
    Damage(name: "a compressed byte flipped", reason: "block checksum mismatch") { frame in
      var frame = frame
      frame[frame.count / 2] ^= 0x10
      return frame
    },
    Damage(name: "an impossible block size", reason: "bad block size") { frame in
      var frame = frame
      frame.replaceSubrange(15..<19, with: [0xFF, 0xFF, 0xFF, 0x7F])
      return frame
    },
    Damage(name: "the end cut off", reason: "truncated frame") { frame in Array(frame.dropLast(8)) },
  ]

  /// The fixture's report with its trail damaged.
  static func damagedFixture(_ damage: Damage) throws -> ReportFixture {
    let fixture = try ReportFixture()
    let path = fixture.reports[0].attachmentPath(TrailAttachment.name)
    try Syscall.writeFileAtomically(path, damage.apply(try Syscall.readFile(path)))
    return fixture
  }

  @Test(arguments: damages)
  func aDamagedTrailIsLeftOutOfOTLPWithItsReason(_ damage: Damage) throws {
    let fixture = try Self.damagedFixture(damage)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let uploader = ReportUploader(
      store: fixture.store,
      destinations: [OTLPDestination(endpoint: server.baseURL, breadcrumbsAsLogRecords: true)])
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
    let decoded = try decodeOTLP(try #require(server.requests.first).body)
    let records = try #require(decoded["records"] as? [[String: Any]])
    // The crash record alone: no breadcrumb records, no trail attribute.
    #expect(records.map { $0["event_name"] as? String } == ["device.crash"])
    let attributes = try #require(records.first?["attributes"] as? [String: Any])
    #expect(attributes[OTLPDestination.trailAttributeKey] == nil)
    #expect(decoded["trail_error"] == nil, "\(decoded["trail_error"] ?? "")")
    let omitted = try #require(attributes["crumbs.attachments.omitted"] as? [String])
    #expect(omitted == ["breadcrumbs.jsonl.lz4: damaged: \(damage.reason)"])
  }

  @Test(arguments: damages)
  func aDamagedTrailIsLeftOutOfBacktraceWithTheSameReason(_ damage: Damage) throws {
    let fixture = try Self.damagedFixture(damage)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [BacktraceDestination(endpoint: server.baseURL, token: "t")])
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
    let request = try #require(server.requests.first)
    let boundary = try #require(request.headers["content-type"]?.components(separatedBy: "boundary=").last)
    let parts = multipartParts(request.body, boundary: boundary)
    #expect(parts.map(\.name) == ["upload_file"])
    let json = try #require(try JSONSerialization.jsonObject(with: Data(parts[0].body)) as? [String: Any])
    let annotations = try #require(json["annotations"] as? [String: Any])
    let crumbs = try #require(annotations["Crumbs"] as? [String: Any])
    #expect(crumbs["omittedAttachments"] as? [String] == ["breadcrumbs.jsonl.lz4: damaged: \(damage.reason)"])
    #expect((json["attributes"] as? [String: Any])?["breadcrumbs.lastId"] as? Int == 0)
  }

  @Test func anUndamagedTrailVerifiesAndAnyFrameByTheLZ4CommandToo() throws {
    let fixture = try ReportFixture()
    let trail = try #require(try fixture.reports[0].trailAttachment())
    try LZ4Frame.verify(trail)
    // A frame without content size or checksum (lz4 --no-frame-crc) is whole too.
    let directory = TestDirectory()
    try Syscall.writeFileAtomically(directory.file("plain"), Array(repeating: 42, count: 200_000))
    let child = try ChildProcess(
      "/usr/bin/lz4", ["-q", "-f", "--no-frame-crc", directory.file("plain"), directory.file("plain.lz4")])
    child.wait()
    #expect(child.exitCode == 0)
    try LZ4Frame.verify(try Syscall.readFile(directory.file("plain.lz4")))
    // A frame with a content checksum (how trails were written before issue 26, and `lz4`'s
    // default) still has it checked.
    let withChecksum = try ChildProcess(
      "/usr/bin/lz4", ["-q", "-f", directory.file("plain"), directory.file("checked.lz4")])
    withChecksum.wait()
    #expect(withChecksum.exitCode == 0)
    var frame = try Syscall.readFile(directory.file("checked.lz4"))
    try LZ4Frame.verify(frame)
    frame[frame.count - 1] ^= 0x80
    #expect(throws: LZ4Error(reason: "content checksum mismatch")) { try LZ4Frame.verify(frame) }
  }

  @Test func theTrailWeWriteHasBlockChecksumsAndNoContentChecksum() throws {
    let fixture = try ReportFixture()
    let trail = try #require(try fixture.reports[0].trailAttachment())
    // FLG (byte 4): bit 4 block checksums, bit 3 content size, bit 2 content checksum.
    #expect(trail[4] & 0x10 != 0)
    #expect(trail[4] & 0x08 != 0)
    #expect(trail[4] & 0x04 == 0)
  }
}
