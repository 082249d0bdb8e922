// OTLPSpecTests.swift — what is sent, checked against the OTLP specification and the semantic
// conventions: attribute types and names (decoded with the official opentelemetry-proto classes),
// the resource, the trace fields, no deprecated `event.name`; and the transport rules: which
// answers are retried, Retry-After on 503, partial success reaching the delegate, the User-Agent,
// gzip and the request size cap — each against a real loopback server.

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct OTLPSpecTests {
  static let trace = TraceContext(
    traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", flags: 1)!

  /// The fixture's report, as a crash of a session that recorded its resource.
  func crashReport(_ fixture: ReportFixture) -> CrashReport {
    var report = fixture.reports[0].report
    report.kind = .crash
    report.resource["process.parent_pid"] = "4242"
    report.resource["crumbs.process.uptime_ms"] = "1234"
    report.resource["crumbs.host.memory.free_bytes_at_crash"] = "5678"
    report.resource["crumbs.host.memory.total_bytes"] = "1048576"
    report.trace = Self.trace
    return report
  }

  @Test(arguments: [OTLPDestination.Encoding.protobuf, .json])
  func attributesAreTypedAndNamedAsTheRegistrySays(encoding: OTLPDestination.Encoding) throws {
    let fixture = try ReportFixture()
    let report = crashReport(fixture)
    let destination = OTLPDestination(
      endpoint: "http://127.0.0.1:1", encoding: encoding, breadcrumbsAsLogRecords: true)
    let request = try destination.request(for: report, stored: fixture.reports[0])
    let decoded = try decodeOTLP(request.body, json: encoding == .json)
    let resource = try #require(decoded["resource"] as? [String: Any])
    #expect(resource["process.pid"] as? Int == Int(report.resource["process.pid"]!))
    #expect(resource["process.parent_pid"] as? Int == 4242)
    #expect(resource["crumbs.host.memory.total_bytes"] as? Int == 1_048_576)
    #expect(resource["service.instance.id"] as? String == report.sessionID)
    #expect(resource["process.runtime.name"] as? String == "swift")
    #expect(resource["process.runtime.version"] as? String == ProcessAttributes.swiftVersion)
    // Invented keys live under crumbs.*; nothing measured at the crash is on the resource.
    for key in resource.keys {
      #expect(
        !["host.memory", "os.kernel", "process.uptime"].contains { key.hasPrefix($0) },
        "invented key \(key) in an OTel namespace")
    }
    #expect(resource["crumbs.process.uptime_ms"] == nil)
    #expect(resource["crumbs.host.memory.free_bytes_at_crash"] == nil)

    let records = try #require(decoded["records"] as? [[String: Any]])
    #expect(records.count > 1)
    let crash = try #require(records.first)
    let attributes = try #require(crash["attributes"] as? [String: Any])
    #expect(crash["event_name"] as? String == "device.crash")
    #expect(attributes["crumbs.process.uptime_ms"] as? Int == 1234)
    #expect(attributes["crumbs.host.memory.free_bytes_at_crash"] as? Int == 5678)
    #expect(attributes["thread.id"] == nil || attributes["thread.id"] is Int)
    // The crash record's trace is the report's.
    #expect(crash["trace_id"] as? String == Self.trace.traceID)
    #expect(crash["span_id"] as? String == Self.trace.spanID)
    #expect(crash["flags"] as? Int == 1)
    for record in records {
      let attributes = try #require(record["attributes"] as? [String: Any])
      #expect(attributes["event.name"] == nil, "the deprecated event.name attribute is sent")
      #expect((record["event_name"] as? String)?.isEmpty == false)
    }
  }

  @Test(arguments: [OTLPDestination.Encoding.protobuf, .json])
  func nonFatalReportsAreExceptionEventsInTheirSpan(encoding: OTLPDestination.Encoding) throws {
    let fixture = try ReportFixture()
    var report = fixture.reports[0].report
    report.kind = .nonFatal
    report.trace = Self.trace
    report.attributes["app.key"] = "value"
    let destination = OTLPDestination(endpoint: "http://127.0.0.1:1", encoding: encoding)
    let decoded = try decodeOTLP(
      try destination.request(for: report, stored: fixture.reports[0]).body, json: encoding == .json)
    let record = try #require((decoded["records"] as? [[String: Any]])?.first)
    let attributes = try #require(record["attributes"] as? [String: Any])
    #expect(record["event_name"] as? String == "exception")
    #expect(record["severity_number"] as? Int == 17)
    #expect(attributes["exception.type"] as? String == report.exceptionType)
    #expect(attributes["exception.message"] as? String == report.exceptionMessage)
    #expect(attributes["app.key"] as? String == "value")
    #expect(record["trace_id"] as? String == Self.trace.traceID)
    #expect(record["span_id"] as? String == Self.trace.spanID)
    #expect(record["flags"] as? Int == 1)
    #expect(attributes["trace_id"] == nil)
  }

  @Test(arguments: [OTLPDestination.Encoding.protobuf, .json])
  func hangReportsAreExceptionStyleRecordsWithTheirOwnEventName(encoding: OTLPDestination.Encoding) throws {
    let fixture = try ReportFixture()
    var report = fixture.reports[0].report
    report.kind = .hang
    report.exceptionType = HangFacts.exceptionType
    report.exceptionMessage = "heartbeat \"event-loop-1\" silent for 3.1 s (threshold 2.0 s)"
    report.attributes[HangFacts.watchKey] = "event-loop-1"
    report.threadID = 4242
    report.threads = [
      CrashReport.Thread(id: 4242, name: "event-loop-1", state: .captured, crashed: false, frames: []),
      CrashReport.Thread(id: 4243, name: "worker", state: .captured, crashed: false, frames: []),
    ]
    let destination = OTLPDestination(endpoint: "http://127.0.0.1:1", encoding: encoding)
    let decoded = try decodeOTLP(
      try destination.request(for: report, stored: fixture.reports[0]).body, json: encoding == .json)
    let record = try #require((decoded["records"] as? [[String: Any]])?.first)
    let attributes = try #require(record["attributes"] as? [String: Any])
    #expect(record["event_name"] as? String == OTLPDestination.hangEventName)
    #expect(record["severity_number"] as? Int == 17)
    #expect(attributes["exception.type"] as? String == "Hang")
    #expect(attributes["exception.message"] as? String == report.exceptionMessage)
    #expect(attributes["crumbs.report.kind"] as? String == "hang")
    #expect(attributes[HangFacts.watchKey] as? String == "event-loop-1")
    // The leading thread is the exception's stack; only the others are listed again.
    let others = try #require(attributes["crumbs.threads"] as? String)
    #expect(others.contains("Thread 4243 \"worker\""))
    #expect(!others.contains("Thread 4242"))
  }

  @Test func breadcrumbRecordsCarryTheSpanTheyWereMadeIn() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append("outside", level: .info, type: .manual)
    ring.append(
      "inside", level: .info, type: .log,
      attributes: BreadcrumbAttributes(Self.trace.attributes + [(key: "k", value: "v")]))
    ring.close(clean: false)
    let store = try ReportStore(directory: directory.path)
    let stored = try #require(PostMortemProcessor(directory: rings, store: store).run().reports.first)
    let destination = OTLPDestination(endpoint: "http://127.0.0.1:1", breadcrumbsAsLogRecords: true)
    let decoded = try decodeOTLP(try destination.request(for: stored.report, stored: stored).body)
    let records = try #require(decoded["records"] as? [[String: Any]])
    let outside = try #require(records.first { $0["body"] as? String == "outside" })
    let inside = try #require(records.first { $0["body"] as? String == "inside" })
    #expect(outside["trace_id"] as? String == "")
    #expect(inside["trace_id"] as? String == Self.trace.traceID)
    #expect(inside["span_id"] as? String == Self.trace.spanID)
    #expect(inside["flags"] as? Int == 1)
    let own = try #require(
      (inside["attributes"] as? [String: Any])?["crumbs.breadcrumb.attributes"] as? [String: Any])
    #expect(own as? [String: String] == ["k": "v"])
  }

  // MARK: - Transport

  @Test(arguments: [500, 501, 400, 401, 403, 404, 408, 413])
  func otherClientAndServerErrorsAreDroppedNotRetried(status: Int) throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: status, body: "no thanks")
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = otlpUploader(fixture, server, clock: clock)
    let result = try #require(uploader.deliverPendingNow().results.first)
    #expect(result.outcome == .dropped(reason: "HTTP \(status): no thanks"))
    clock.advance(seconds: 100_000)
    #expect(uploader.deliverPendingNow().results.isEmpty)
    #expect(server.requests.count == 1)
    #expect(try fixture.store.load(id: fixture.ids[0]).droppedReason() == "otlp: HTTP \(status): no thanks")
  }

  @Test(arguments: [502, 503, 504])
  func retryableStatusesAreRetried(status: Int) throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { index, _ in index == 0 ? .respond(status) : .respond(200) }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = otlpUploader(fixture, server, clock: clock)
    let first = try #require(uploader.deliverPendingNow().results.first)
    #expect(
      first.outcome == .willRetry(reason: "HTTP \(status)", nextAttemptUnixNano: clock.now() + 10_000_000_000)
    )
    clock.advance(seconds: 10)
    #expect(uploader.deliverPendingNow().results.first?.outcome == .delivered(status: 200))
    #expect(server.requests.count == 2)
  }

  @Test func retryAfterOn503IsHonoured() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { index, _ in
      index == 0 ? .respond(503, headers: ["Retry-After": "120"]) : .respond(200)
    }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = otlpUploader(fixture, server, clock: clock)
    let start = clock.now()
    let first = try #require(uploader.deliverPendingNow().results.first)
    // The backoff alone would say 10 s.
    #expect(first.outcome == .willRetry(reason: "HTTP 503", nextAttemptUnixNano: start + 120_000_000_000))
    clock.advance(seconds: 60)
    #expect(uploader.deliverPendingNow().results.isEmpty)
    clock.advance(seconds: 60)
    #expect(uploader.deliverPendingNow().results.first?.outcome == .delivered(status: 200))
    #expect(server.requests.count == 2)
  }

  @Test(arguments: [false, true])
  func partialSuccessReachesTheDelegate(json: Bool) throws {
    let fixture = try ReportFixture()
    let body = try otlpPartialSuccessBody(rejected: 2, message: "two breadcrumbs too old", json: json)
    let server = try LoopbackHTTPServer { _, _ in
      .respondBytes(
        200, headers: ["Content-Type": json ? "application/json" : "application/x-protobuf"], body: body)
    }
    defer { server.stop() }
    let delegate = RecordingDelegate()
    let destination = OTLPDestination(
      endpoint: server.baseURL, encoding: json ? .json : .protobuf, breadcrumbsAsLogRecords: true)
    let uploader = ReportUploader(store: fixture.store, destinations: [destination], delegate: delegate)
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.sent])
    let expected = PartialSuccess(rejected: 2, message: "two breadcrumbs too old")
    #expect(pass.results.first?.partialSuccess == expected)
    #expect(delegate.responses.withLock { $0.first?.partialSuccess } == expected)
    #expect(pass.results.first?.description.contains("2 record(s) rejected: two breadcrumbs too old") == true)
    let state = try fixture.store.load(id: fixture.ids[0]).deliveryState().destinations["otlp"]
    #expect(state?.lastError == expected.description)
    #expect(server.requests.count == 1)
  }

  @Test func aPartialSuccessThatRejectedEveryRecordIsADrop() throws {
    let fixture = try ReportFixture()
    let body = try otlpPartialSuccessBody(rejected: 1, message: "invalid record")
    let server = try LoopbackHTTPServer { _, _ in
      .respondBytes(200, headers: ["Content-Type": "application/x-protobuf"], body: body)
    }
    defer { server.stop() }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)])
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.dropped])
    #expect(
      try fixture.store.load(id: fixture.ids[0]).droppedReason()
        == "otlp: HTTP 200: the collector rejected every record (partial success: 1 record(s) rejected: invalid record)"
    )
  }

  @Test func requestsNameCrumbsAndItsVersion() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    _ = ReportUploader(store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)])
      .deliverPendingNow()
    let agent = try #require(server.requests.first?.headers["user-agent"])
    #expect(agent.hasPrefix("Crumbs/\(CrumbsVersion.string)"))
  }

  @Test func gzipBodiesDecodeWithTheOfficialDecoder() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    var destination = OTLPDestination(endpoint: server.baseURL, breadcrumbsAsLogRecords: true)
    destination.compression = .gzip
    let plain = try OTLPDestination(endpoint: server.baseURL, breadcrumbsAsLogRecords: true)
      .request(for: fixture.reports[0].report, stored: fixture.reports[0]).body
    let breadcrumbs = try fixture.reports[0].trailBreadcrumbs().count
    let pass = ReportUploader(store: fixture.store, destinations: [destination]).deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.sent])
    let request = try #require(server.requests.first)
    #expect(request.headers["content-encoding"] == "gzip")
    #expect(request.body.count < plain.count)
    let decoded = try decodeOTLP(request.body, gzip: true)
    let records = try #require(decoded["records"] as? [[String: Any]])
    #expect(records.first?["event_name"] as? String == "device.crash")
    #expect(records.count == 1 + breadcrumbs)
  }

  @Test func requestsOverTheCapLeaveAttachmentsOutOrAreDropped() throws {
    let fixture = try ReportFixture(count: 2, extraAttachmentBytes: 64 * 1024)
    let stored = fixture.reports[1]
    var destination = OTLPDestination(endpoint: "http://127.0.0.1:1", breadcrumbsAsLogRecords: true)
    let full = try destination.request(for: stored.report, stored: stored).body.count
    #expect(full > 64 * 1024)
    destination.maxRequestBytes = 16 * 1024
    let request = try destination.request(for: stored.report, stored: stored)
    #expect(request.body.count <= 16 * 1024)
    let decoded = try decodeOTLP(request.body)
    let records = try #require(decoded["records"] as? [[String: Any]])
    #expect(records.count == 1)
    let omitted = try #require(
      (records[0]["attributes"] as? [String: Any])?["crumbs.attachments.omitted"] as? [String])
    #expect(omitted.contains { $0.hasPrefix("blob.bin: left out to keep the request under 16384 bytes") })
    #expect(omitted.contains { $0.hasPrefix("breadcrumb records: left out") })

    destination.maxRequestBytes = 200
    #expect(throws: DeliveryError.self) { try destination.request(for: stored.report, stored: stored) }
  }

  /// OTEL_EXPORTER_OTLP_TIMEOUT (the destination's `timeout`) bounds a request below the
  /// transport's own 30 s: a collector that never answers fails the attempt in about a second.
  @Test func theDestinationsTimeoutBoundsTheRequest() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { _, _ in .stall(seconds: 60) }
    defer { server.stop() }
    var destination = OTLPDestination(endpoint: server.baseURL)
    destination.timeout = 1
    let uploader = ReportUploader(
      store: fixture.store, destinations: [destination], transport: CurlTransport(timeout: 30))
    let started = ChildProcess.now()
    let result = try #require(uploader.deliverPendingNow().results.first)
    #expect(ChildProcess.now() - started < 20)
    guard case .willRetry(let reason, _) = result.outcome else {
      Issue.record("\(result)")
      return
    }
    #expect(reason == "timed out")
  }
}
