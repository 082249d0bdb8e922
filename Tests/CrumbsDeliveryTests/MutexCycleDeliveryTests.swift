// MutexCycleDeliveryTests.swift — the explained Mutex cycle crash (issue 40; the report itself
// is checked in MutexCycleCrashTests) travels as it is stored: over OTLP (decoded by
// opentelemetry-proto) the `crumbs.crash.verdict` attributes and the waiting thread's wait in
// `crumbs.threads`; over Backtrace the same attributes and the thread's `wait`.

import CrumbsDeliveryTestSupport
import CrumbsRecorder
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct MutexCycleDeliveryTests {
  @Test func theVerdictAndTheWaitsGoOutInOTLPAndBacktrace() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "mutex-cycle", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == swiftTrapSignal, "\(run.lines)")
    let stored = try #require(try crashReport(leftIn: directory))
    let report = stored.report
    let crashing = try #require(report.threadID)
    // The other end of the cycle: waiting for the crashing thread's lock, or (now and then) refused
    // too, crashed as well, waiting for nothing.
    let other = try #require(report.threads?.first { !$0.crashed && $0.name?.hasPrefix("mx-") == true })
    let activity = other.wait?.owner == UInt32(crashing) ? other.wait?.activity : nil
    #expect(activity != nil || other.state == .alsoCrashed, "\(other)")

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

    let expected = "\(crashing),\(other.id)"
    let decoded = try decodeOTLP(try #require(otlp.requests.first).body)
    let records = try #require(decoded["records"] as? [[String: Any]])
    let attributes = try #require(records.first?["attributes"] as? [String: Any])
    #expect(attributes["crumbs.crash.verdict"] as? String == "deadlock", "\(attributes)")
    #expect(attributes["crumbs.crash.verdict.threads"] as? String == expected)
    #expect((attributes["crumbs.crash.verdict.sites"] as? String)?.contains(" | ") == true)
    #expect((attributes["exception.message"] as? String)?.hasPrefix("deadlock: ") == true, "\(attributes)")
    let threadsText = try #require(attributes["crumbs.threads"] as? String)
    if let activity { #expect(threadsText.contains("- " + activity), "\(threadsText)") }

    let request = try #require(backtrace.requests.first)
    let boundary = try #require(request.headers["content-type"]?.components(separatedBy: "boundary=").last)
    let json = try #require(
      try JSONSerialization.jsonObject(with: Data(multipartParts(request.body, boundary: boundary)[0].body))
        as? [String: Any])
    let sent = try #require(json["attributes"] as? [String: Any])
    #expect(sent["crumbs.crash.verdict"] as? String == "deadlock", "\(sent)")
    #expect(sent["crumbs.crash.verdict.threads"] as? String == expected)
    let threads = try #require(json["threads"] as? [String: Any])
    let thread = try #require(threads[String(other.id)] as? [String: Any])
    if let activity { #expect(thread["wait"] as? String == activity, "\(thread)") }
  }
}
