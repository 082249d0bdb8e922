// TrailReadBackTests.swift — a stored report's trail read back (for delivery and `willSend`) as
// the breadcrumbs it was written from: today's lines (microseconds, truncated_parts) and trails
// stored by earlier versions (milliseconds, no truncated_parts) alike.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct TrailReadBackTests {
  @Test func todaysLinesDecodeWithEveryField() throws {
    let crumb = Breadcrumb(
      id: 1 << 48 | 3, threadSequence: 9, threadID: 77, wallTimeNanoseconds: 1_795_320_611_123_456_789,
      monotonicNanoseconds: 0, ticks: 0, level: .error, type: .log, message: "cut",
      attributes: [.init(key: "k", value: "v")], messageTruncated: true, attributesTruncated: true,
      fromSignalHandler: true)
    let entries = Breadcrumb.trail(jsonLines: Array(crumb.jsonLine().utf8))
    #expect(crumb.jsonLine().contains(#""timestamp":"2026-11-22T04:10:11.123456Z""#))
    // What the line holds comes back; microseconds, and no clock ticks, are what it keeps.
    var expected = crumb
    expected.wallTimeNanoseconds = 1_795_320_611_123_456_000
    #expect(entries == [expected])
    // Written again, it is the same line.
    #expect(entries.first?.jsonLine() == crumb.jsonLine())
  }

  @Test func aTrailStoredByAnEarlierVersionStillReads() throws {
    // Fuzz/Corpus/stored-report holds a report folder as an earlier version wrote it.
    let corpus =
      String(#filePath.dropLast("Tests/CrumbsReportsTests/TrailReadBackTests.swift".count))
      + "Fuzz/Corpus/stored-report"
    let directory = TestDirectory()
    for (from, to) in [("report.json", "report.json"), ("trail.jsonl.lz4", TrailAttachment.name)] {
      try Syscall.writeFileAtomically(directory.file(to), try Syscall.readFile(corpus + "/" + from))
    }
    let report = try ReportStore.decode(try Syscall.readFile(directory.file("report.json")))
    let stored = StoredReport(report: report, state: .pending, path: directory.path)
    let entries = try stored.trailBreadcrumbs()
    #expect(entries.count == 40)
    let first = try #require(entries.first)
    #expect(first.wallTimeNanoseconds == 1_795_320_611_123_000_000)
    #expect(
      first.message == "GET /v1/0" && first.attributes == [.init(key: "k", value: "v")] && first.threadID == 7
    )
    #expect(!first.truncated && !first.fromSignalHandler)

    let old =
      #"{"timestamp":"2026-11-22T04:10:11.123Z","id":5,"seq":1,"thread":7,"level":"fatal","#
      + #""type":"system","message":"m","attributes":{},"truncated":true,"signal_handler":true}"#
    let entry = try #require(Breadcrumb.trail(jsonLines: Array(old.utf8)).first)
    #expect(
      entry.truncated && entry.messageTruncated && !entry.attributesTruncated && entry.fromSignalHandler)
    #expect(entry.level == .fatal && entry.type == .system && entry.id == 5 && entry.threadSequence == 1)
  }

  @Test func aLineThatDoesNotDecodeIsSkippedAndTheRestRead() {
    let good =
      #"{"timestamp":"2026-11-22T04:10:11.123456Z","id":1,"seq":1,"thread":7,"level":"info","#
      + #""type":"http","message":"a","attributes":{"b":"2","a":"1"}}"#
    let unknownLevel = good.replacing(#""info""#, with: #""loud""#)
    let text = [good, unknownLevel, #"{"timestamp":"2026-11-2"#, "", good].joined(separator: "\n")
    let trail = Breadcrumb.trail(jsonLines: Array(text.utf8))
    #expect(trail.count == 2)
    // The attributes, read as an object, come back in key order.
    #expect(trail.first?.attributes.map(\.key) == ["a", "b"])
  }

  @Test func timestampsParseOnlyWithinTheirFieldsAndSixtyFourBits() {
    #expect(ISO8601.nanoseconds("1970-01-01T00:00:00Z") == 0)
    #expect(ISO8601.nanoseconds("2554-07-21T23:34:33.709551615Z") == .max)
    #expect(ISO8601.nanoseconds("2026-11-22T04:10:11.123456789Z") == 1_795_320_611_123_456_789)
    for unusable in [
      "2554-07-21T23:34:33.709551616Z",  // one past UInt64.max
      "2554-07-21T23:34:34Z", "2555-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999999Z",
      "1969-12-31T23:59:59.999999Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-11-32T00:00:00Z",
      "2026-11-22T24:00:00Z", "2026-11-22T04:60:00Z", "2026-11-22T04:10:61Z", "2026-11-22X04:10:11Z",
      "2026/11/22T04:10:11Z", "2026-11-22T04:10:11XZ", "2026-11-22T04:10:11.Z",
      "2026-11-22T04:10:11.1234567890Z",
      "2026-11-22T04:10:11.12a4Z", "2026-11-22T04:10:11", "+026-11-22T04:10:11Z",
    ] {
      #expect(ISO8601.nanoseconds(unusable) == nil, "\(unusable)")
    }
  }
}
