// CrumbsTracerTests.swift — CrumbsTracer over a real client and ring: spans of the recorded kinds
// are open operations with the wrapped tracer's W3C ids, renames and the watched attributes
// reach the entry, nested spans name their parent, everything is forwarded to the wrapped span
// (a recording tracer that propagates `traceparent`, as swift-otel's does), a span ended twice
// ends nothing else, a full ledger loses no span, and NoOpTracer still gets ids.

import CrumbsTestSupport
import Synchronization
import Testing
import Tracing

@testable import Crumbs
@testable import CrumbsTracing

/// Where the recording tracer keeps its span's `traceparent`.
private enum RecordedSpanKey: ServiceContextKey {
  typealias Value = String
}

/// A tracer that records what its spans are told and propagates W3C `traceparent`: a new span
/// keeps its parent's trace id (or starts one) with a span id of its own.
final class RecordingTracer: Tracer, Sendable {
  let counter = Mutex<UInt64>(0)
  let started = Mutex<[RecordingSpan]>([])

  func startSpan<Instant: TracerInstant>(
    _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
    at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
  ) -> RecordingSpan {
    let number = counter.withLock {
      $0 += 1
      return $0
    }
    var spanContext = context()
    let parent = spanContext[RecordedSpanKey.self].flatMap { TraceContext(traceparent: $0) }
    let traceID =
      parent?.traceID ?? "0af7651916cd43dd8448eb21" + TraceIDs.hex(number).suffix(8)
    spanContext[RecordedSpanKey.self] = "00-\(traceID)-\(TraceIDs.hex(0xa000 + number))-01"
    let span = RecordingSpan(name: operationName, kind: kind, context: spanContext)
    started.withLock { $0.append(span) }
    return span
  }

  func forceFlush() {}

  /// The span started in `context` (the one its `traceparent` names), while it has not ended.
  func activeSpan(identifiedBy context: ServiceContext) -> RecordingSpan? {
    guard let header = context[RecordedSpanKey.self] else { return nil }
    return started.withLock { spans in
      spans.first { $0.context[RecordedSpanKey.self] == header && $0.isRecording }
    }
  }

  func inject<Carrier, Inject: Injector>(
    _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
  ) where Inject.Carrier == Carrier {
    if let header = context[RecordedSpanKey.self] {
      injector.inject(header, forKey: "traceparent", into: &carrier)
    }
  }

  func extract<Carrier, Extract: Extractor>(
    _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
  ) where Extract.Carrier == Carrier {
    if let header = extractor.extract(key: "traceparent", from: carrier) {
      context[RecordedSpanKey.self] = header
    }
  }
}

final class RecordingSpan: Span, Sendable {
  struct Record {
    var name: String
    var attributes = SpanAttributes()
    var events: [String] = []
    var errors = 0
    var links = 0
    var status: SpanStatus.Code?
    var ends = 0
  }

  let kind: SpanKind
  let context: ServiceContext
  let record: Mutex<Record>

  init(name: String, kind: SpanKind, context: ServiceContext) {
    self.kind = kind
    self.context = context
    record = Mutex(Record(name: name))
  }

  var operationName: String {
    get { record.withLock { $0.name } }
    set { record.withLock { $0.name = newValue } }
  }
  var attributes: SpanAttributes {
    get { record.withLock { $0.attributes } }
    set { record.withLock { $0.attributes = newValue } }
  }
  var isRecording: Bool { record.withLock { $0.ends == 0 } }
  func setStatus(_ status: SpanStatus) { record.withLock { $0.status = status.code } }
  func addEvent(_ event: SpanEvent) { record.withLock { $0.events.append(event.name) } }
  func addLink(_ link: SpanLink) { record.withLock { $0.links += 1 } }
  func recordError<Instant: TracerInstant>(
    _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
  ) { record.withLock { $0.errors += 1 } }
  func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
    record.withLock { $0.ends += 1 }
  }

  var ids: TraceContext? { context[RecordedSpanKey.self].flatMap { TraceContext(traceparent: $0) } }
}

