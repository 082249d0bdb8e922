// UnwindMarksDeliveryTests.swift — a frame the crash handler guessed (issue 12 item 5) stays
// marked on the wire: `guessed_frame` in a Backtrace submission's stack, `{guessed}` in OTLP's
// `exception.stacktrace` and `found_by` in its frames.

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

@Suite struct UnwindMarksDeliveryTests {
  #if arch(x86_64)
    @Test func guessedFramesAreMarkedInBacktraceAndOTLPBodies() throws {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        "no-unwind-info", variant: ChildVariant(release: false, backtracer: false), directory: directory)
      #expect(run.signal == SIGSEGV, "\(run.lines)")
      let stored = try #require(try crashReport(leftIn: directory))
      let guessedIndex = try #require(stored.report.frames.firstIndex { $0.guessed })
      let store = try ReportStore(directory: directory.path)

      let backtrace = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
      defer { backtrace.stop() }
      let otlp = try LoopbackHTTPServer(status: 200)
      defer { otlp.stop() }
      let uploader = ReportUploader(
        store: store,
        destinations: [
          BacktraceDestination(endpoint: backtrace.baseURL, token: "t"),
          OTLPDestination(endpoint: otlp.baseURL, encoding: .json),
        ])
      let pass = uploader.deliverPendingNow()
      #expect(pass.finished.map(\.state) == [.sent])

      let request = try #require(backtrace.requests.first)
      let boundary = try #require(request.headers["content-type"]?.components(separatedBy: "boundary=").last)
      let parts = multipartParts(request.body, boundary: boundary)
      let json = try #require(try JSONSerialization.jsonObject(with: Data(parts[0].body)) as? [String: Any])
      let threads = try #require(json["threads"] as? [String: Any])
      let mainThread = try #require(json["mainThread"] as? String)
      let thread = try #require(threads[mainThread] as? [String: Any])
      let stack = try #require(thread["stack"] as? [[String: Any]])
      #expect(stack[guessedIndex]["guessed_frame"] as? Bool == true, "\(stack[guessedIndex])")
      // The schema's field is on every frame: true exactly on the guessed ones.
      #expect(stack[0]["guessed_frame"] as? Bool == false)
      #expect(
        stack.filter { $0["guessed_frame"] as? Bool == true }.count
          == stored.report.frames.filter(\.guessed).count)

      let decoded = try decodeOTLP(try #require(otlp.requests.first).body, json: true)
      let records = try #require(decoded["records"] as? [[String: Any]])
      let attributes = try #require(records.first?["attributes"] as? [String: Any])
      let text = try #require(attributes["exception.stacktrace"] as? String)
      let lines = text.split(separator: "\n")
      #expect(lines[guessedIndex].hasSuffix("{guessed}"), "\(text)")
      #expect(!lines[0].contains("{guessed}"))
    }
  #endif
}
