// AppendPathTests.swift — the Swift append reads each string's UTF-8 from its bits (StringBits),
// falls back to a slow path for anything else, and hands lengths to the C entry. These tests pin
// the bits against the standard library's own view of every kind of string, check that both paths
// write the same breadcrumb, and that the C entry takes lengths, not NUL terminators.

import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct StringBitsTests {
  /// Strings of every form the append meets: small (ASCII, not ASCII, empty, 15 bytes), literal
  /// (immortal), native (interpolated, repeated, decoded, grown), and ones derived from others.
  static var strings: [String] {
    let number = Int(getpid())
    var grown = "abc"
    grown.reserveCapacity(100)  // a native string too short to be small
    var appended = String(repeating: "x", count: 20)
    appended += "é"
    return [
      "", "a", "GET", "200", "fifteen bytes!!", "é", "日本", "sixteen bytes!!!",
      "GET /api/v1/orders/8c2f41e0 answered 200 in 12 ms (cache miss)",
      "order \(number) shipped by carrier dhl today", String(number), "\(number)",
      String(repeating: "ab", count: 40),
      String(decoding: Array("decoded from bytes, long enough".utf8), as: UTF8.self),
      grown, appended, String("a substring of a longer string".dropFirst(2)),
      String("tiny".prefix(2)), "😀 emoji and more than fifteen bytes",
    ]
  }

  @Test func theBitsLocateTheSameUTF8TheStandardLibrarySees() {
    for string in Self.strings {
      var bits = StringBits(string)
      #expect(bits.isDecodable, "\(string.debugDescription)")
      let decoded = withUnsafePointer(to: &bits) { pointer -> [UInt8] in
        var decodable = true
        let utf8 = pointer.utf8(&decodable)
        #expect(decodable)
        return Array(UnsafeRawBufferPointer(start: utf8.bytes, count: utf8.count))
      }
      #expect(decoded == Array(string.utf8), "\(string.debugDescription)")
      withExtendedLifetime(string) {}
    }
  }

  @Test func theEmptyBitsAreTheEmptyString() {
    var bits = StringBits()
    #expect(bits.countAndFlags == StringBits("").countAndFlags && bits.object == StringBits("").object)
    withUnsafePointer(to: &bits) { pointer in
      var decodable = true
      #expect(pointer.utf8(&decodable).count == 0)
      #expect(decodable)
    }
  }

  /// The inline path (literals of up to `inlineCount` pairs), the slow path (more pairs, or a
  /// string the bits do not locate, driven directly here) and the portable path write the same
  /// breadcrumb, for every kind of string.
  @Test func everyPathWritesTheSameBreadcrumb() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("paths.ring"))
    let strings = Self.strings
    for (index, message) in strings.enumerated() {
      let key = strings[(index + 3) % strings.count].isEmpty ? "k" : "key\(index)"
      let value = strings[(index + 5) % strings.count]
      ring.append(message, level: .warning, type: .user, attributes: [key: value, "fixed": "literal"])
      appendBreadcrumbSlowly(
        to: UnsafePointer(ring.handle), message: message, level: .warning, type: .user,
        attributes: [(key, value), ("fixed", "literal")])
      appendPortably(
        to: UnsafePointer(ring.handle), strings: [message, key, value, "fixed", "literal"], level: .warning,
        type: .user)
    }
    let crumbs = ring.snapshot().breadcrumbs
    #expect(crumbs.count == 3 * strings.count)
    for index in stride(from: 0, to: crumbs.count - 2, by: 3) {
      let expected = crumbs[index]
      #expect(expected.message == strings[index / 3])
      #expect(expected.attributes.count == 2)
      for other in [crumbs[index + 1], crumbs[index + 2]] {
        #expect(other.message == expected.message)
        #expect(other.attributes == expected.attributes)
        #expect(other.level == .warning && other.type == .user && !other.truncated)
      }
    }
  }

  /// Values made inside the literal are temporaries: they must live until the append is done.
  @Test func temporariesInTheLiteralAreReadBeforeTheyAreReleased() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("temporaries.ring"))
    for round in 0..<200 {
      ring.append(
        "round \(round) of a message long enough to live on the heap", type: .user,
        attributes: [
          "id": "\(round)-\(String(repeating: "z", count: 40))", "round": String(round),
          "constant": "value",
        ])
    }
    let crumbs = ring.snapshot().breadcrumbs
    #expect(crumbs.count == 200)
    for (round, crumb) in crumbs.enumerated() {
      #expect(crumb.message == "round \(round) of a message long enough to live on the heap")
      #expect(
        crumb.attributes == [
          .init(key: "id", value: "\(round)-\(String(repeating: "z", count: 40))"),
          .init(key: "round", value: String(round)), .init(key: "constant", value: "value"),
        ])
    }
  }

  /// Up to `inlineCount` pairs take the inline path; one more takes the slow one; both keep order.
  @Test func pairsAroundTheInlineCountKeepTheirOrder() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotSize = 1024
    let ring = try BreadcrumbRing.create(at: directory.file("pairs.ring"), options: options)
    let value = String(getpid())
    ring.append(
      "eight",
      attributes: ["a": "1", "b": value, "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": value])
    ring.append(
      "nine",
      attributes: [
        "a": "1", "b": value, "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": value,
      ])
    ring.append("from a sequence", attributes: BreadcrumbAttributes(["x": "1", "y": value] as KeyValuePairs))
    let crumbs = ring.snapshot().breadcrumbs
    #expect(BreadcrumbAttributes.inlineCount == 8)
    #expect(crumbs.map(\.attributes.count) == [8, 9, 2])
    #expect(crumbs[0].attributes.map(\.key) == ["a", "b", "c", "d", "e", "f", "g", "h"])
    #expect(crumbs[1].attributes.map(\.key) == ["a", "b", "c", "d", "e", "f", "g", "h", "i"])
    #expect(crumbs[1].attributes.last?.value == value)
    #expect(crumbs[2].attributes.map(\.value) == ["1", value])
  }

  /// Calls with up to two pairs take tuples sized for two, calls with three to `inlineCount` the
  /// eight-pair ones: each count on either side writes its pairs, in order, small and heap values.
  @Test func eachShapeOfTheInlinePathWritesItsPairs() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("shapes.ring"))
    let small = String(getpid())
    let large = "a value built at run time, \(small), too long to be small"
    ring.append("none \(small)")
    ring.append("one", attributes: ["a": large])
    ring.append("two \(large)", attributes: ["a": small, "b": large])
    ring.append("three", attributes: ["a": small, "b": large, "c": "3"])
    let crumbs = ring.snapshot().breadcrumbs
    try #require(crumbs.count == 4)
    #expect(crumbs.map(\.message) == ["none \(small)", "one", "two \(large)", "three"])
    #expect(crumbs[0].attributes.isEmpty)
    #expect(crumbs[1].attributes == [.init(key: "a", value: large)])
    #expect(crumbs[2].attributes == [.init(key: "a", value: small), .init(key: "b", value: large)])
    #expect(
      crumbs[3].attributes == [
        .init(key: "a", value: small), .init(key: "b", value: large), .init(key: "c", value: "3"),
      ])
    #expect(crumbs.allSatisfy { !$0.truncated })
  }
}

