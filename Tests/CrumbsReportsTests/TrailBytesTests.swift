// TrailBytesTests.swift — the trail a report stores is byte for byte what it was before the
// ring reader kept text as bytes (BreadcrumbSlots, issue 26): a wrapped ring holding every
// field kind (every level and type, escapes, unicode, invalid UTF-8 repaired, a message and
// attributes cut to fit, too many attributes, the signal-handler flag, and text the default
// redaction rules change: pairs, quoted values, an authorization scheme, a cookie header, home
// directories, a key already `[redacted]`, keys that move between places) read, redacted and
// encoded as JSON Lines on its bytes, against the trail the code before it made of the same file.
//
// Tests/Fixtures/trail-every-kind.ring was written by `writeTheFixtureRing` (run with
// CRUMBS_WRITE_TRAIL_FIXTURE=DIR; the process ends without closing the ring, as a killed app's
// does). Tests/Fixtures/trail-every-kind.jsonl is the trail `crumbs collect --dir DIR` of main at
// badf68b (Strings, before BreadcrumbSlots) stored for it, decompressed with `lz4 -d`.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Synchronization
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct TrailBytesTests {
  static let ring = ConsumerPackage.packageRoot + "/Tests/Fixtures/trail-every-kind.ring"
  static let trail = ConsumerPackage.packageRoot + "/Tests/Fixtures/trail-every-kind.jsonl"

  @Test func theTrailOfEveryFieldKindIsTheBytesItWasBefore() throws {
    let expected = try Syscall.readFile(Self.trail)
    let contents = try RingReader.read(file: Self.ring)
    #expect(contents.counts.valid > 0)
    #expect(contents.counts.overwritten > 0, "a wrapped ring")
    // The report path: redaction and JSON Lines on the bytes read.
    let redacted = Redaction().redactor().contents(contents)
    let lines = TrailAttachment.jsonLines(redacted.slots)
    #expect(lines.count == expected.count)
    #expect(lines == expected, "first difference at byte \(zip(lines, expected).prefix { $0 == $1 }.count)")
    // The public path over Breadcrumbs gives the same bytes.
    #expect(TrailAttachment.jsonLines(Redaction().redacting(contents.breadcrumbs)) == expected)
    // And Breadcrumbs made from the bytes are the Strings they were: read back, encoded again.
    #expect(TrailAttachment.jsonLines(redacted.breadcrumbs) == expected)
  }

  /// Writes the fixture ring into $CRUMBS_WRITE_TRAIL_FIXTURE (a Crumbs directory) and leaves it
  /// open: see the file's comment.
  @Test(.enabled(if: getenv("CRUMBS_WRITE_TRAIL_FIXTURE") != nil))
  func writeTheFixtureRing() throws {
    let directory = String(cString: getenv("CRUMBS_WRITE_TRAIL_FIXTURE"))
    var options = RingOptions()
    options.slotCount = 128
    options.appName = "trail-fixture"
    let ring = try RingDirectory(path: directory).createRing(options: options)
    let levels = BreadcrumbLevel.allCases
    let types = BreadcrumbType.allCases
    let messages = [
      "GET /api/v1/orders/12 answered 200 in 12 ms (cache miss)",
      "short",
      "",
      "login token=abc123&next=/home/alice/app done",
      #"payload {"password": "hunter 2", "user": "bob"}"#,
      #"escaped {\"secret\":\"s3\"} inside"#,
      "Authorization: Bearer eyJhbGciOi.x.y and more",
      "cookie: a=1; b=2\nnext line",
      "paths /home/alice/x /Users/bob/y /root /root/z /data/home/carol ~/w",
      "Swift.Array::index :: not a pair: value",
      "quote \" backslash \\ tab \t cr \r nl \n ctl \u{1} del \u{7F}",
      "unicode é 日本語 😀 \u{FFFD}",
      String(repeating: "long message that will not fit its slot ", count: 12),
      String(repeating: "é", count: 200),
      "api-key: k1, API_KEY=k2; passwd='p w'",
    ]
    let attributeSets: [[(String, String)]] = [
      [],
      [("method", "GET"), ("status", "200"), ("n", "7")],
      [("password", "p1"), ("user", "alice")],
      [("user", "alice"), ("password", "p2")],
      [("password", "[redacted]"), ("note", "token: t9")],
      [("Set-Cookie", "id=1"), ("path", "/home/alice/.config")],
      [("emoji", "😀"), ("quote", "\"q\""), ("ctl", "\u{2}")],
      (0..<20).map { ("key\($0)", "value \($0)") },
      [("long", String(repeating: "v", count: 300))],
    ]
    for index in 0..<3 * options.slotCount {
      let attributes = attributeSets[index % attributeSets.count]
      ring.append(
        messages[index % messages.count], level: levels[index % levels.count],
        type: types[index % types.count],
        attributes: BreadcrumbAttributes(attributes.map { (key: $0.0, value: $0.1) }))
      if index % 17 == 0 {
        // Invalid UTF-8 (repaired on reading) and the signal handler's flag, through the C entry.
        let message: [UInt8] = Array("bad \(index) ".utf8) + [0xFF, 0xFE, 0x41, 0xC3]
        let key = Array("raw".utf8)
        let value: [UInt8] = [0x80, 0x62]
        message.withUnsafeBufferPointer { message in
          key.withUnsafeBufferPointer { key in
            value.withUnsafeBufferPointer { value in
              var attribute = crumbs_utf8_attribute(
                key: UnsafeRawPointer(key.baseAddress!).assumingMemoryBound(to: CChar.self),
                key_length: key.count,
                value: UnsafeRawPointer(value.baseAddress!).assumingMemoryBound(to: CChar.self),
                value_length: value.count)
              _ = crumbs_ring_add_utf8(
                ring.handle, BreadcrumbLevel.error.rawValue, BreadcrumbType.system.rawValue,
                UInt8(CRUMBS_SLOT_FROM_SIGNAL_HANDLER),
                UnsafeRawPointer(message.baseAddress!).assumingMemoryBound(to: CChar.self), message.count,
                &attribute, 1)
            }
          }
        }
      }
    }
    // Never closed (closing marks it clean): the process ends with it running, as a killed app's.
    Self.keptOpen.withLock { $0 = ring }
    print("fixture ring: \(ring.path)")
  }

  static let keptOpen = Mutex<BreadcrumbRing?>(nil)
}
