// AttributeValueTests.swift — typed report attributes keep their type through report.json and the
// session file (4.0 stays a double, not the integer 4), files written before attributes were
// typed (all strings) still read, and the grouping hint's digest is SHA-256.

import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct AttributeValueTests {
  static let typed: [String: AttributeValue] = [
    "feature.beta": .bool(true), "cart.items": .int(3), "cart.weight_kg": .double(4.0),
    "cart.total": .double(2.5), "region": .string("eu-west-1"), "big": .int(Int64.min),
    "quoted": .string("say \"hi\"\n"), "tiny": .double(.leastNonzeroMagnitude),
  ]

  static let packageRoot = String(
    #filePath.dropLast("Tests/CrumbsReportsTests/AttributeValueTests.swift".count))

  @Test func aStoredReportKeepsEachType() throws {
    var report = try ReportStore.decode(
      try Syscall.readFile(Self.packageRoot + "Fuzz/Corpus/stored-report/report.json"))
    report.attributes = Self.typed
    let decoded = try ReportStore.decode(try ReportStore.encode(report))
    #expect(decoded.attributes == Self.typed)
    #expect(decoded == report)
  }

  /// Written by the encoder of string attributes (the corpus report with string attributes, as
  /// `[String: String]` was encoded before this change).
  @Test func aReportJSONFromBeforeTypedAttributesStillReads() throws {
    let report = try ReportStore.decode(
      try Syscall.readFile(Self.packageRoot + "Tests/Fixtures/report-string-attributes.json"))
    #expect(
      report.attributes == [
        "region": .string("eu-west-1"), "cart.items": .string("3"), "feature.beta": .string("true"),
        "enduser.id": .string("user-42"),
      ])
  }

  @Test func theSessionFileKeepsEachType() throws {
    let directory = TestDirectory()
    var metadata = SessionMetadata(sessionID: SessionID(), appVersion: "1.0")
    metadata.attributes = Self.typed
    metadata.attributes["not.a.number"] = .double(.nan)
    let path = directory.file("s.session.json")
    try Syscall.writeFileAtomically(path, metadata.encoded(), durable: false)
    let read = try SessionMetadata.read(file: path)
    var expected = Self.typed
    // JSON holds no NaN: it is kept as its text.
    expected["not.a.number"] = .string("nan")
    #expect(read.attributes == expected)
  }

  @Test func aSessionFileFromBeforeTypedAttributesStillReads() throws {
    let directory = TestDirectory()
    let path = directory.file("s.session.json")
    let old =
      #"{"format":1,"sessionID":"6acdbf4e-718a-40c4-b194-12e38ae64caf","appVersion":"1.0","#
      + #""replacedCrashSignals":[],"attributes":{"region":"eu-west-1","n":"3"},"attachments":[],"omitted":0}"#
    try Syscall.writeFileAtomically(path, Array(old.utf8), durable: false)
    #expect(
      try SessionMetadata.read(file: path).attributes == ["region": .string("eu-west-1"), "n": .string("3")])
  }

  @Test func theSignatureDigestIsSHA256() {
    // FIPS 180-4 examples (one block, two blocks, a million bytes) and the empty
    // message.
    #expect(SHA256.hexDigest([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    #expect(
      SHA256.hexDigest(Array("abc".utf8))
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(
      SHA256.hexDigest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
        == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    #expect(
      SHA256.hexDigest(Array(repeating: UInt8(ascii: "a"), count: 1_000_000))
        == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
  }
}