/// A real client (its own directory and ring) for `body`, the process-wide state held for it;
/// `ledgerEntries` sizes its ledger. No hang detection: the test runner's own concurrency pool
/// is blocked by synchronous tests, so a hang report would be true, and one more report than
/// these tests count (HangTests watch children).
func withClient(ledgerEntries: Int = 512, _ body: (CrumbsClient) throws -> Void) throws {
  try ProcessWideState.exclusive {
    let directory = TestDirectory()
    var configuration = CrumbsConfiguration(directory: directory.path)
    configuration.hangs = nil
    configuration.automaticBreadcrumbs = nil
    configuration.environment = [:]
    configuration.ring.ledgerEntryCount = ledgerEntries
    let client = try CrumbsClient.start(configuration, shared: false)
    defer { client.close() }
    try body(client)
  }
}

@Suite(.serialized) struct CrumbsTracerTests {
  static let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

  func open(_ client: CrumbsClient) -> [OpenOperation] { client.ring.snapshot().ledger?.open ?? [] }

  func entries(_ context: ServiceContext) -> Int {
    var count = 0
    context.forEach { _, _ in count += 1 }
    return count
  }

  func incomingContext() -> ServiceContext {
    var context = ServiceContext.topLevel
    context[RecordedSpanKey.self] = Self.incoming
    return context
  }

