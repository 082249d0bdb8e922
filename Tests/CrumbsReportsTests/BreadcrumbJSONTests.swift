// BreadcrumbJSONTests.swift — the one JSON form of a breadcrumb (the trail's lines, and what
// `crumbs ring dump --json` prints): keys in the documented order, optional keys only when true.

import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct BreadcrumbJSONTests {
  static func breadcrumb(
    message: String = "GET \"/x\"\n", messageTruncated: Bool = false, attributesTruncated: Bool = false,
    fromSignalHandler: Bool = false
  ) -> Breadcrumb {
    Breadcrumb(
      id: 1 << 48 | 7, threadSequence: 42, threadID: 4242, wallTimeNanoseconds: 1_795_320_611_123_456_789,
      monotonicNanoseconds: 5, ticks: 6, level: .warning, type: .http, message: message,
      attributes: [.init(key: "status", value: "500"), .init(key: "url", value: "/x")],
      messageTruncated: messageTruncated, attributesTruncated: attributesTruncated,
      fromSignalHandler: fromSignalHandler)
  }

  @Test func aPlainBreadcrumbHasTheEightKeysInOrder() {
    #expect(
      Self.breadcrumb().jsonLine()
        == #"{"timestamp":"2026-11-22T04:10:11.123456Z","id":281474976710663,"seq":42,"thread":4242,"#
        + #""level":"warning","type":"http","message":"GET \"/x\"\n","#
        + #""attributes":{"status":"500","url":"/x"}}"#)
  }

  @Test func truncationNamesItsPartsAndASignalHandlerSaysSo() {
    #expect(
      Self.breadcrumb(messageTruncated: true).jsonLine().hasSuffix(
        #""attributes":{"status":"500","url":"/x"},"truncated":true,"truncated_parts":["message"]}"#))
    #expect(
      Self.breadcrumb(attributesTruncated: true).jsonLine().hasSuffix(
        #","truncated":true,"truncated_parts":["attributes"]}"#))
    #expect(
      Self.breadcrumb(messageTruncated: true, attributesTruncated: true, fromSignalHandler: true).jsonLine()
        .hasSuffix(#","truncated":true,"truncated_parts":["message","attributes"],"signal_handler":true}"#))
    #expect(Self.breadcrumb(fromSignalHandler: true).jsonLine().hasSuffix(#"},"signal_handler":true}"#))
  }

  @Test func theTrailIsOneLinePerBreadcrumb() throws {
    let crumbs = [Self.breadcrumb(), Self.breadcrumb(message: "second", fromSignalHandler: true)]
    let text = String(decoding: TrailAttachment.jsonLines(crumbs), as: UTF8.self)
    #expect(text == crumbs.map { $0.jsonLine() + "\n" }.joined())
    for line in text.split(separator: "\n") {
      #expect(try JSONSerialization.jsonObject(with: Data(line.utf8)) is [String: Any])
    }
  }
}

/// The raw line (`Breadcrumb.writeJSON`, issue 26) against the same object written through the
/// writer's scopes, and the one escaper against a byte-at-a-time reference: a varied trail
/// (unicode, escapes, every control character, DEL, runs around the eight-byte words, every
/// level and type, each truncation flag and the signal handler's, seconds changing).
@Suite struct BreadcrumbRawLineTests {
  /// A deterministic pseudo-random sequence (SplitMix64).
  struct Numbers {
    var state: UInt64
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
  }

  static let pieces: [String] = [
    "", "a", "GET /api/v1/orders/12", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1F}", "\u{7F}",
    "é", "日本語", "😀", "\u{FFFD}", "/", "'", "ab\"cdefgh", "12345678", "1234567", "123456789",
    "key=value", "token: abc", String(repeating: "x", count: 300), "\u{8}\u{C}",
  ]

  static func text(_ numbers: inout Numbers) -> String {
    (0..<numbers.below(6)).map { _ in pieces[numbers.below(pieces.count)] }.joined()
  }

  static func trail(count: Int) -> [Breadcrumb] {
    var numbers = Numbers(state: 26)
    var wall: UInt64 = 1_795_320_611_000_000_000
    return (0..<count).map { index in
      wall += UInt64(numbers.below(400_000_000))
      return Breadcrumb(
        id: index == 0 ? .max : numbers.next(), threadSequence: UInt32(truncatingIfNeeded: numbers.next()),
        threadID: index == 1 ? 0 : UInt32(truncatingIfNeeded: numbers.next()),
        wallTimeNanoseconds: index == 2 ? 0 : wall, monotonicNanoseconds: 0, ticks: 0,
        level: BreadcrumbLevel.allCases[index % BreadcrumbLevel.allCases.count],
        type: BreadcrumbType.allCases[index % BreadcrumbType.allCases.count], message: text(&numbers),
        attributes: (0..<numbers.below(5)).map { _ in .init(key: text(&numbers), value: text(&numbers)) },
        messageTruncated: numbers.below(3) == 0, attributesTruncated: numbers.below(3) == 0,
        fromSignalHandler: numbers.below(4) == 0)
    }
  }

  @Test func theRawLinesAreWhatTheScopesWrite() {
    let crumbs = Self.trail(count: 2_000)
    var scoped = JSONWriter()
    for breadcrumb in crumbs {
      breadcrumb.writeJSONThroughScopes(into: &scoped)
      scoped.newline()
    }
    // Line by line, so that a difference names its line rather than printing the whole trail.
    let raw = String(decoding: TrailAttachment.jsonLines(crumbs), as: UTF8.self)
      .split(separator: "\n", omittingEmptySubsequences: false)
    let scopes = String(decoding: scoped.bytes, as: UTF8.self).split(
      separator: "\n", omittingEmptySubsequences: false)
    #expect(raw.count == scopes.count)
    if let index = raw.indices.first(where: { $0 < scopes.count && raw[$0] != scopes[$0] }) {
      #expect(raw[index] == scopes[index])
    }
    for breadcrumb in crumbs.prefix(200) {
      var one = JSONWriter()
      breadcrumb.writeJSONThroughScopes(into: &one)
      #expect(breadcrumb.jsonLine() == String(decoding: one.bytes, as: UTF8.self))
    }
  }

  /// RFC 8259 a byte at a time: what the word-at-a-time escaper must match.
  static func reference(_ text: String) -> String {
    var out: [UInt8] = [0x22]
    for byte in text.utf8 {
      switch byte {
      case 0x22: out += Array(#"\""#.utf8)
      case 0x5C: out += Array(#"\\"#.utf8)
      case 0x0A: out += Array(#"\n"#.utf8)
      case 0x0D: out += Array(#"\r"#.utf8)
      case 0x09: out += Array(#"\t"#.utf8)
      case 0..<0x20, 0x7F: out += Array((#"\u00"# + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)).utf8)
      default: out.append(byte)
      }
    }
    out.append(0x22)
    return String(decoding: out, as: UTF8.self)
  }

  @Test func theEscaperMatchesAByteAtATimeReference() {
    var numbers = Numbers(state: 8259)
    var texts = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
    texts.append(String((0..<128).map { Character(UnicodeScalar(UInt8($0))) }))
    for _ in 0..<2_000 { texts.append(Self.text(&numbers)) }
    for text in texts { #expect(jsonQuoted(text) == Self.reference(text), "\(Array(text.utf8))") }
  }
}
