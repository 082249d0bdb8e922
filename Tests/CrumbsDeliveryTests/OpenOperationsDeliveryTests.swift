// OpenOperationsDeliveryTests.swift — the operations a death left open, as they leave the
// machine: attributes of the OTLP crash record and Backtrace attributes and annotation, and
// the closing spans on `/v1/traces` (protobuf, JSON and gzip), all through real loopback
// servers and decoded by the official OTLP classes. A collector that takes no traces (404)
// delays neither the report nor the other events.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

/// An outbox of fixed events, removed as the uploader says.
final class FixedOutbox: DeliveryOutbox {
  let events: Mutex<[OutboxEvent]>
  init(_ events: [OutboxEvent]) { self.events = Mutex(events) }
  var keys: [String] { events.withLock { $0.map(\.key) } }
  func queuedEvents() -> [OutboxEvent] { events.withLock { $0 } }
  func remove(_ event: OutboxEvent) { events.withLock { $0.removeAll { $0.key == event.key } } }
}

@Suite struct OpenOperationsDeliveryTests {
  static let start: UInt64 = 1_900_000_000_000_000_000

  /// A crash report whose ledger held three operations at the death (the last on the crashing
  /// thread), one untraced, plus two it could not hold and one it could not read.
  static func operations() -> CrashReport.OpenOperations {
    func operation(
      _ name: String, kind: String, trace: String?, span: String?, parent: String?, offset: UInt64,
      thread: UInt32, crashing: Bool, attributes: [Breadcrumb.Attribute] = []
    ) -> CrashReport.OpenOperations.Operation {
      CrashReport.OpenOperations.Operation(
        name: name, kind: kind, traceID: trace, spanID: span, parentSpanID: parent,
        startTimeUnixNano: start + offset, startTime: ISO8601.string(nanoseconds: start + offset),
        ageNanoseconds: 5_000_000_000 - offset, threadID: thread, attributes: attributes,
        onCrashingThread: crashing)
    }
    return CrashReport.OpenOperations(
      operations: [
        operation(
          "GET /v1/orders/:id", kind: "server", trace: "4bf92f3577b34da6a3ce929d0e0e4736",
          span: "00f067aa0ba902b7", parent: "b7ad6b7169203331", offset: 0, thread: 101, crashing: false,
          attributes: [.init(key: "url.path", value: "/v1/orders/7"), .init(key: "url.path", value: "twice")]),
        operation(
          "orders.export", kind: "job", trace: nil, span: nil, parent: nil, offset: 1_000, thread: 102,
          crashing: false),
        operation(
          "POST /v1/crash", kind: "server", trace: "6bf92f3577b34da6a3ce929d0e0e4738",
          span: "20f067aa0ba902b9", parent: nil, offset: 2_000, thread: 4242, crashing: true),
      ], capacity: 512, notHeld: 2, unreadable: 1, damage: nil)
  }

  static func fixture() throws -> (ReportFixture, CrashReport) {
    try BacktraceSchemaTests.crashFixture { report in
      report.openOperations = operations()
      report.trace = TraceContext(traceID: "6bf92f3577b34da6a3ce929d0e0e4738", spanID: "30f067aa0ba902ba")
    }
  }