  @Test func aServerSpanIsAnOperationWithTheWrappedTracersIDsAndForwardsEverything() throws {
    try withClient { client in
      let recording = RecordingTracer()
      let tracer = CrumbsTracer(wrapping: recording, client: client)
      // As Hummingbird 2.28's TracingMiddleware does: a placeholder name, the request's
      // attributes at once, the route only when the handler returns.
      let span = tracer.startSpan("HTTP GET route not found", context: incomingContext(), ofKind: .server)
      span.updateAttributes { attributes in
        attributes["http.request.method"] = "GET"
        attributes["url.path"] = "/v1/orders/42"
        attributes["url.query"] = "full=1"
        attributes["user_agent.original"] = "curl"
      }
      let wrapped = try #require(recording.started.withLock { $0.first })
      let ids = try #require(wrapped.ids)
      #expect(ids.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
      var entry = try #require(open(client).first)
      #expect(open(client).count == 1)
      #expect(entry.name == "HTTP GET route not found" && entry.kind == .server)
      #expect(entry.trace?.traceID == ids.traceID && entry.trace?.spanID == ids.spanID)
      #expect(entry.parentSpanID == "00f067aa0ba902b7")
      #expect(entry.attributes.map(\.key) == ["http.request.method", "url.path"])
      #expect(entry.attributes.map(\.value) == ["GET", "/v1/orders/42"])
      // The span's context is the wrapped span's, nothing added (no copy of it for every span):
      // its operation is found by its ids.
      #expect(span.context[RecordedSpanKey.self] == wrapped.context[RecordedSpanKey.self])
      #expect(span.context[SpanRecordKey.self] == nil && entries(span.context) == entries(wrapped.context))
      #expect(CrumbsOperation(span.context)?.trace == ids, "the ledger keeps no flags; the operation does")

      span.operationName = "/v1/orders/:id"
      span.updateAttributes { attributes in
        attributes["http.route"] = "/v1/orders/:id"
        attributes["url.path"] = "/changed"
        attributes["http.response.status_code"] = 500
      }
      entry = try #require(open(client).first)
      #expect(entry.name == "/v1/orders/:id")
      #expect(
        entry.attributes.map(\.key) == ["http.request.method", "url.path"],
        "http.route is not watched by default: the entry's name is the route")
      #expect(entry.attributes[1].value == "/v1/orders/42", "each watched key kept once, at its first value")

      span.setStatus(.init(code: .error))
      span.addEvent("charged")
      span.recordError(SampleFailure())
      span.addLink(SpanLink(context: .topLevel, attributes: [:]))
      #expect(span.isRecording)
      span.end()
      #expect(open(client).isEmpty)
      let record = wrapped.record.withLock { $0 }
      #expect(record.name == "/v1/orders/:id" && record.status == .error && record.events == ["charged"])
      #expect(record.errors == 1 && record.links == 1 && record.ends == 1)
      #expect(record.attributes.get("url.query") == .string("full=1"))
      #expect(record.attributes.get("url.path") == .string("/changed"), "the wrapped span gets every value")
      #expect(!span.isRecording)
    }
  }

  @Test func onlyTheConfiguredKindsAreRecorded() throws {
    try withClient { client in
      let kinds: [SpanKind] = [.server, .client, .producer, .consumer, .internal]
      func recorded(_ tracer: CrumbsTracer<RecordingTracer>) -> [OpenOperation.Kind] {
        let spans = kinds.map { tracer.startSpan("span", context: .topLevel, ofKind: $0) }
        defer { spans.forEach { $0.end() } }
        #expect(spans.allSatisfy { $0.wrapped.record.withLock { $0.ends } == 0 })
        return open(client).map(\.kind).sorted { $0.rawValue < $1.rawValue }
      }
      #expect(recorded(CrumbsTracer(wrapping: RecordingTracer(), client: client)) == [.server])
      #expect(
        recorded(CrumbsTracer(wrapping: RecordingTracer(), client: client, kinds: [.server, .consumer]))
          == [.consumer, .server])
      #expect(
        recorded(CrumbsTracer(wrapping: RecordingTracer(), client: client, kinds: nil))
          == [.consumer, .internal, .internal, .internal, .server])
      #expect(open(client).isEmpty)
    }
  }

  @Test func nestedSpansNameTheirParent() throws {
    try withClient { client in
      let tracer = CrumbsTracer(wrapping: RecordingTracer(), client: client, kinds: nil)
      let request = tracer.startSpan("GET /v1/orders/:id", context: incomingContext(), ofKind: .server)
      let query = tracer.startSpan("SELECT orders", context: request.context, ofKind: .client)
      let operations = open(client)
      let outer = try #require(operations.first { $0.name == "GET /v1/orders/:id" })
      let inner = try #require(operations.first { $0.name == "SELECT orders" })
      #expect(inner.trace?.traceID == outer.trace?.traceID)
      #expect(inner.parentSpanID == outer.trace?.spanID && inner.trace?.spanID != outer.trace?.spanID)
      #expect(CrumbsOperation(query.context)?.trace?.spanID == inner.trace?.spanID)
      query.end()
      request.end()
      #expect(open(client).isEmpty)
    }
  }

  /// An unrecorded span in a recorded one (a database query in a request), by the tracer's ids:
  /// its operation is the request's, the open one of its trace begun last; and one recorded
  /// beside it in another trace is never taken.
  @Test func anUnrecordedSpanInARequestFindsTheRequestsOperation() throws {
    try withClient { client in
      let tracer = CrumbsTracer(wrapping: RecordingTracer(), client: client)
      let request = tracer.startSpan("GET /v1/orders/:id", context: incomingContext(), ofKind: .server)
      request.attributes["enduser.id"] = "user-7"
      let elsewhere = tracer.startSpan("GET /health", context: .topLevel, ofKind: .server)
      let query = tracer.startSpan("SELECT orders", context: request.context, ofKind: .client)
      #expect(query.operation == nil && open(client).count == 2)
      let requestIDs = try #require(request.wrapped.ids)
      #expect(CrumbsOperation(query.context)?.trace == requestIDs)
      #expect(CrumbsOperation(elsewhere.context)?.trace == elsewhere.wrapped.ids)
      let report = try ServiceContext.withValue(query.context) {
        try #require(client.send(error: SampleFailure()))
      }
      #expect(report.report.attributes["enduser.id"] == .string("user-7"))
      #expect(report.report.trace?.spanID == requestIDs.spanID, "the operation's span, as it was inherited")
      // A recorded child of the same trace begun later is the newest: an unrecorded span under
      // it finds it, as by its made-up ids it would inherit it.
      let job = tracer.startSpan("enqueue", context: request.context, ofKind: .server)
      let call = tracer.startSpan("POST /charge", context: job.context, ofKind: .client)
      #expect(CrumbsOperation(call.context)?.trace == job.wrapped.ids)
      [call, job, query].forEach { $0.end() }
      #expect(CrumbsOperation(query.context)?.trace == requestIDs)
      request.end()
      #expect(CrumbsOperation(request.context) == nil, "an ended span's operation is not found")
      #expect(CrumbsOperation(query.context) == nil)
      elsewhere.end()
    }
  }

  /// `activeSpan(identifiedBy:)` gives the span's own operation back: updates reach its entry once,
  /// ending it ends the operation; an unrecorded span's gives none (it must not end its parent's).
  @Test func theActiveSpanOfAContextHoldsItsOwnOperation() throws {
    try withClient { client in
      let tracer = CrumbsTracer(wrapping: RecordingTracer(), client: client)
      let request = tracer.startSpan("GET /v1/orders/:id", context: incomingContext(), ofKind: .server)
      request.attributes["url.path"] = "/v1/orders/42"
      let query = tracer.startSpan("SELECT orders", context: request.context, ofKind: .client)
      #expect(tracer.activeSpan(identifiedBy: query.context)?.operation == nil)
      let active = try #require(tracer.activeSpan(identifiedBy: request.context))
      #expect(active.operation?.trace == request.wrapped.ids)
      active.updateAttributes { attributes in
        attributes["url.path"] = "/again"
        attributes["http.request.method"] = "GET"
      }
      let entry = try #require(open(client).first)
      #expect(entry.attributes.map(\.key) == ["url.path", "http.request.method"], "url.path is kept once")
      #expect(entry.attributes.first?.value == "/v1/orders/42")
      active.end()
      #expect(open(client).isEmpty)
      #expect(tracer.activeSpan(identifiedBy: request.context) == nil, "ended: the wrapped tracer has none")
      query.end()
      request.end()
    }
  }

  @Test func aNoOpTracerStillGivesEachOperationIDs() throws {
    try withClient { client in
      let tracer = CrumbsTracer(wrapping: NoOpTracer(), client: client, kinds: nil)
      let request = tracer.startSpan("GET /health", context: .topLevel, ofKind: .server)
      let inner = tracer.startSpan("check", context: request.context, ofKind: .internal)
      let other = tracer.startSpan("GET /health", context: .topLevel, ofKind: .server)
      let operations = open(client)
      #expect(operations.count == 3)
      let outer = try #require(request.operation?.trace)
      let nested = try #require(inner.operation?.trace)
      let unrelated = try #require(other.operation?.trace)
      #expect(nested.traceID == outer.traceID && nested.spanID != outer.spanID)
      #expect(operations.first { $0.trace == nested }?.parentSpanID == outer.spanID)
      #expect(operations.first { $0.trace == outer }?.parentSpanID == nil)
      #expect(unrelated.traceID != outer.traceID)
      #expect(outer.flags == 0, "made up: nobody samples it")
      [inner, request, other].forEach { $0.end() }
      #expect(open(client).isEmpty)
    }
  }

  @Test func aSpanEndedTwiceEndsNoOtherOperation() throws {
    try withClient(ledgerEntries: 8) { client in
      let recording = RecordingTracer()
      let tracer = CrumbsTracer(wrapping: recording, client: client)
      let first = tracer.startSpan("first", context: .topLevel, ofKind: .server)
      first.end()
      // Every entry taken in turn after it, so one of them reuses the first span's entry.
      let later = (0..<8).map { tracer.startSpan("later \($0)", context: .topLevel, ofKind: .server) }
      first.end()
      #expect(open(client).count == 8)
      #expect(first.wrapped.record.withLock { $0.ends } == 2, "forwarded as it came")
      later.forEach { $0.end() }
      #expect(open(client).isEmpty)
    }
  }

  @Test func aReportMadeInASpanCarriesItsOperationsScope() throws {
    try withClient { client in
      client.setUser(id: "session-user")
      let tracer = CrumbsTracer(wrapping: RecordingTracer(), client: client, kinds: nil)
      let request = tracer.startSpan("GET /v1/orders/:id", context: incomingContext(), ofKind: .server)
      request.updateAttributes { attributes in
        attributes["url.path"] = "/v1/orders/42"
        attributes["enduser.id"] = "user-7"
      }
      let query = tracer.startSpan("SELECT", context: request.context, ofKind: .client)
      let requestIDs = try #require(request.wrapped.ids)
      let queryIDs = try #require(query.wrapped.ids)
      // A plain send(error:) finds the operation in the task's ServiceContext (the lookup the
      // tracer installed); the `context:` overload names the span it is given.
      let plain = try ServiceContext.withValue(request.context) {
        try #require(client.send(error: SampleFailure()))
      }
      #expect(plain.report.attributes["enduser.id"] == .string("user-7"))
      #expect(plain.report.attributes["url.path"] == .string("/v1/orders/42"))
      #expect(plain.report.trace?.spanID == requestIDs.spanID)
      let given = try #require(client.send(message: "slow", context: query.context))
      #expect(given.report.trace?.spanID == queryIDs.spanID, "the given span's trace")
      #expect(given.report.attributes["enduser.id"] == .string("session-user"), "no operation is current")
      let nested = try ServiceContext.withValue(query.context) {
        try #require(client.send(message: "slow", context: ServiceContext.current))
      }
      #expect(nested.report.trace?.spanID == queryIDs.spanID)
      #expect(
        nested.report.attributes["enduser.id"] == .string("session-user"), "the query's own scope: none set")
      query.end()
      let after = try ServiceContext.withValue(request.context) { try #require(client.send(message: "done")) }
      #expect(after.report.attributes["enduser.id"] == .string("user-7"))
      request.end()
      let outside = try #require(client.send(message: "later"))
      #expect(
        outside.report.attributes["enduser.id"] == .string("session-user") && outside.report.trace == nil)
    }
  }

  /// Among few or many other attributes, through a span that keeps its attributes or one that
  /// keeps none: each watched key is kept once, at its first value, and a name that only looks
  /// like one is passed over.
  @Test(arguments: [0, 4, 40])
  func theWatchedAttributesAreFoundAmongFewOrManyOthers(others: Int) throws {
    try withClient { client in
      for wrapped in [false, true] {
        func check<Wrapped: Tracer>(_ tracer: CrumbsTracer<Wrapped>) throws {
          let span = tracer.startSpan("GET", context: .topLevel, ofKind: .server)
          defer { span.end() }
          span.updateAttributes { attributes in
            for index in 0..<others { attributes["padding.\(index)"] = index }
            attributes["http.rout3"] = "same length as http.route"
            attributes["enduser.ie"] = "same length as enduser.id"
            attributes["url.path"] = "/v1/orders/42"
          }
          span.updateAttributes { attributes in
            attributes["enduser.id"] = "user-7"
            attributes["url.path"] = "/later"
          }
          span.updateAttributes { attributes in attributes["http.route"] = "/v1/orders/:id" }
          let entry = try #require(open(client).first { $0.name == "GET" })
          #expect(entry.attributes.map(\.key) == ["url.path", "enduser.id", "http.route"])
          #expect(entry.attributes.map(\.value) == ["/v1/orders/42", "user-7", "/v1/orders/:id"])
        }
        // RecordingTracer's span keeps its attributes (each update passes all of them again);
        // NoOpTracer's keeps none (each update passes only its own).
        // http.route watched too, as an app may ask: four keys, the ledger's limit.
        let keys = CrumbsTracer<NoOpTracer>.defaultAttributeKeys + ["http.route"]
        if wrapped {
          try check(CrumbsTracer(wrapping: RecordingTracer(), client: client, attributeKeys: keys))
        } else {
          try check(CrumbsTracer(wrapping: NoOpTracer(), client: client, attributeKeys: keys))
        }
      }
    }
  }

  /// InstrumentationSystem casts the bootstrapped tracer (`any Instrument`) to `any Tracer` for
  /// every span a middleware starts, and a middleware holds the span as `any Span`: a value
  /// wider than an existential's inline buffer (three words) is boxed on the heap each time.
  @Test func theTracerAndItsSpanFitAnExistentialsInlineBuffer() {
    let inlineBuffer = 3 * MemoryLayout<Int>.size
    #expect(MemoryLayout<CrumbsTracer<NoOpTracer>>.size <= inlineBuffer)
    #expect(MemoryLayout<CrumbsTracer<RecordingTracer>>.size <= inlineBuffer)
    #expect(MemoryLayout<CrumbsSpan<NoOpTracer.NoOpSpan>>.size <= inlineBuffer)
  }

  @Test func aFullLedgerCountsTheSpanAndStillForwardsIt() throws {
    try withClient(ledgerEntries: 8) { client in
      let tracer = CrumbsTracer(wrapping: RecordingTracer(), client: client)
      let held = (0..<8).map { tracer.startSpan("held \($0)", context: .topLevel, ofKind: .server) }
      let extra = tracer.startSpan("extra", context: .topLevel, ofKind: .server)
      #expect(held.allSatisfy { $0.operation?.isRecorded == true })
      #expect(extra.operation?.isRecorded == false)
      extra.operationName = "renamed"
      extra.attributes["url.path"] = "/x"
      #expect(extra.wrapped.record.withLock { $0.name } == "renamed")
      extra.end()
      #expect(extra.wrapped.record.withLock { $0.ends } == 1)
      let ledger = try #require(client.ring.snapshot().ledger)
      #expect(ledger.open.count == 8 && ledger.overflow == 1)
      #expect(!ledger.open.contains { $0.name == "renamed" })
      held.forEach { $0.end() }
      #expect(open(client).isEmpty)
    }
  }
}

private struct SampleFailure: Error {}
