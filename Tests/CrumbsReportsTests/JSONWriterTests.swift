// JSONWriterTests.swift — the one JSON writer: scopes place every comma and bracket, strings are
// escaped once and per RFC 8259, numbers and timestamps are exact, and what it writes is JSON
// that Foundation's parser reads back to the same values.

import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct JSONWriterTests {
  func text(_ write: (inout JSONWriter) -> Void) -> String {
    var json = JSONWriter()
    write(&json)
    return String(decoding: json.bytes, as: UTF8.self)
  }

  func string(_ value: String) -> String { text { $0.value(value) } }

  // MARK: Scopes

  @Test func emptyContainers() {
    #expect(text { $0.object { _ in } } == "{}")
    #expect(text { $0.array { _ in } } == "[]")
    #expect(
      text {
        $0.object {
          $0.object("o") { _ in }; $0.array("a") { _ in }
        }
      } == #"{"o":{},"a":[]}"#)
    #expect(
      text {
        $0.array {
          $0.object { _ in }; $0.array { _ in }
        }
      } == "[{},[]]")
  }

  @Test func fieldsAndElementsAreSeparatedByCommasInTheOrderWritten() {
    let json = text { json in
      json.object { object in
        object.field("z", "last letter")
        object.field("a", 1)
        object.field("yes", true)
        object.field("no", false)
        object.array("list") { list in
          list.append("x")
          list.append(-2)
          list.append(false)
          list.append(0.5)
        }
      }
    }
    #expect(json == #"{"z":"last letter","a":1,"yes":true,"no":false,"list":["x",-2,false,0.5]}"#)
  }

  @Test func nestingKeepsEachScopesOwnSeparators() throws {
    let json = text { json in
      json.object { outer in
        outer.field("before", 1)
        outer.object("inner") { inner in
          inner.array("deep") { deep in
            deep.array { _ in }
            deep.object { $0.field("k", "v") }
            deep.array {
              $0.append(1); $0.append(2)
            }
          }
          inner.field("after", 2)
        }
        outer.field("last", 3)
      }
    }
    #expect(json == #"{"before":1,"inner":{"deep":[[],{"k":"v"},[1,2]],"after":2},"last":3}"#)
    let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    #expect(parsed["last"] as? Int == 3)
  }

  @Test func topLevelValuesFollowEachOtherAsJSONLines() {
    let json = text { json in
      for index in 0..<3 {
        json.object { $0.field("n", index) }
        json.newline()
      }
    }
    #expect(json == "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n")
  }

  @Test func aDeepTreeOfScopesCostsNoCopyOfTheBuffer() {
    // 10,000 nested arrays: each scope moves the buffer in and out, so this is linear.
    var json = JSONWriter()
    func nest(_ array: inout JSONArray, depth: Int) {
      guard depth > 0 else { return array.append(depth) }
      array.array { nest(&$0, depth: depth - 1) }
    }
    json.array { nest(&$0, depth: 10_000) }
    #expect(json.bytes.count == 2 * 10_001 + 1)
  }

  // MARK: Strings

  @Test func quotesBackslashesAndControlCharactersAreEscaped() {
    #expect(string("plain") == #""plain""#)
    #expect(string(#"say "hi""#) == #""say \"hi\"""#)
    #expect(string(#"C:\dir"#) == #""C:\\dir""#)
    #expect(string("a\nb\rc\td") == #""a\nb\rc\td""#)
    #expect(string("\u{0}\u{1}\u{8}\u{C}\u{1F}\u{7F}") == #""\u0000\u0001\u0008\u000c\u001f\u007f""#)
    #expect(string("/") == #""/""#)
    #expect(string("") == #""""#)
    // Keys go through the same escaping.
    #expect(text { $0.object { $0.field("k\"\n", 1) } } == #"{"k\"\n":1}"#)
  }

  @Test func everyControlCharacterRoundTripsThroughAJSONParser() throws {
    let all = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
    let json = text { $0.array { $0.append(all) } }
    #expect(!json.utf8.contains { $0 < 0x20 })
    let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String])
    #expect(parsed == [all])
  }

  @Test func nonASCIIIsWrittenAsUTF8AndInvalidUTF8ArrivesAsReplacementCharacters() throws {
    #expect(Array(string("é€🙂").utf8) == [0x22] + Array("é€🙂".utf8) + [0x22])
    // A Swift String cannot hold invalid UTF-8: bytes read from a ring become U+FFFD when the
    // String is made, so what the writer gets, and writes, is valid.
    let damaged = String(
      decoding: [0x61, 0xFF, 0xC3, 0x28, 0xED, 0xA0, 0x80, 0x62] as [UInt8], as: UTF8.self)
    let json = string(damaged)
    #expect(json.unicodeScalars.filter { $0 == "\u{FFFD}" }.count >= 3)
    #expect(String(validating: Array(json.utf8), as: UTF8.self) != nil)
    let parsed = try #require(try JSONSerialization.jsonObject(with: Data("[\(json)]".utf8)) as? [String])
    #expect(parsed == [damaged])
  }

  @Test func jsonQuotedIsTheSameEscaping() {
    #expect(jsonQuoted("a\"b\\c\u{1}") == string("a\"b\\c\u{1}"))
  }

  // MARK: Numbers

  @Test func integersAtTheirLimits() {
    let json = text { json in
      json.array { array in
        array.append(0)
        array.append(UInt64.max)
        array.append(Int64.min)
        array.append(Int64.max)
        array.append(Int32.min)
        array.append(UInt8(7))
      }
    }
    #expect(json == "[0,18446744073709551615,-9223372036854775808,9223372036854775807,-2147483648,7]")
  }

  @Test func doublesAreJSONNumbersAndNonFiniteOnesNull() throws {
    let values: [Double] = [
      0, -0.0, 1, 0.1, -2.5, 1e-7, 1.7976931348623157e308, Double.leastNonzeroMagnitude,
    ]
    let json = text { json in json.array { array in for value in values { array.append(value) } } }
    let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [Double])
    #expect(parsed == values)
    #expect(
      text {
        $0.array {
          $0.append(Double.nan); $0.append(Double.infinity); $0.append(-Double.infinity)
        }
      } == "[null,null,null]")
  }

  // MARK: Timestamps

  @Test func timestampsAreUTCWithTheAskedFractionDigits() {
    let nanoseconds: UInt64 = 1_795_320_611_123_456_789  // 2026-11-22T04:10:11.123456789Z
    func stamp(_ digits: Int, _ value: UInt64 = nanoseconds) -> String {
      text { json in json.object { $0.field("t", timestamp: value, fractionDigits: digits) } }
    }
    #expect(stamp(0) == #"{"t":"2026-11-22T04:10:11Z"}"#)
    #expect(stamp(3) == #"{"t":"2026-11-22T04:10:11.123Z"}"#)
    #expect(stamp(6) == #"{"t":"2026-11-22T04:10:11.123456Z"}"#)
    #expect(stamp(9) == #"{"t":"2026-11-22T04:10:11.123456789Z"}"#)
    #expect(stamp(6, 0) == #"{"t":"1970-01-01T00:00:00.000000Z"}"#)
    // The cached second is replaced when the second changes, in either direction.
    let json = text { json in
      json.array { array in
        for value in [nanoseconds, nanoseconds + 1_000_000_000, nanoseconds - 60_000_000_000] {
          array.object { $0.field("t", timestamp: value, fractionDigits: 3) }
        }
      }
    }
    #expect(
      json
        == #"[{"t":"2026-11-22T04:10:11.123Z"},{"t":"2026-11-22T04:10:12.123Z"},{"t":"2026-11-22T04:09:11.123Z"}]"#
    )
  }
}
