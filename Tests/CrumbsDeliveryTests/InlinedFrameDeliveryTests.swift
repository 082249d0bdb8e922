// InlinedFrameDeliveryTests.swift — a real crash inside a function forced inline (issue 37,
// point 6): the report's frames, with file, line, column and the inlined call, go out the same
// in OTLP (`crumbs.frames`, decoded by opentelemetry-proto: the semantic conventions' stable
// `code.function.name`, `code.file.path`, `code.line.number`, `code.column.number`, `inlined`,
// and the lines of source around an app frame's, issue 41) and in a Backtrace submission
// (`funcName`, `sourceCode` with the source lines as `text` from `startLine`, `line`, `column`,
// `inlined`).

import CrumbsDeliveryTestSupport
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct InlinedFrameDeliveryTests {
  @Test func fileLineAndInlinedCallsGoOutInOTLPAndBacktrace() throws {
    // The release child inlines the call; the debug one is the fallback where there is none.
    let release = ChildVariant(release: true, backtracer: false)
    let variant = release.executable != nil ? release : ChildVariant(release: false, backtracer: false)
    guard oracleSymbolizer() != nil else {
      print("skipped: no llvm-symbolizer on PATH, the report has no lines")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario("report-inlined-crash", variant: variant, directory: directory)
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    let stored = try #require(try crashReport(leftIn: directory))
    // As report.json holds them.
    let frames = try storedFrames(ofReportAt: stored.reportPath)
    let withLines = frames.filter { $0.line != nil }
    #expect(withLines.count >= 3, "\(stored.report.exceptionStacktrace)")
    #expect(frames.first?.function?.contains("InlinedWorkload.store") == true)
    if variant.release { #expect(frames.first?.inlined == true, "\(stored.report.exceptionStacktrace)") }

    let backtrace = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { backtrace.stop() }
    let otlp = try LoopbackHTTPServer(status: 200)
    defer { otlp.stop() }
    let uploader = ReportUploader(
      store: try ReportStore(directory: directory.path),
      destinations: [
        BacktraceDestination(endpoint: backtrace.baseURL, token: "t"),
        OTLPDestination(endpoint: otlp.baseURL),
      ])
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])

    // OTLP (protobuf, decoded by the official classes): one entry per report frame, in order.
    let decoded = try decodeOTLP(try #require(otlp.requests.first).body)
    let records = try #require(decoded["records"] as? [[String: Any]])
    let attributes = try #require(records.first?["attributes"] as? [String: Any])
    let sent = try #require(attributes["crumbs.frames"] as? [[String: Any]])
    try #require(sent.count == frames.count)
    for (frame, entry) in zip(frames, sent) {
      #expect(entry["code.function.name"] as? String == frame.function, "\(entry)")
      #expect(entry["code.file.path"] as? String == frame.file, "\(entry)")
      #expect(entry["code.line.number"] as? Int == frame.line, "\(entry)")
      #expect(entry["code.column.number"] as? Int == frame.column, "\(entry)")
      // The deprecated names are not sent besides.
      #expect(entry["code.function"] == nil && entry["code.filepath"] == nil && entry["code.lineno"] == nil)
      #expect(entry["source_lines"] as? [String] == frame.source?.lines, "\(entry)")
      #expect(entry["source_start_line"] as? Int == frame.source?.startLine, "\(entry)")
      #expect((entry["inlined"] as? Bool ?? false) == frame.inlined, "\(entry)")
      #expect(entry["file"] == nil && entry["line"] == nil && entry["function"] == nil, "\(entry)")
    }
    let text = try #require(attributes["exception.stacktrace"] as? String)
    let storeLine = try #require(frames.first?.line)
    #expect(
      text.split(separator: "\n").first?.contains("ReportScenarios.swift:\(storeLine)") == true, "\(text)")

    // Backtrace: the faulting thread's stack, one entry per report frame, in order.
    let request = try #require(backtrace.requests.first)
    let boundary = try #require(request.headers["content-type"]?.components(separatedBy: "boundary=").last)
    let json = try #require(
      try JSONSerialization.jsonObject(with: Data(multipartParts(request.body, boundary: boundary)[0].body))
        as? [String: Any])
    let threads = try #require(json["threads"] as? [String: Any])
    let mainThread = try #require(json["mainThread"] as? String)
    let thread = try #require(threads[mainThread] as? [String: Any])
    let stack = try #require(thread["stack"] as? [[String: Any]])
    let sources = json["sourceCode"] as? [String: [String: Any]] ?? [:]
    try #require(stack.count == frames.count)
    for (frame, entry) in zip(frames, stack) {
      #expect(Set(entry.keys).isSubset(of: BacktraceJSON.frameKeys), "\(entry.keys)")
      #expect(entry["funcName"] as? String == frame.function ?? entry["funcName"] as? String, "\(entry)")
      #expect((entry["sourceCode"] as? String).flatMap { sources[$0]?["path"] as? String } == frame.file)
      // An app frame's lines of source, as Backtrace shows them: `text` from `startLine` on.
      let source = (entry["sourceCode"] as? String).flatMap { sources[$0] }
      #expect(source?["text"] as? String == frame.source?.lines?.joined(separator: "\n"), "\(entry)")
      #expect(source?["startLine"] as? Int == frame.source?.startLine, "\(entry)")
      #expect(entry["line"] as? String == frame.line.map(String.init), "\(entry)")
      #expect(entry["column"] as? String == frame.column.map(String.init), "\(entry)")
      #expect((entry["inlined"] as? Bool ?? false) == frame.inlined, "\(entry)")
    }
    #expect(stack.first?["faulted"] as? Bool == true)
    // The app's frames carry them (the test child's source is on this machine).
    #expect(frames.prefix(2).allSatisfy { $0.source?.lines?.isEmpty == false }, "\(frames)")
  }
}
