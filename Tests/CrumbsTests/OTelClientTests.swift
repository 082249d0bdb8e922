// OTelClientTests.swift — a client configured by the OTEL_* environment (injected: no
// process-wide variable is changed) delivers to the collector it names, in the way it names,
// with the resource its session recorded; a non-fatal report made in a span carries it.

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct OTelClientTests {
  @Test func theOTelEnvironmentConfiguresDeliveryAndTheResource() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = CrumbsConfiguration(directory: directory.path)
      // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
      // would be true, and one more report than these tests count (HangTests watch children).
      configuration.hangs = nil
      configuration.appVersion = "2.0.0"
      configuration.automaticBreadcrumbs = nil
      configuration.environment = [
        "OTEL_EXPORTER_OTLP_ENDPOINT": server.baseURL + "/",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20t0ken",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_SERVICE_NAME": "checkout",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod,service.name=ignored",
      ]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      #expect(client.problems.contains { $0.hasPrefix("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported") })
      let trace = try #require(
        TraceContext(traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b7ad6b7169203331", flags: 1))
      let stored = try #require(
        client.send(
          message: "card declined",
          attributes: Dictionary(uniqueKeysWithValues: trace.attributes.map { ($0.key, $0.value) })))
      #expect(stored.report.trace == trace)
      _ = client.uploader?.deliverPendingNow()

      // The background thread may have sent it first: look for it among what arrived.
      var found: (CapturedRequest, [String: Any])?
      for request in server.requests {
        let decoded = try decodeOTLP(request.body, gzip: request.headers["content-encoding"] == "gzip")
        if (decoded["records"] as? [[String: Any]])?.first?["event_name"] as? String == "exception" {
          found = (request, decoded)
        }
      }
      let (request, decoded) = try #require(found)
      #expect(request.target == "/v1/logs")
      #expect(request.headers["authorization"] == "Bearer t0ken")
      #expect(request.headers["content-encoding"] == "gzip")
      #expect(request.headers["content-type"] == "application/x-protobuf")
      let resource = try #require(decoded["resource"] as? [String: Any])
      #expect(resource["service.name"] as? String == "checkout")
      #expect(resource["service.version"] as? String == "2.0.0")
      #expect(resource["deployment.environment.name"] as? String == "prod")
      #expect(resource["service.instance.id"] as? String == client.sessionID.description)
      #expect(resource["process.pid"] as? Int == Int(getpid()))
      #expect(resource["process.parent_pid"] as? Int == Int(getppid()))
      #expect((resource["process.executable.build_id.gnu"] as? String)?.count ?? 0 >= 16)
      #expect(resource["os.name"] is String)
      let record = try #require((decoded["records"] as? [[String: Any]])?.first)
      #expect(record["trace_id"] as? String == trace.traceID)
      #expect(record["span_id"] as? String == trace.spanID)
      #expect((record["attributes"] as? [String: Any])?["trace_id"] == nil)
      // Nothing secret was stored.
      let sent = try client.store.load(id: stored.report.id)
      #expect(!(try String(contentsOfFile: sent.path + "/report.json", encoding: .utf8)).contains("t0ken"))
    }
  }

  /// The session file carries the resource the session measured, for its crash report.
  @Test func theSessionRecordsItsResourceWhileItRuns() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = CrumbsConfiguration(directory: directory.path)
      // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
      // would be true, and one more report than these tests count (HangTests watch children).
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.environment = ["OTEL_RESOURCE_ATTRIBUTES": "team=core"]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      let metadata = try SessionMetadata.read(file: RingDirectory.sessionFilePath(forRing: client.ring.path))
      let resource = try #require(metadata.resource)
      #expect(resource["process.parent_pid"] == String(getppid()))
      #expect(resource["team"] == "core")
      #expect(resource["host.arch"] != nil)
      #expect(resource["process.executable.build_id.gnu"]?.isEmpty == false)
    }
  }

  /// A real process whose environment holds the OTEL_* variables (the test's own is untouched):
  /// it delivers to the collector they name, and its crash, read by the next launch, is reported
  /// with the resource its session recorded — its parent, its OTEL_* attributes — and the span
  /// its crashing thread was in.
  @Test func aChildConfiguredByItsEnvironmentDeliversAndItsCrashKeepsItsResource() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-otel-env", directory.path],
      environment: [
        "SWIFT_BACKTRACE": "enable=no",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": server.baseURL + "/custom/logs",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "oops",
        "OTEL_SERVICE_NAME": "checkout",
        "OTEL_RESOURCE_ATTRIBUTES": "team=payments",
      ])
    let lines = child.readLines(until: "crashing", seconds: 120)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV, "\(lines)")
    #expect(lines.contains("sent yes"), "\(lines)")
    #expect(lines.contains { $0.hasPrefix("problem OTEL_EXPORTER_OTLP_TIMEOUT=oops") }, "\(lines)")

    let request = try #require(server.requests.first { $0.target == "/custom/logs" })
    #expect(request.headers["content-type"] == "application/json")
    let sent = try decodeOTLP(request.body, json: true)
    let sentResource = try #require(sent["resource"] as? [String: Any])
    #expect(sentResource["service.name"] as? String == "checkout")
    #expect(sentResource["team"] as? String == "payments")
    #expect(sentResource["process.parent_pid"] as? Int == Int(getpid()))
    #expect(
      (sent["records"] as? [[String: Any]])?.first?["trace_id"] as? String
        == "4bf92f3577b34da6a3ce929d0e0e4736")

    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    let crash = try #require(outcome.reports.first { $0.report.kind == .crash }).report
    #expect(crash.resource["service.name"] == "checkout")
    #expect(crash.resource["team"] == "payments")
    #expect(crash.resource["process.parent_pid"] == String(getpid()))
    #expect(crash.resource["crumbs.resource.measured_at"] == nil)
    #expect(crash.trace?.spanID == "00f067aa0ba902b7")
    #expect(crash.traceBreadcrumb?.message == "handling request")
    let decoded = try decodeOTLP(
      try OTLPDestination(endpoint: server.baseURL).request(
        for: crash, stored: try #require(outcome.reports.first { $0.report.kind == .crash })
      ).body)
    let resource = try #require(decoded["resource"] as? [String: Any])
    #expect(resource["service.instance.id"] as? String == crash.sessionID)
    #expect(resource["service.instance.id"] as? String == sentResource["service.instance.id"] as? String)
    #expect(resource["process.parent_pid"] as? Int == Int(getpid()))
  }
}
