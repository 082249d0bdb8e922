// FuzzTrailEntries — libFuzzer target for a stored report's trail read back for delivery: JSON
// Lines → Breadcrumb (Breadcrumb.trail), each timestamp → nanoseconds (ISO8601.nanoseconds),
// and what the destinations make of the entries (Backtrace's breadcrumb file, OTLP breadcrumb
// records). Report folders are untrusted: a torn write, a hand edit, another version.
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (today's lines, an older version's, far
//                         future and damaged timestamps); in a -sanitize=fuzzer build
//                         crumbs_fuzz_run drives fuzzOneInput; in a normal build, files given
//                         are replayed
//   fuzzOneInput          the bytes through each parser; each must return, never trap, and a
//                         parsed time must come back from its own formatting unchanged
// Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsDelivery
import CrumbsRecorder
import CrumbsReports
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// A parsed time, formatted with nine digits and parsed again, is itself.
func checkRoundTrip(_ text: String) {
  guard let nanoseconds = ISO8601.nanoseconds(text) else { return }
  checkRoundTrip(nanoseconds, text)
}

func checkRoundTrip(_ nanoseconds: UInt64, _ text: String) {
  let again = ISO8601.nanoseconds(ISO8601.string(nanoseconds: nanoseconds, fractionDigits: 9))
  if again != nanoseconds {
    fatalError("\(text.debugDescription) → \(nanoseconds) → \(String(describing: again))")
  }
}

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  // Each line as a bare timestamp too: mutations reach the date parser without JSON around it.
  for line in bytes.split(separator: UInt8(ascii: "\n")) {
    checkRoundTrip(String(decoding: line, as: UTF8.self))
  }
  let entries = Breadcrumb.trail(jsonLines: bytes)
  for entry in entries where entry.wallTimeNanoseconds != 0 {
    checkRoundTrip(entry.wallTimeNanoseconds, "a line's timestamp")
  }
  _ = BacktraceDestination.breadcrumbsFile(entries)
  let report = CrashReportSample.report
  _ = OTLPLogBatch(
    resource: [], scopeName: "crumbs", scopeVersion: "0",
    records: entries.map { OTLPDestination.breadcrumbRecord($0, report: report) }
  ).protobuf()
  return 0
}

/// A report for the records to refer to (only its ids and times are read).
enum CrashReportSample {
  static let report: CrashReport = {
    let json = """
      {"report.id":"6acdbf4e-718a-40c4-b194-12e38ae64caf","kind":"crash","exception.type":"SIGSEGV",\
      "exception.message":"m","exception.stacktrace":"","session.id":"6acdbf4e-718a-40c4-b194-12e38ae64caf",\
      "time_unix_nano":1,"time":"1970-01-01T00:00:00.000Z","observed_time_unix_nano":2,\
      "observed_time":"1970-01-01T00:00:00.000Z","registers":[],"frames":[],"modules":[],"resource":{},\
      "attributes":{},"breadcrumbs":{"count":0,"valid":0,"torn":0,"overwritten":0,"empty":0,\
      "timesCalibrated":true},"attachments":[],"damage":[],"evidence":[]}
      """
    return try! ReportStore.decode(Array(json.utf8))
  }()
}

func line(_ timestamp: String, id: Int = 1, extra: String = "") -> String {
  "{\"timestamp\":\"\(timestamp)\",\"id\":\(id),\"seq\":\(id),\"thread\":7,\"level\":\"info\","
    + "\"type\":\"http\",\"message\":\"GET /v1/\(id)\",\"attributes\":{\"k\":\"v\"}\(extra)}\n"
}

func makeSeeds(in directory: String) throws -> Int {
  let seeds: [(String, String)] = [
    ("today", line("2026-11-22T04:10:11.123456Z") + line("2026-11-22T04:10:12.000001Z", id: 2)),
    (
      "today-truncated-signal",
      line(
        "2026-11-22T04:10:11.123456Z",
        extra: ",\"truncated\":true,\"truncated_parts\":[\"message\"],\"signal_handler\":true")
    ),
    ("older-milliseconds", line("2026-11-22T04:10:11.123Z", extra: ",\"truncated\":true")),
    ("epoch", line("1970-01-01T00:00:00Z")),
    ("last-nanosecond", line("2554-07-21T23:34:33.709551615Z")),
    ("far-future", line("2555-01-01T00:00:00.000000Z") + line("9999-12-31T23:59:59.999999999Z", id: 2)),
    ("before-epoch", line("1969-12-31T23:59:59.999999Z")),
    ("out-of-range-fields", line("2026-13-32T25:61:61.000000Z")),
    ("damaged-line", line("2026-11-22T04:10:11.123456Z") + "{\"timestamp\":\"2026-11-2\n"),
    ("bare-timestamps", "2026-11-22T04:10:11.123456789Z\n2554-07-21T23:34:33.709551616Z\n"),
  ]
  return try FuzzMain.writeSeeds(seeds, in: directory)
}

FuzzMain.run(
  name: "FuzzTrailEntries", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    let entries = Breadcrumb.trail(jsonLines: bytes)
    return "\(entries.count) entries, times \(entries.map(\.wallTimeNanoseconds))"
  })
