// TrailEntriesTests.swift — a stored report's trail read back for delivery: today's lines
// (microseconds, truncated_parts) and trails stored by earlier versions (milliseconds, no
// truncated_parts) alike.

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
}
