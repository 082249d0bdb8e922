// CrumbsTracer.swift — a swift-distributed-tracing `Tracer` that puts spans in the in-flight
// ledger (CrumbsClient.beginOperation) and forwards everything to the tracer it wraps
// (swift-otel's, or NoOpTracer), so a server's own tracing middleware feeds the ledger:
//
//   InstrumentationSystem.bootstrap(CrumbsTracer(wrapping: otelTracer, client: crumbs))
//
// Entry points in call order: CrumbsTracer.startSpan → CrumbsSpan (operationName's setter
// renames the entry, the attributes' setter keeps the ones the tracer watches) → end.
//
// Ids: the wrapped tracer's own, read from the W3C `traceparent` it injects for the new span
// (trace and span id) and for the context it started in (the parent span id), as TraceContext
// reads them: any tracer that propagates W3C trace context works. A tracer that gives none (the
// NoOpTracer) still gets an entry with ids: the trace of the operation the context already
// carries (a span nested in another), else a new random trace id, and a new random span id —
// ids no trace backend knows, which still tell a report's operations apart and join them to
// the non-fatal reports made in them.
//
// The span's context carries its operation (CrumbsOperationKey): nested spans find their
// parent through it, and a non-fatal report made in it (send(error:) with or without
// `context:`) carries its trace, user and attributes. Not signal-safe.

import Crumbs
import Instrumentation
import ServiceContextModule
import Synchronization
import Tracing

/// The operation a span of CrumbsTracer holds in the ledger, in that span's context.
public enum CrumbsOperationKey: ServiceContextKey {
  public typealias Value = CrumbsOperation
  public static var nameOverride: String? { "crumbs-operation" }
}

extension CrumbsOperation {
  /// The operation CrumbsTracer keeps in `context` (the innermost recorded span's), if any.
  public init?(_ context: ServiceContext) {
    guard let operation = context[CrumbsOperationKey.self] else { return nil }
    self = operation
  }
}

/// A `Tracer` that records the spans of some kinds (`.server` by default) as open operations in
/// the client's in-flight ledger, so every death lists the requests it cut, and forwards every
/// span, event and attribute to the tracer it wraps.
public struct CrumbsTracer<Wrapped: Tracer>: Tracer {
  public typealias Span = CrumbsSpan<Wrapped.Span>

  /// The span attributes kept in a ledger entry, in this order, while there is room: at most
  /// four a entry (the ledger's limit), each kept at its first value (the ledger only appends).
  /// `http.route` is last set by Hummingbird (when the handler returns) and first by Vapor.
  public static var defaultAttributeKeys: [String] {
    ["http.request.method", "url.path", "http.route", CrumbsOperation.userIDKey]
  }

  public let wrapped: Wrapped
  public let client: CrumbsClient
  /// The span kinds recorded; nil: every span.
  public let kinds: Set<SpanKind>?
  /// The span attributes a ledger entry keeps (`defaultAttributeKeys`).
  public let attributeKeys: [String]

  /// Wraps `wrapped`: spans of `kinds` (nil: all) become operations of `client`'s ledger, with
  /// the span attributes named by `attributeKeys`. Installs the client's lookup of the current
  /// operation in the task's `ServiceContext`, so `send(error:)` inside a span carries its scope.
  public init(
    wrapping wrapped: Wrapped, client: CrumbsClient, kinds: Set<SpanKind>? = [.server],
    attributeKeys: [String] = Self.defaultAttributeKeys
  ) {
    self.wrapped = wrapped
    self.client = client
    self.kinds = kinds
    self.attributeKeys = Array(attributeKeys.prefix(4))
    client.setOperationLookup { ServiceContext.current.flatMap { CrumbsOperation($0) } }
  }

  public func startSpan<Instant: TracerInstant>(
    _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
    at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
  ) -> CrumbsSpan<Wrapped.Span> {
    let parent = context()
    let span = wrapped.startSpan(
      operationName, context: parent, ofKind: kind, at: instant(), function: function, file: fileID,
      line: line)
    guard kinds?.contains(kind) ?? true else { return CrumbsSpan(span, context: span.context) }
    let ids = ids(of: span.context, parent: parent)
    let operation = client.beginOperation(
      operationName, kind: OpenOperation.Kind(kind), trace: ids.trace, parentSpanID: ids.parentSpanID)
    var spanContext = span.context
    spanContext[CrumbsOperationKey.self] = operation
    let recorded = CrumbsSpan(span, context: spanContext, operation: operation, keys: attributeKeys)
    recorded.keep(span.attributes)
    return recorded
  }

  /// The new span's trace and span id, and its parent's span id: from the wrapped tracer's W3C
  /// `traceparent`, else made up (see the top of this file).
  func ids(of context: ServiceContext, parent: ServiceContext) -> (trace: TraceContext, parentSpanID: String?)
  {
    let outer = TraceContext(parent, instrument: wrapped) ?? CrumbsOperation(parent)?.trace
    if let own = TraceContext(context, instrument: wrapped), own != outer {
      return (own, outer.map(\.spanID))
    }
    let traceID =
      outer?.traceID ?? Self.hex(.random(in: 1...UInt64.max)) + Self.hex(.random(in: 0...UInt64.max))
    // Well-formed by construction: 32 and 16 hex digits, not all zero.
    let trace = TraceContext(traceID: traceID, spanID: Self.hex(.random(in: 1...UInt64.max)))!
    return (trace, outer.map(\.spanID))
  }

