// ReleaseHealthTests.swift — release health (issue 25): each session summary carries the ended
// session's own release and resource, whoever delivers it (the next launch of a newer version,
// or `crumbs collect`), and the per-release session counts go out as the OTLP metric
// `crumbs.sessions`, cumulative across launches. Real child processes, a real loopback server,
// everything decoded by the official OTLP classes (decode_otlp.py). Waits are on events (the
// children's exits and lines).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct ReleaseHealthTests {
  /// One launch of `version` in `directory` ending as `action` says (client-release); its session.
  @discardableResult
  func launch(_ version: String, _ directory: String, _ action: String, url: String? = nil) throws -> String {
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-release", version, directory, action] + (url.map { [$0] } ?? []),
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    if action == "deliver" { #expect(child.value(after: "flushed ") != nil) }
    let status = child.wait(seconds: 180)
    if action == "crash" {
      #expect(status & 0x7f == SIGSEGV, "the child died by SIGSEGV (wait status \(status))")
    } else {
      #expect(status == 0, "the child exited 0 (wait status \(status))")
    }
    return session
  }

  /// The session summaries among `requests` (logs), each as (resource, attributes).
  func summaries(_ requests: [CapturedRequest]) throws -> [(
    resource: [String: Any], attributes: [String: Any]
  )] {
    try requests.filter { $0.target.hasSuffix("/v1/logs") }.flatMap { request in
      let decoded = try decodeOTLP(request.body)
      let resource = decoded["resource"] as? [String: Any] ?? [:]
      return (decoded["records"] as? [[String: Any]] ?? []).filter {
        $0["event_name"] as? String == "crumbs.session.summary"
      }.map { (resource, $0["attributes"] as? [String: Any] ?? [:]) }
    }
  }

  /// (a) A 1.0 session crashes; the 1.1 launch delivers: the crashed session's summary (and its
  /// report) say service.version 1.0, and the release counts are 1.0's.
  @Test func theSummaryOfACrashedSessionNamesItsOwnRelease() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let crashed = try launch("1.0", crumbs, "crash")
    let delivering = try launch("1.1", crumbs, "deliver", url: server.baseURL)
    #expect(crashed != delivering)

    let found = try summaries(server.requests).filter { $0.attributes["session.id"] as? String == crashed }
    #expect(found.count == 1, "one summary for the crashed session")
    let summary = try #require(found.first)
    #expect(summary.resource["service.version"] as? String == "1.0")
    #expect(summary.attributes["crumbs.session.end"] as? String == "crash")
    #expect(summary.attributes["crumbs.release.sessions.crashed"] as? Int == 1)
    #expect(summary.attributes["crumbs.release.sessions.clean"] as? Int == 0)
    // The resource is the crashed process's, not the delivering one's.
    #expect(summary.resource["service.instance.id"] as? String == crashed)
    let report = try server.requests.filter { $0.target.hasSuffix("/v1/logs") }.map {
      try decodeOTLP($0.body)
    }
    .first {
      ($0["records"] as? [[String: Any]] ?? []).contains { $0["event_name"] as? String == "device.crash" }
    }
    #expect((report?["resource"] as? [String: Any])?["service.version"] as? String == "1.0")
  }

  /// (a), collector path: `crumbs collect` delivers the summary of a 1.0 session with 1.0, not
  /// with the collector's own resource.
  @Test func theCollectorSendsTheSummaryWithTheSessionsRelease() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let crashed = try launch("1.0", crumbs, "crash")
    let result = try CLIProcess.run(
      ["collect", "--dir", crumbs, "--otlp", server.baseURL], environment: ["OTEL_SERVICE_NAME": "collector"])
    #expect(result.status == 0, "stderr: \(result.stderr)")
    let found = try summaries(server.requests).filter { $0.attributes["session.id"] as? String == crashed }
    #expect(found.count == 1)
    #expect(found.first?.resource["service.version"] as? String == "1.0")
    #expect(found.first?.resource["service.name"] as? String != "collector")
  }

  /// The `crumbs.sessions` points of one metrics request, by (version, end): (value, start time).
  func points(_ request: CapturedRequest) throws -> [String: (value: Int, start: String)] {
    let decoded = try decodeOTLPMetrics(request.body)
    var points: [String: (Int, String)] = [:]
    for resourceMetrics in decoded["resource_metrics"] as? [[String: Any]] ?? [] {
      let resource = resourceMetrics["resource"] as? [String: Any] ?? [:]
      for metric in resourceMetrics["metrics"] as? [[String: Any]] ?? []
      where metric["name"] as? String == "crumbs.sessions" {
        #expect(metric["kind"] as? String == "sum")
        #expect(metric["is_monotonic"] as? Bool == true)
        #expect(metric["aggregation_temporality"] as? Int == 2, "cumulative")
        for point in metric["points"] as? [[String: Any]] ?? [] {
          let attributes = point["attributes"] as? [String: Any] ?? [:]
          let version = attributes["service.version"] as? String ?? "?"
          #expect(resource["service.version"] as? String == version, "each release is its own resource")
          let end = attributes["crumbs.session.end"] as? String ?? "?"
          points[version + "/" + end] = (
            point["as_int"] as? Int ?? -1, point["start_time_unix_nano"] as? String ?? ""
          )
        }
      }
    }
    return points
  }

  /// (b) 2 clean + 1 crashed session under 1.0, delivered by a 1.1 launch (which ends clean), then
  /// a second 1.1 launch: each delivering launch sends `crumbs.sessions` to /v1/metrics with
  /// version and end attributes; the values add up (1.0: clean 2, crashed 1; then 1.1: clean 1)
  /// and stay cumulative: 1.0's series keeps its values and start time in the second request.
  @Test func sessionCountsGoOutAsACumulativeSumPerReleaseAndEnd() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    try launch("1.0", crumbs, "clean")
    try launch("1.0", crumbs, "clean")
    try launch("1.0", crumbs, "crash")
    try launch("1.1", crumbs, "deliver", url: server.baseURL)
    let firstRequests = server.requests.filter { $0.target == "/v1/metrics" }
    #expect(firstRequests.count == 1, "one metrics request for the counts of that launch")
    let first = try points(try #require(firstRequests.last))
    #expect(first["1.0/clean"]?.value == 2)
    #expect(first["1.0/crashed"]?.value == 1)
    #expect(first["1.0/abnormal"]?.value == 0)
    #expect(first["1.0/terminated_by_signal"]?.value == 0)
    #expect(first["1.0/hang"]?.value == 0)
    #expect(first["1.1/clean"] == nil, "no 1.1 session had ended yet")

    try launch("1.1", crumbs, "deliver", url: server.baseURL)
    let allRequests = server.requests.filter { $0.target == "/v1/metrics" }
    #expect(allRequests.count == 2)
    let second = try points(try #require(allRequests.last))
    #expect(second["1.0/clean"]?.value == 2)
    #expect(second["1.0/crashed"]?.value == 1)
    #expect(second["1.1/clean"]?.value == 1)
    #expect(second["1.1/crashed"]?.value == 0)
    // Cumulative: the same series, the same start, values never lower.
    #expect(second["1.0/clean"]?.start == first["1.0/clean"]?.start)
    for (series, point) in first { #expect((second[series]?.value ?? -1) >= point.value, "\(series)") }
    // Each summary went out once.
    let ids = try summaries(server.requests).compactMap { $0.attributes["session.id"] as? String }
    #expect(ids.count == 4)
    #expect(Set(ids).count == ids.count)
  }
}
