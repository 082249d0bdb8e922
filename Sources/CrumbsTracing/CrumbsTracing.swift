// CrumbsTracing.swift — breadcrumbs and non-fatal reports joined to the trace they were made in,
// read from swift-distributed-tracing's ServiceContext. An optional product: the core links no
// tracing, and a service that traces adds `CrumbsTracing` beside `Crumbs`.
//
// How the ids are found: the installed instrument (swift-otel's tracer, or any other) injects
// the context into a carrier, as it would for an outgoing request, and the W3C `traceparent` it
// writes is read back (TraceContext(traceparent:)). No tracer-specific type is named, so any
// instrument that propagates W3C trace context works; one that does not gives no trace.
//
// Entry points: TraceContext(_:instrument:), TraceContext.current;
// CrumbsClient.addBreadcrumb(_:level:type:attributes:context:) and
// send(error:…context:) / send(message:…context:), which record the trace as
// TraceContext's reserved attributes (the breadcrumb's slot; the report's `trace`); the reports
// are also scoped to the operation CrumbsTracer keeps in the context (its user, attributes).
// Not signal-safe.

import Crumbs
import Instrumentation
import ServiceContextModule

extension TraceContext {
  /// The span current in `context`, as `instrument` propagates it (its `traceparent`); nil when
  /// the context holds no span or the instrument writes no W3C trace context.
  public init?(_ context: ServiceContext, instrument: any Instrument = InstrumentationSystem.instrument) {
    guard let ids = TraceIDs(context, instrument: instrument) else { return nil }
    self = ids.context
  }

  /// The span of the task-local `ServiceContext.current`, if any.
  public static var current: TraceContext? { ServiceContext.current.flatMap { TraceContext($0) } }
}

extension TraceIDs {
  /// `TraceContext(_:instrument:)` as numbers, with no dictionary and no hex string made (the
  /// instrument may make its header): how SpanIDReader asks, and checks what it learned.
  init?(_ context: ServiceContext, instrument: some Instrument) {
    // An instrument keeps its span in the context: an empty one (a request that came with no
    // trace, under NoOpTracer) holds none, and asking would cost a call for nothing.
    guard !context.isEmpty else { return nil }
    var carrier = TraceparentCarrier()
    instrument.inject(context, into: &carrier, using: TraceparentCarrier.Collector())
    guard let header = carrier.traceparent, let ids = TraceIDs(traceparent: header) else { return nil }
    self = ids
  }
}

/// What an instrument injects, of which only `traceparent` is kept (its name in any case: HTTP
/// header names are case-insensitive).
struct TraceparentCarrier {
  var traceparent: String?

  struct Collector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout TraceparentCarrier) {
      if Self.isTraceparent(key) { carrier.traceparent = value }
    }

    /// `key` is `traceparent` in any case, compared byte by byte (no lowercased copy).
    static func isTraceparent(_ key: String) -> Bool {
      let name = "traceparent".utf8
      return key.utf8.count == name.count && zip(key.utf8, name).allSatisfy { $0 | 0x20 == $1 }
    }
  }
}

extension CrumbsClient {
  /// `addBreadcrumb`, carrying the trace and span current in `context` (default: the task's).
  /// A breadcrumb made outside a span is recorded as `addBreadcrumb` records it. The attributes
  /// are run-time values: this path allocates, unlike a literal `addBreadcrumb`.
  public func addBreadcrumb(
    _ message: String, level: BreadcrumbLevel = .info, type: BreadcrumbType = .manual,
    attributes: [String: String] = [:], context: ServiceContext?
  ) {
    var pairs = TraceContext.attributes(of: context)
    pairs += attributes.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }
    addBreadcrumb(message, level: level, type: type, attributes: BreadcrumbAttributes(pairs))
  }

  /// `send(error:)`, the report joined to the span current in `context` (`CrashReport.trace`,
  /// and the OTLP record's trace fields), and scoped to the operation CrumbsTracer keeps in it
  /// (its user and attributes), if any.
  @discardableResult
  public func send(
    error: any Error, attributes: [String: String] = [:], attachments: [String] = [], context: ServiceContext?
  ) -> StoredReport? {
    CrumbsOperation.$current.withValue(context.flatMap { CrumbsOperation($0) } ?? CrumbsOperation.current) {
      send(error: error, attributes: attributes.traced(context), attachments: attachments)
    }
  }

  /// `send(message:)`, joined to the span current in `context` and scoped to its operation.
  @discardableResult
  public func send(
    message: String, attributes: [String: String] = [:], attachments: [String] = [], context: ServiceContext?
  ) -> StoredReport? {
    CrumbsOperation.$current.withValue(context.flatMap { CrumbsOperation($0) } ?? CrumbsOperation.current) {
      send(message: message, attributes: attributes.traced(context), attachments: attachments)
    }
  }
}

extension TraceContext {
  /// The reserved attributes of the span current in `context` (as the instrument propagates it,
  /// else the trace of the operation CrumbsTracer keeps in it); none outside a span.
  static func attributes(of context: ServiceContext?) -> [(key: String, value: String)] {
    guard let context else { return [] }
    return (TraceContext(context) ?? CrumbsOperation(context)?.trace)?.attributes ?? []
  }
}

extension [String: String] {
  /// These attributes with the reserved trace attributes of `context` over them.
  fileprivate func traced(_ context: ServiceContext?) -> [String: String] {
    var attributes = self
    for (key, value) in TraceContext.attributes(of: context) { attributes[key] = value }
    return attributes
  }
}
