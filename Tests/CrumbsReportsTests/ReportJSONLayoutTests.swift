// ReportJSONLayoutTests.swift — what a stored report.json looks like (docs/formats.md): one line
// of compact JSON, keys sorted, slashes not escaped; and a pretty-printed report.json an earlier
// version wrote still reads back the same.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import FoundationEssentials
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct ReportJSONLayoutTests {
  @Test func aStoredReportJSONIsCompactWithSortedKeys() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let report = CrashReport.sample()
    let stored = try store.store(report)
    let text = String(decoding: try Syscall.readFile(stored.reportPath), as: UTF8.self)
    // Compact: no newline, no indentation, no space after a colon.
    #expect(!text.contains("\n"))
    #expect(!text.contains(" : "))
    #expect(
      text.hasPrefix(#"{"attachments":[],"attributes":{},"breadcrumbs":{"count":0,"#), "\(text.prefix(80))")
    // Slashes as they are (module paths stay greppable).
    #expect(text.contains(#""path":"/bin/app""#))
    #expect(try ReportStore.decode(Array(text.utf8)) == report)
  }

  @Test func aPrettyPrintedReportJSONFromAnEarlierVersionStillLoads() throws {
    let report = CrashReport.sample()
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let earlier = Array(try encoder.encode(report))
    #expect(earlier.contains(UInt8(ascii: "\n")))
    #expect(try ReportStore.decode(earlier) == report)
  }
}
