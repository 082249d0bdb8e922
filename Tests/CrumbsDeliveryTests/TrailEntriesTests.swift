// TrailEntriesTests.swift — a stored report's trail read back for delivery: today's lines
// (microseconds, truncated_parts) and trails stored by earlier versions (milliseconds, no
// truncated_parts) alike.

import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct TrailEntriesTests {
  @Test func todaysLinesDecodeWithEveryField() throws {
    let crumb = Breadcrumb(
      id: 1 << 48 | 3, threadSequence: 9, threadID: 77, wallTimeNanoseconds: 1_795_320_611_123_456_789,
      monotonicNanoseconds: 0, ticks: 0, level: .error, type: .log, message: "cut",
      attributes: [.init(key: "k", value: "v")], messageTruncated: true, attributesTruncated: true,
      fromSignalHandler: true)
    let entry = try JSONDecoder().decode(TrailEntry.self, from: Data(crumb.jsonLine().utf8))
    #expect(entry.timestamp == "2026-11-22T04:10:11.123456Z")
    #expect(entry.timeUnixNano == 1_795_320_611_123_456_000)
    #expect(entry.id == crumb.id && entry.seq == 9 && entry.thread == 77)
    #expect(entry.level == "error" && entry.type == "log" && entry.message == "cut")
    #expect(entry.attributes == ["k": "v"])
    #expect(entry.truncated == true)
    #expect(entry.truncatedParts == ["message", "attributes"])
    #expect(entry.signalHandler == true)
  }

  @Test func aTrailStoredByAnEarlierVersionStillReads() throws {
    // Fuzz/Corpus/stored-report holds a report folder as an earlier version wrote it.
    let corpus =
      String(#filePath.dropLast("Tests/CrumbsDeliveryTests/TrailEntriesTests.swift".count))
      + "Fuzz/Corpus/stored-report"
    let directory = TestDirectory()
    for (from, to) in [("report.json", "report.json"), ("trail.jsonl.lz4", TrailAttachment.name)] {
      try Syscall.writeFileAtomically(directory.file(to), try Syscall.readFile(corpus + "/" + from))
    }
    let report = try ReportStore.decode(try Syscall.readFile(directory.file("report.json")))
    let stored = StoredReport(report: report, state: .pending, path: directory.path)
    let entries = try stored.trailEntries()
    #expect(entries.count == 40)
    let first = try #require(entries.first)
    #expect(first.timestamp == "2026-11-22T04:10:11.123Z")
    #expect(first.timeUnixNano == 1_795_320_611_123_000_000)
    #expect(first.message == "GET /v1/0" && first.attributes == ["k": "v"] && first.thread == 7)
    #expect(first.truncated == nil && first.truncatedParts == nil && first.signalHandler == nil)

    let old =
      #"{"timestamp":"2026-11-22T04:10:11.123Z","id":5,"seq":1,"thread":7,"level":"fatal","#
      + #""type":"system","message":"m","attributes":{},"truncated":true,"signal_handler":true}"#
    let entry = try JSONDecoder().decode(TrailEntry.self, from: Data(old.utf8))
    #expect(entry.truncated == true && entry.truncatedParts == nil && entry.signalHandler == true)
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