  static func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.utf8.count) + digits
  }

  public func activeSpan(identifiedBy context: ServiceContext) -> CrumbsSpan<Wrapped.Span>? {
    guard let span = wrapped.activeSpan(identifiedBy: context) else { return nil }
    // The context's operation is this span's own only when their ids agree: an unrecorded span
    // nested in a recorded one carries its parent's operation, which it must not end.
    let own = CrumbsOperation(context).flatMap { operation in
      operation.trace != nil && operation.trace == TraceContext(span.context, instrument: wrapped)
        ? operation : nil
    }
    var spanContext = span.context
    spanContext[CrumbsOperationKey.self] = own ?? CrumbsOperation(context)
    return CrumbsSpan(span, context: spanContext, operation: own, keys: own == nil ? [] : attributeKeys)
  }

  @available(*, deprecated)
  public func forceFlush() { wrapped.forceFlush() }

  public func inject<Carrier, Inject: Injector>(
    _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
  ) where Inject.Carrier == Carrier {
    wrapped.inject(context, into: &carrier, using: injector)
  }

  public func extract<Carrier, Extract: Extractor>(
    _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
  ) where Extract.Carrier == Carrier {
    wrapped.extract(carrier, into: &context, using: extractor)
  }
}

/// A span of CrumbsTracer: the wrapped tracer's span, and the ledger operation it holds open
/// (none for a kind the tracer does not record). Everything is forwarded to the wrapped span;
/// renaming it renames the operation, ending it ends the operation.
public struct CrumbsSpan<Wrapped: Tracing.Span>: Tracing.Span {
  public let wrapped: Wrapped
  /// The wrapped span's context, with the operation (CrumbsOperationKey) when recorded.
  public let context: ServiceContext
  /// The ledger operation, nil when the span's kind is not recorded.
  public let operation: CrumbsOperation?
  let kept: KeptAttributes?

  init(_ wrapped: Wrapped, context: ServiceContext, operation: CrumbsOperation? = nil, keys: [String] = []) {
    self.wrapped = wrapped
    self.context = context
    self.operation = operation
    self.kept = operation.map { _ in KeptAttributes(keys: keys) }
  }

  public var operationName: String {
    get { wrapped.operationName }
    nonmutating set {
      wrapped.operationName = newValue
      operation?.rename(newValue)
    }
  }

  public var attributes: SpanAttributes {
    get { wrapped.attributes }
    nonmutating set {
      wrapped.attributes = newValue
      keep(newValue)
    }
  }

  /// Adds to the entry the watched attributes not kept yet.
  func keep(_ attributes: SpanAttributes) {
    guard let operation, let kept else { return }
    for (key, value) in kept.take(from: attributes) { operation.setAttribute(key, value) }
  }

  public var isRecording: Bool { wrapped.isRecording }
  public func setStatus(_ status: SpanStatus) { wrapped.setStatus(status) }
  public func addEvent(_ event: SpanEvent) { wrapped.addEvent(event) }
  public func addLink(_ link: SpanLink) { wrapped.addLink(link) }

  public func recordError<Instant: TracerInstant>(
    _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
  ) {
    wrapped.recordError(error, attributes: attributes, at: instant())
  }

  /// Ends the operation, then the wrapped span. A second end ends no other operation (the
  /// ledger's handle is of this one only) and is forwarded as it came.
  public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
    operation?.end()
    wrapped.end(at: instant())
  }
}

/// Which watched attributes a span's entry already holds: each key once, at its first value.
final class KeptAttributes: Sendable {
  let keys: [String]
  let taken = Mutex<UInt8>(0)

  init(keys: [String]) { self.keys = keys }

  /// The watched attributes in `attributes` not kept yet, as strings, marked kept.
  func take(from attributes: SpanAttributes) -> [(String, String)] {
    var found: [(bit: UInt8, key: String, value: String)] = []
    for (index, key) in keys.enumerated() {
      if let value = attributes.get(key).flatMap(Self.text) { found.append((1 << index, key, value)) }
    }
    guard !found.isEmpty else { return [] }
    return taken.withLock { taken in
      found.compactMap { item in
        guard taken & item.bit == 0 else { return nil }
        taken |= item.bit
        return (item.key, item.value)
      }
    }
  }

  /// A scalar attribute as text; nil for arrays.
  static func text(_ attribute: SpanAttribute) -> String? {
    switch attribute {
    case .string(let value): value
    case .int32(let value): String(value)
    case .int64(let value): String(value)
    case .double(let value): String(value)
    case .bool(let value): String(value)
    case .stringConvertible(let value): value.description
    default: nil
    }
  }
}

extension OpenOperation.Kind {
  /// The ledger's kind of a span kind: client and producer spans are recorded as internal.
  init(_ kind: SpanKind) {
    switch kind {
    case .server: self = .server
    case .consumer: self = .consumer
    default: self = .internal
    }
  }
}
