// CrumbsTracerDeathTests.swift — spans opened through CrumbsTracer, listed by the next launch:
// a real child (the test child's "tracer-death") holds a server span and a consumer span on two
// threads and dies (a crash inside a third server span, or SIGKILL); the report lists exactly the
// spans of the recorded kinds still open, with the trace and span ids the child printed, the
// attributes kept from the span (url.path, the user), and not the ended or unrecorded ones.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import Crumbs

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct CrumbsTracerDeathTests {
  func report(after mode: String) throws -> (CrashReport, spans: [String: [String]]) {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["tracer-death", directory.path, mode],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    // "span NAME TRACE-ID SPAN-ID", one a held span, in any order, then "held".
    var spans: [String: [String]] = [:]
    while let line = child.readLine(seconds: 120), line != "held" {
      let fields = line.split(separator: " ").map(String.init)
      if fields.count == 4, fields[0] == "span" { spans[fields[1]] = [fields[2], fields[3]] }
    }
    if mode == "kill" {
      #expect(child.readLine(seconds: 120) == "ready")
      child.signal(SIGKILL)
    } else if let line = child.readLine(seconds: 120) {
      let fields = line.split(separator: " ").map(String.init)
      if fields.count == 4 { spans[fields[1]] = [fields[2], fields[3]] }
    }
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == (mode == "kill" ? SIGKILL : SIGSEGV))
    let stored = try #require(try crashReport(leftIn: directory))
    let report = try ReportStore.decode(try Syscall.readFile(stored.reportPath))
    return (report, spans)
  }

  func check(_ report: CrashReport, spans: [String: [String]], names: [String: String]) throws {
    let open = try #require(report.openOperations)
    #expect(open.operations.map(\.name).sorted() == names.values.sorted())
    for (label, name) in names {
      let operation = try #require(open.operations.first { $0.name == name })
      let ids = try #require(spans[label])
      #expect([operation.traceID ?? "", operation.spanID ?? ""] == ids, "\(label)")
      #expect(ids[0].utf8.count == 32 && ids[1].utf8.count == 16)
    }
    let order = try #require(open.operations.first { $0.name == "HTTP GET route not found" })
    #expect(order.kind == "server")
    let attributes = Dictionary(uniqueKeysWithValues: order.attributes.map { ($0.key, $0.value) })
    #expect(
      attributes == ["http.request.method": "GET", "url.path": "/v1/orders/42", "enduser.id": "user-7"])
    #expect(open.operations.first { $0.name == "orders process" }?.kind == "consumer")
  }

  @Test func aCrashListsTheOpenSpansWithTheirIDs() throws {
    let (report, spans) = try report(after: "crash")
    #expect(report.kind == .crash)
    try check(
      report, spans: spans,
      names: ["order": "HTTP GET route not found", "consumer": "orders process", "crash": "POST /v1/crash"])
    let crashing = try #require(report.openOperations?.operations.first { $0.name == "POST /v1/crash" })
    #expect(crashing.onCrashingThread == true)
  }

  @Test func aSIGKILLListsThemToo() throws {
    let (report, spans) = try report(after: "kill")
    #expect(report.kind != .crash)
    try check(
      report, spans: spans, names: ["order": "HTTP GET route not found", "consumer": "orders process"])
  }
}