@Suite(.serialized) struct CEntryWithLengthsTests {
  /// crumbs_ring_add_utf8 and crumbs_add_breadcrumb_utf8 read exactly the given lengths: strings
  /// that are slices of one buffer with no NUL between them come back whole and separate.
  @Test func lengthsNotTerminatorsDelimitTheStrings() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("lengths.ring"))
    let buffer = Array("message that goes on|methodGETstatus201".utf8)
    try ProcessWideState.exclusive {
      ring.install()
      defer { crumbs_ring_uninstall_if(ring.handle) }
      buffer.withUnsafeBufferPointer { bytes in
        let base = UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self)
        var attributes = [
          crumbs_utf8_attribute(key: base + 21, key_length: 6, value: base + 27, value_length: 3),
          crumbs_utf8_attribute(key: base + 30, key_length: 6, value: base + 36, value_length: 3),
        ]
        #expect(crumbs_ring_add_utf8(ring.handle, 2, 3, 0, base, 20, &attributes, 2))
        attributes.withUnsafeBufferPointer {
          #expect(crumbs_add_breadcrumb_utf8(1, 0, base, 7, $0.baseAddress! + 1, 1))
        }
        // NULL reads as empty, whatever length comes with it.
        var empty = [crumbs_utf8_attribute(key: nil, key_length: 5, value: nil, value_length: 9)]
        #expect(crumbs_add_breadcrumb_utf8(1, 0, nil, 12, &empty, 1))
      }
      let crumbs = ring.snapshot().breadcrumbs
      try #require(crumbs.count == 3)
      #expect(crumbs[0].message == "message that goes on")
      #expect(
        crumbs[0].attributes == [.init(key: "method", value: "GET"), .init(key: "status", value: "201")])
      #expect(crumbs[0].level == .warning && crumbs[0].type == .http)
      #expect(crumbs[1].message == "message")
      #expect(crumbs[1].attributes == [.init(key: "status", value: "201")])
      #expect(crumbs[2].message == "" && crumbs[2].attributes == [.init(key: "", value: "")])
      #expect(crumbs.allSatisfy { !$0.truncated })
    }
  }

  /// A closed ring's handle takes nothing, through any entry.
  @Test func aClosedHandleTakesNothing() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("closed.ring"))
    ring.append("before")
    ring.close(clean: false)
    ring.append("after", attributes: ["k": "v"])
    #expect(!crumbs_ring_add_utf8(ring.handle, 1, 0, 0, "x", 1, nil, 0))
    let contents = try RingReader.read(file: directory.file("closed.ring"))
    #expect(contents.breadcrumbs.map(\.message) == ["before"])
  }
}