  @Test func theCrashRecordCarriesTheOpenOperations() throws {
    let (fixture, _) = try Self.fixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let uploader = otlpUploader(fixture, server, clock: ManualClock())
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
    let body = try #require(server.requests.first).body
    let record = try #require((try decodeOTLP(body)["records"] as? [[String: Any]])?.first)
    let attributes = try #require(record["attributes"] as? [String: Any])
    let types = try #require(record["attribute_types"] as? [String: String])
    #expect(attributes["crumbs.open_operations.count"] as? Int == 3)
    #expect(types["crumbs.open_operations.count"] == "int_value")
    #expect(attributes["crumbs.open_operations.capacity"] as? Int == 512)
    #expect(attributes["crumbs.open_operations.not_held"] as? Int == 2)
    #expect(attributes["crumbs.open_operations.unreadable"] as? Int == 1)
    #expect(attributes["crumbs.open_operations.crashing.name"] as? String == "POST /v1/crash")
    #expect(
      attributes["crumbs.open_operations.crashing.trace_id"] as? String == "6bf92f3577b34da6a3ce929d0e0e4738")
    #expect(attributes["crumbs.open_operations.crashing.span_id"] as? String == "20f067aa0ba902b9")
    #expect(
      attributes["crumbs.open_operations.names"] as? [String] == [
        "GET /v1/orders/:id", "orders.export", "POST /v1/crash",
      ])
    #expect(
      attributes["crumbs.open_operations.trace_ids"] as? [String] == [
        "4bf92f3577b34da6a3ce929d0e0e4736", "", "6bf92f3577b34da6a3ce929d0e0e4738",
      ])
    let list = try #require(attributes["crumbs.open_operations"] as? [[String: Any]])
    #expect(list.count == 3)
    #expect(list[0]["parent_span_id"] as? String == "b7ad6b7169203331")
    #expect(list[0]["thread.id"] as? Int == 101)
    #expect(list[0]["age_ns"] as? Int == 5_000_000_000)
    #expect(list[0]["on_crashing_thread"] as? Bool == false)
    #expect((list[0]["attributes"] as? [String: Any])?["url.path"] != nil)
    #expect(list[1]["trace_id"] == nil && list[1]["kind"] as? String == "job")
    #expect(list[2]["on_crashing_thread"] as? Bool == true)
  }

  @Test func backtraceCarriesTheCountsAsAttributesAndTheListAsAnAnnotation() throws {
    let (fixture, _) = try Self.fixture()
    let json = try BacktraceSchemaTests.sentBody(fixture)
    let attributes = try #require(json["attributes"] as? [String: Any])
    #expect(attributes["crumbs.open_operations.count"] as? Int == 3)
    #expect(attributes["crumbs.open_operations.not_held"] as? Int == 2)
    #expect(attributes["crumbs.open_operations.unreadable"] as? Int == 1)
    #expect(attributes["crumbs.open_operations.capacity"] as? Int == 512)
    #expect(attributes["crumbs.open_operations.crashing.name"] as? String == "POST /v1/crash")
    // Backtrace's attributes are flat: no arrays there.
    #expect(attributes["crumbs.open_operations.names"] == nil)
    let annotations = try #require(json["annotations"] as? [String: Any])
    let open = try #require(annotations["Open operations"] as? [String: Any])
    #expect(open["count"] as? Int == 3 && open["notHeld"] as? Int == 2 && open["unreadable"] as? Int == 1)
    let operations = try #require(open["operations"] as? [[String: Any]])
    #expect(
      operations.map { $0["name"] as? String } == ["GET /v1/orders/:id", "orders.export", "POST /v1/crash"])
    #expect(operations[0]["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
    #expect(operations[0]["ageMs"] as? Int == 5_000)
    #expect(operations[2]["onCrashingThread"] as? Bool == true)
    // A key repeated in the ledger is named once (the first).
    #expect((operations[0]["attributes"] as? [String: String]) == ["url.path": "/v1/orders/7"])
  }

  /// Each traced operation is one span, closed at the death, in every encoding.
  @Test(arguments: [(false, false), (true, false), (false, true)])
  func theClosingSpansDecode(json: Bool, gzip: Bool) throws {
    let (_, report) = try Self.fixture()
    let spans = try #require(ClosingSpans(report: report))
    var destination = OTLPDestination(endpoint: "http://127.0.0.1:1", encoding: json ? .json : .protobuf)
    destination.compression = gzip ? .gzip : .none
    let request = try #require(destination.request(forTraces: spans.batch(), id: report.id))
    #expect(request.url == "http://127.0.0.1:1/v1/traces")
    #expect(request.itemCount == 2)
    let (decoded, resource) = try decodeOTLPTraces(request.body, json: json, gzip: gzip)
    #expect(resource["service.instance.id"] as? String == report.sessionID)
    #expect(resource["service.version"] as? String == "1.2.3-crashed")
    #expect(decoded.count == 2, "the untraced operation has no span")
    let order = try #require(decoded.first { $0["name"] as? String == "GET /v1/orders/:id" })
    #expect(order["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
    #expect(order["span_id"] as? String == "00f067aa0ba902b7")
    #expect(order["parent_span_id"] as? String == "b7ad6b7169203331")
    #expect(order["kind"] as? Int == 2)
    #expect(order["start_time_unix_nano"] as? String == String(Self.start))
    #expect(order["end_time_unix_nano"] as? String == String(Self.start + 5_000_000_000))
    #expect((order["status"] as? [String: Any])?["code"] as? Int == 2)
    #expect((order["status"] as? [String: Any])?["message"] as? String == "crashed: SIGSEGV")
    let attributes = try #require(order["attributes"] as? [String: Any])
    #expect(attributes["crumbs.report.id"] as? String == report.id)
    #expect(attributes["session.id"] as? String == report.sessionID)
    #expect(attributes["thread.id"] as? Int == 101)
    #expect(attributes["crumbs.death.cause"] as? String == "SIGSEGV")
    #expect(attributes["crumbs.operation.on_crashing_thread"] as? Bool == false)
    #expect(attributes["url.path"] != nil)
    let link = try #require((order["links"] as? [[String: Any]])?.first)
    #expect(link["trace_id"] as? String == "6bf92f3577b34da6a3ce929d0e0e4738")
    #expect(link["span_id"] as? String == "30f067aa0ba902ba")
    #expect((link["attributes"] as? [String: Any])?["crumbs.report.id"] as? String == report.id)
    let crash = try #require(decoded.first { $0["name"] as? String == "POST /v1/crash" })
    #expect(crash["parent_span_id"] as? String == "", "a root span")
    #expect(crash["end_time_unix_nano"] as? String == String(Self.start + 5_000_000_000))
  }

  /// A span is never linked to itself: the record that carries its own ids needs no link.
  @Test func aRecordInTheSpanItselfIsNotALink() throws {
    var (_, report) = try Self.fixture()
    report.trace = TraceContext(traceID: "6bf92f3577b34da6a3ce929d0e0e4738", spanID: "20f067aa0ba902b9")
    let spans = try #require(ClosingSpans(report: report)).batch().spans
    #expect(spans.first { $0.name == "POST /v1/crash" }?.links == [])
    #expect(spans.first { $0.name == "GET /v1/orders/:id" }?.links.count == 1)
  }

  @Test func theStatusSaysHowTheProcessDied() throws {
    var (_, report) = try Self.fixture()
    #expect(ClosingSpans.status(of: report) == "crashed: SIGSEGV")
    report.kind = .abnormalTermination
    report.signal = nil
    report.exceptionType = "OutOfMemory"
    #expect(ClosingSpans.status(of: report) == "killed: SIGKILL (out of memory)")
    report.exceptionType = "ShutdownTimeout"
    #expect(ClosingSpans.status(of: report).hasPrefix("killed: shutdown did not finish"))
    report.exceptionType = "AbnormalTermination"
    #expect(ClosingSpans.status(of: report).hasPrefix("killed: no crash record and no clean exit"))
    // Processes that lived on close nothing.
    report.kind = .hang
    #expect(ClosingSpans(report: report) == nil)
    report.kind = .nonFatal
    #expect(ClosingSpans(report: report) == nil)
  }

  @Test func aTracesURLFollowsTheEndpointRules() {
    #expect(OTLPDestination(endpoint: "http://c:4318").tracesURL == "http://c:4318/v1/traces")
    #expect(OTLPDestination(endpoint: "http://c:4318/").tracesURL == "http://c:4318/v1/traces")
    var asIs = OTLPDestination(endpoint: "http://c:4318/custom/logs")
    asIs.appendsLogsPath = false
    #expect(asIs.tracesURL == nil, "a logs URL given as is names no traces URL")
    asIs.endpoint = "http://c:4318/v1/logs"
    #expect(asIs.tracesURL == "http://c:4318/v1/traces")
    let environment = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c:4318/custom/logs",
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/custom/traces",
    ])
    #expect(environment.destination()?.tracesURL == "http://t:4318/custom/traces")
    let base = OTLPEnvironment(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"])
    #expect(base.destination()?.tracesURL == "http://c:4318/v1/traces")
    let bad = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x",
    ])
    #expect(bad.problems.contains { $0.hasPrefix("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ignored") })
    #expect(bad.destination()?.tracesURL == "http://c:4318/v1/traces")
    // Configuration in code keeps its endpoint; a traces URL given as is still applies.
    let applied = environment.apply(
      to: OTLPDestination(endpoint: "http://code:4318"), compressionSetInCode: false)
    #expect(applied.tracesURL == "http://t:4318/custom/traces")
    #expect(
      base.apply(to: OTLPDestination(endpoint: "http://code:4318"), compressionSetInCode: false)
        .tracesURL == "http://code:4318/v1/traces")
  }

  /// A collector without `/v1/traces` (404): the report and the summaries go out as before, the
  /// spans are dropped once (not retried, not kept), and nothing waits on them.
  @Test func aCollectorWithoutTracesBlocksNoLogs() throws {
    let (fixture, report) = try Self.fixture()
    let server = try LoopbackHTTPServer { _, request in
      request.target.hasSuffix("/v1/traces") ? .respond(404, body: "404 page not found") : .respond(200)
    }
    defer { server.stop() }
    let spans = try #require(ClosingSpans(report: report))
    let summary = OTLPLogRecord(
      timeUnixNano: 1, observedTimeUnixNano: 1, severity: .info, body: .string("summary"), attributes: [],
      eventName: "crumbs.session.summary")
    let outbox = FixedOutbox([
      OutboxEvent(id: report.id, key: "spans", traces: spans.batch()),
      OutboxEvent(
        id: "s", key: "summary",
        batch: OTLPLogBatch(resource: [], scopeName: "crumbs", scopeVersion: "1", records: [summary])),
    ])
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings(),
      outbox: outbox, clock: { clock.now() }, random: { 0 })
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.sent])
    #expect(server.requests.map(\.target) == ["/v1/logs", "/v1/traces", "/v1/logs"])
    #expect(outbox.keys.isEmpty, "the spans refused for good, the summary delivered")
    // A second pass sends nothing again.
    uploader.deliverPendingNow()
    #expect(server.requests.count == 3)
  }

  /// A collector down for traces (503) backs off the spans alone: the summary behind them goes.
  @Test func spansBackOffApartFromTheOtherEvents() throws {
    let (fixture, report) = try Self.fixture()
    let server = try LoopbackHTTPServer { _, request in
      request.target.hasSuffix("/v1/traces") ? .respond(503) : .respond(200)
    }
    defer { server.stop() }
    let spans = try #require(ClosingSpans(report: report))
    let record = OTLPLogRecord(
      timeUnixNano: 1, observedTimeUnixNano: 1, severity: .info, body: .string("summary"), attributes: [],
      eventName: "crumbs.session.summary")
    let summary = OutboxEvent(
      id: "s", key: "summary",
      batch: OTLPLogBatch(resource: [], scopeName: "crumbs", scopeVersion: "1", records: [record]))
    let outbox = FixedOutbox([OutboxEvent(id: report.id, key: "spans", traces: spans.batch())])
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings(),
      outbox: outbox, clock: { clock.now() }, random: { 0 })
    uploader.deliverPendingNow()
    #expect(outbox.keys == ["spans"], "kept for a retry")
    outbox.events.withLock { $0.append(summary) }
    uploader.deliverPendingNow()
    #expect(outbox.keys == ["spans"], "the summary went although the spans wait")
    #expect(server.requests.filter { $0.target == "/v1/traces" }.count == 1, "the spans waited their backoff")
  }

  /// A collector's traces answer is read by the logs' parser: a partial success that rejected
  /// some spans is delivered, one that rejected every span is a drop (JSON `rejectedSpans`).
  @Test(arguments: [(1, false), (2, true)])
  func aTracesPartialSuccessIsRead(rejected: Int, dropped: Bool) throws {
    let (fixture, report) = try Self.fixture()
    Syscall.removeTree(fixture.reports[0].path)
    let server = try LoopbackHTTPServer { _, _ in
      .respond(
        200, headers: ["Content-Type": "application/json"],
        body: "{\"partialSuccess\":{\"rejectedSpans\":\"\(rejected)\",\"errorMessage\":\"no parent\"}}")
    }
    defer { server.stop() }
    let spans = try #require(ClosingSpans(report: report))
    let outbox = FixedOutbox([OutboxEvent(id: report.id, key: "spans", traces: spans.batch())])
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings(),
      outbox: outbox)
    let pass = uploader.deliverPendingNow()
    let result = try #require(pass.events.first)
    if dropped {
      guard case .dropped(let reason) = result.outcome else {
        Issue.record("\(result)")
        return
      }
      #expect(reason.contains("rejected every record"), "\(reason)")
    } else {
      guard case .delivered = result.outcome else {
        Issue.record("\(result)")
        return
      }
    }
    #expect(outbox.keys.isEmpty)
  }

  /// A ledger far larger than the default: the record lists the oldest 1024 and counts the rest,
  /// so the report still fits one request.
  @Test func aHugeLedgerListsTheOldestAndCountsTheRest() throws {
    let (fixture, _) = try BacktraceSchemaTests.crashFixture { report in
      let one = Self.operations().operations[0]
      report.openOperations = CrashReport.OpenOperations(
        operations: Array(repeating: one, count: 1100), capacity: 2048, notHeld: 0, unreadable: 0, damage: nil
      )
    }
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    #expect(
      otlpUploader(fixture, server, clock: ManualClock()).deliverPendingNow().finished.map(\.state) == [.sent]
    )
    let body = try #require(server.requests.first).body
    let record = try #require((try decodeOTLP(body)["records"] as? [[String: Any]])?.first)
    let attributes = try #require(record["attributes"] as? [String: Any])
    #expect(attributes["crumbs.open_operations.count"] as? Int == 1100)
    #expect(attributes["crumbs.open_operations.omitted"] as? Int == 76)
    #expect((attributes["crumbs.open_operations.names"] as? [String])?.count == 1024)
    #expect((attributes["crumbs.open_operations"] as? [[String: Any]])?.count == 1024)
  }
}
