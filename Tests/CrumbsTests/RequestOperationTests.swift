// RequestOperationTests.swift — CrumbsClient.beginRequest, what the Hummingbird and Vapor
// middleware share (issue 38, point 7): the trace from `traceparent` (its span the parent, a new
// span of the request's own), else from the request id, else a new one; a breadcrumb at the
// start; answered / failed end the operation, and failed reports only when asked. The
// middleware themselves run in real servers: ExampleServerTests.

import Crumbs
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite(.serialized) struct RequestOperationTests {
  struct Failure: Error {}

  func client(_ directory: TestDirectory) throws -> CrumbsClient {
    var configuration = CrumbsConfiguration(directory: directory.path)
    configuration.hangs = nil
    configuration.automaticBreadcrumbs = nil
    return try CrumbsClient.start(configuration, shared: false)
  }

  @Test func aRequestIsOpenUnderItsRouteWithTheCallersTraceUntilAnswered() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try client(directory)
      defer { client.close() }
      let request = client.beginRequest(
        "GET /orders/:id", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        requestID: "hb-1", path: "/orders/42")
      #expect(request.trace.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
      #expect(request.trace.spanID != "00f067aa0ba902b7" && request.trace.flags == 1)

      // Open, and its start is a breadcrumb: what a request that never ends leaves.
      let snapshot = client.ring.snapshot()
      let open = try #require(snapshot.ledger?.open)
      #expect(open.map(\.name) == ["GET /orders/:id"])
      #expect(open.first?.trace?.traceID == request.trace.traceID)
      #expect(open.first?.trace?.spanID == request.trace.spanID)
      #expect(open.first?.parentSpanID == "00f067aa0ba902b7")
      #expect(open.first?.attributes.map(\.key) == ["url.path", "http.request.id"])
      let began = try #require(snapshot.breadcrumbs.last)
      #expect(began.message == "GET /orders/:id" && began.type == .http)
      #expect(began.attributes.contains { $0.key == "trace_id" && $0.value == request.trace.traceID })

      request.answered(status: 200)
      let after = client.ring.snapshot()
      #expect(after.ledger?.open.isEmpty == true)
      #expect(after.breadcrumbs.last?.message == "GET /orders/:id answered")
    }
  }

  @Test func withoutTraceparentTheTraceIDComesFromTheRequestIDOrIsNew() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try client(directory)
      defer { client.close() }
      // Vapor's request id is a UUID; Hummingbird's up to 32 hex digits.
      let vapor = client.beginRequest("GET /a", requestID: "6F1C8A2E-0B4D-4E7A-9C3F-1A2B3C4D5E6F")
      #expect(vapor.trace.traceID == "6f1c8a2e0b4d4e7a9c3f1a2b3c4d5e6f")
      let short = client.beginRequest("GET /b", traceparent: "garbage", requestID: "abc123")
      #expect(short.trace.traceID == "00000000000000000000000000abc123")
      let none = client.beginRequest("GET /c", requestID: "no digits here: ----")
      let other = client.beginRequest("GET /d")
      #expect(none.trace.traceID.count == 32 && none.trace.traceID != other.trace.traceID)
      let spans = Set([vapor, short, none, other].map(\.trace.spanID))
      #expect(spans.count == 4)
      for request in [vapor, short, none, other] { request.answered(status: 204) }
      #expect(client.ring.snapshot().ledger?.open.isEmpty == true)
    }
  }

  @Test func aFailedRequestEndsAndIsReportedOnlyWhenAsked() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try client(directory)
      defer { client.close() }
      let store = try ReportStore(directory: directory.path)
      client.beginRequest("POST /quiet").failed(Failure(), report: false)
      #expect(store.list(.pending).reports.isEmpty)
      let loud = client.beginRequest(
        "POST /orders", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
      loud.failed(Failure(), report: true)
      #expect(client.ring.snapshot().ledger?.open.isEmpty == true)
      let reports = store.list(.pending).reports
      #expect(reports.count == 1)
      let report = try #require(reports.first?.report)
      #expect(report.attributes["http.route"]?.text == "POST /orders", "\(report.attributes)")
      // The reserved trace keys become the report's trace (its OTLP record's trace and span).
      #expect(report.trace?.traceID == "4bf92f3577b34da6a3ce929d0e0e4736", "\(report.attributes)")
      #expect(report.trace?.spanID == loud.trace.spanID)
    }
  }
}
