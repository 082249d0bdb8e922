// CrumbsTracer.swift — a swift-distributed-tracing `Tracer` that puts spans in the in-flight
// ledger (CrumbsClient.beginOperation) and forwards everything to the tracer it wraps
// (swift-otel's, or NoOpTracer), so a server's own tracing middleware feeds the ledger:
//
//   InstrumentationSystem.bootstrap(CrumbsTracer(wrapping: otelTracer, client: crumbs))
//
// Entry points in call order: CrumbsTracer.startSpan → CrumbsSpan (operationName's setter
// renames the entry, the attributes' setter keeps the ones the tracer watches) → end.
//
// Ids: the wrapped tracer's own, as the W3C `traceparent` it injects for the new span (trace
// and span id) and for the context it started in (the parent span id) gives them: any tracer
// that propagates W3C trace context works. Once SpanIDReader has learned where in the context
// the tracer keeps them (checked against that header), they are read there, with no inject.
// A tracer that gives none (the NoOpTracer) still gets an entry with ids: the trace of the
// operation the context already carries (a span nested in another), else a new trace id, and a
// new span id, made up with no system call (TraceIDs.madeUp) — ids no trace backend knows,
// which still tell a report's operations apart and join them to the non-fatal reports made in
// them.
//
// Finding a span's operation (CrumbsOperation(context): a non-fatal report made in the span,
// with or without `send(error:context:)`, carries its trace, user and attributes):
//   - a span with ids of its own: by them, in the ledger (OperationFinders: each tracer looks up
//     the context's ids in its client's ledger, crumbs_ledger_find), when a report asks, never
//     for every span. The span's context is the wrapped span's own, with nothing added: a copy
//     of its storage for every span was a fifth of what CrumbsTracer cost a request. An
//     unrecorded span nested in a recorded one (a client span in a request) has no operation
//     of its own: the open operation of its trace begun last is taken, which is the request's
//     unless recorded spans of one trace are open side by side in this process (then, the newest).
//   - a span with made-up ids (NoOpTracer): its context carries its operation (SpanRecordKey),
//     the only place they are; nested spans inherit it, and find their parent through it.
//
// Cost: every span of a recorded kind pays one ledger begin and end and one object (SpanRecord,
// shared by the span's copies); with made-up ids, the context's entry too. No string is made for
// the ids once their place is learned (until then, the wrapped tracer makes its header).
// Benchmarks/Sources/TracerFigures measures it against NoOpTracer. Not signal-safe.

import Crumbs
import Instrumentation
import ServiceContextModule
import Synchronization
import Tracing

/// The record (operation) of the innermost span CrumbsTracer recorded with made-up ids, in that
/// span's context: a reference, which the context holds with no box of its own. Read with
/// `CrumbsOperation(_:)`. A span with ids of its own is found by them instead (OperationFinders).
enum SpanRecordKey: ServiceContextKey {
  typealias Value = SpanRecord
  static var nameOverride: String? { "crumbs-operation" }
}

extension CrumbsOperation {
  /// The operation of the span current in `context`, as CrumbsTracer recorded it: the span's
  /// own; for a span of a kind not recorded, the innermost recorded one's (by made-up ids) or the
  /// open one of its trace begun last (by the tracer's ids). Nil outside a recorded span, and
  /// once the span has ended (by the tracer's ids). Looks the ledger over when the tracer gives
  /// ids: for a report, not for every span.
  public init?(_ context: ServiceContext) {
    if let record = context[SpanRecordKey.self] {
      self = record.operation
    } else if let found = OperationFinders.operation(in: context) {
      self = found
    } else {
      return nil
    }
  }
}

/// Finds the operation of the span in a context by the span's ids, in a client's ledger: what
/// each CrumbsTracer's settings do for `CrumbsOperation(_:)`.
protocol OperationFinder: AnyObject, Sendable {
  func operation(in context: ServiceContext) -> CrumbsOperation?
}

/// The live tracers' finders (each held weakly: a tracer dropped is passed over, and pruned when
/// the next one registers).
enum OperationFinders {
  struct Weak: Sendable {
    weak var finder: (any OperationFinder)?
  }

  private static let finders = Mutex<[Weak]>([])

  static func register(_ finder: any OperationFinder) {
    finders.withLock { finders in
      finders.removeAll { $0.finder == nil }
      finders.append(Weak(finder: finder))
    }
  }

  /// The first operation a live tracer finds for the span in `context`.
  static func operation(in context: ServiceContext) -> CrumbsOperation? {
    guard !context.isEmpty else { return nil }
    let live = finders.withLock { $0.compactMap(\.finder) }
    for finder in live {
      if let operation = finder.operation(in: context) { return operation }
    }
    return nil
  }
}

/// A `Tracer` that records the spans of some kinds (`.server` by default) as open operations in
/// the client's in-flight ledger, so every death lists the requests it cut, and forwards every
/// span, event and attribute to the tracer it wraps.
///
/// One reference wide, whatever it wraps: InstrumentationSystem keeps the bootstrapped tracer as
/// `any Instrument` and casts it to `any Tracer` (and `any LegacyTracer`) for every span a
/// middleware starts; a value wider than an existential's three-word inline buffer would be
/// boxed on the heap by each of those casts.
public struct CrumbsTracer<Wrapped: Tracer>: Tracer {
  public typealias Span = CrumbsSpan<Wrapped.Span>

  /// The span attributes kept in a ledger entry, in this order, while there is room: at most
  /// four an entry (the ledger's limit), each kept at its first value (the ledger only appends).
  /// Each watched key costs a look-up in every attribute update until it is found, so the list
  /// is short. `http.route` is not in it: it repeats the route the entry's name has from the
  /// moment the framework knows it (Vapor names the span by it at the start; Hummingbird sets it
  /// and renames the span to the route together, when the handler returns, just before the span
  /// ends). Pass `attributeKeys:` to watch it anyway.
  public static var defaultAttributeKeys: [String] {
    ["http.request.method", "url.path", CrumbsOperation.userIDKey]
  }

  /// What the tracer was made with, behind the one reference the tracer is.
  final class Settings: OperationFinder {
    let wrapped: Wrapped
    let client: CrumbsClient
    let kinds: Set<SpanKind>?
    let attributeKeys: [String]
    let recordsServer: Bool
    /// Reads the spans' ids, learning where the wrapped tracer keeps them.
    let ids = SpanIDReader()

    init(wrapped: Wrapped, client: CrumbsClient, kinds: Set<SpanKind>?, attributeKeys: [String]) {
      self.wrapped = wrapped
      self.client = client
      self.kinds = kinds
      self.attributeKeys = Array(attributeKeys.prefix(4))
      self.recordsServer = kinds?.contains(.server) ?? true
    }

    /// The operation of the span in `context` found by the span's ids in the client's ledger.
    func operation(in context: ServiceContext) -> CrumbsOperation? {
      guard let spanIDs = ids.ids(in: context, of: wrapped) else { return nil }
      return client.openOperation(of: spanIDs)
    }
  }

  /// The tracer's own methods use `settings.wrapped`, not `wrapped`: the computed property
  /// copies the wrapped tracer out (a retain and a release) for every call.
  let settings: Settings

  public var wrapped: Wrapped { settings.wrapped }
  public var client: CrumbsClient { settings.client }
  /// The span kinds recorded; nil: every span.
  public var kinds: Set<SpanKind>? { settings.kinds }
  /// The span attributes a ledger entry keeps (`defaultAttributeKeys`).
  public var attributeKeys: [String] { settings.attributeKeys }

  /// Wraps `wrapped`: spans of `kinds` (nil: all) become operations of `client`'s ledger, with
  /// the span attributes named by `attributeKeys`. Installs the client's lookup of the current
  /// operation in the task's `ServiceContext`, so `send(error:)` inside a span carries its scope.
  public init(
    wrapping wrapped: Wrapped, client: CrumbsClient, kinds: Set<SpanKind>? = [.server],
    attributeKeys: [String] = Self.defaultAttributeKeys
  ) {
    settings = Settings(wrapped: wrapped, client: client, kinds: kinds, attributeKeys: attributeKeys)
    OperationFinders.register(settings)
    client.setOperationLookup { ServiceContext.current.flatMap { CrumbsOperation($0) } }
  }

  public func startSpan<Instant: TracerInstant>(
    _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
    at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
  ) -> CrumbsSpan<Wrapped.Span> {
    let parent = context()
    let span = settings.wrapped.startSpan(
      operationName, context: parent, ofKind: kind, at: instant(), function: function, file: fileID,
      line: line)
    guard records(kind) else { return CrumbsSpan(span, context: span.context) }
    let outer =
      settings.ids.ids(in: parent, of: settings.wrapped) ?? parent[SpanRecordKey.self]?.operation.ids
    let own = settings.ids.ids(in: span.context, of: settings.wrapped).flatMap { $0 != outer ? $0 : nil }
    let operation = settings.client.beginOperation(
      operationName, kind: OpenOperation.Kind(kind), ids: own ?? .madeUp(in: outer),
      parentSpanID: outer?.spanID ?? 0)
    let record = SpanRecord(operation, keys: settings.attributeKeys)
    let recorded: CrumbsSpan<Wrapped.Span>
    if own != nil {
      // Found by its ids when asked (OperationFinders): the context stays the wrapped span's.
      recorded = CrumbsSpan(span, context: span.context, record: record)
    } else {
      var spanContext = span.context
      spanContext[SpanRecordKey.self] = record
      recorded = CrumbsSpan(span, context: spanContext, record: record)
    }
    recorded.keep(span.attributes)
    return recorded
  }

  /// Whether spans of `kind` are recorded.
  func records(_ kind: SpanKind) -> Bool {
    guard let kinds = settings.kinds else { return true }
    // A switch, not the set's hashing: this runs for every span.
    switch kind {
    case .server: return settings.recordsServer
    default: return kinds.contains(kind)
    }
  }

  public func activeSpan(identifiedBy context: ServiceContext) -> CrumbsSpan<Wrapped.Span>? {
    guard let span = settings.wrapped.activeSpan(identifiedBy: context) else { return nil }
    let spanIDs = settings.ids.ids(in: span.context, of: settings.wrapped)
    // Made-up ids: the context's operation is this span's own only when their ids agree (an
    // unrecorded span nested in a recorded one carries its parent's, which it must not end).
    if let record = context[SpanRecordKey.self] {
      var spanContext = span.context
      spanContext[SpanRecordKey.self] = record
      let own = record.operation.ids != nil && record.operation.ids == spanIDs
      return CrumbsSpan(span, context: spanContext, record: own ? record : nil)
    }
    // The tracer's ids: the span's own operation, if it is open (never its trace's other ones).
    let operation = spanIDs.flatMap { settings.client.openOperation(of: $0, exactly: true) }
    let record = operation.map { SpanRecord($0, keys: settings.attributeKeys, held: $0.contents) }
    return CrumbsSpan(span, context: span.context, record: record)
  }

  @available(*, deprecated)
  public func forceFlush() { settings.wrapped.forceFlush() }

  public func inject<Carrier, Inject: Injector>(
    _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
  ) where Inject.Carrier == Carrier {
    settings.wrapped.inject(context, into: &carrier, using: injector)
  }

  public func extract<Carrier, Extract: Extractor>(
    _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
  ) where Extract.Carrier == Carrier {
    settings.wrapped.extract(carrier, into: &context, using: extractor)
  }
}

/// A span of CrumbsTracer: the wrapped tracer's span, and the ledger operation it holds open
/// (none for a kind the tracer does not record). Everything is forwarded to the wrapped span;
/// renaming it renames the operation, ending it ends the operation.
///
/// Three words over the wrapped span's own (its context, and one reference for the operation):
/// with NoOpTracer's span it fits an existential's inline buffer, so a middleware that holds it
/// as `any Span` allocates no box for it.
public struct CrumbsSpan<Wrapped: Tracing.Span>: Tracing.Span {
  public let wrapped: Wrapped
  /// The wrapped span's context, with the operation (SpanRecordKey) when recorded.
  public let context: ServiceContext
  let record: SpanRecord?

  init(_ wrapped: Wrapped, context: ServiceContext, record: SpanRecord? = nil) {
    self.wrapped = wrapped
    self.context = context
    self.record = record
  }

  /// The ledger operation, nil when the span's kind is not recorded.
  public var operation: CrumbsOperation? { record?.operation }

  public var operationName: String {
    get { wrapped.operationName }
    nonmutating set {
      wrapped.operationName = newValue
      record?.operation.rename(newValue)
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
  func keep(_ attributes: SpanAttributes) { record?.keep(attributes) }

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
    record?.operation.end()
    wrapped.end(at: instant())
  }
}

/// A recorded span's operation, and which of the watched attributes its entry already holds:
/// each key once, at its first value. Shared by the span's copies.
final class SpanRecord: Sendable {
  let operation: CrumbsOperation
  let keys: [String]
  /// Bit i: keys[i] is in the entry.
  let taken = Atomic<UInt8>(0)
  /// `taken` once every key is in the entry.
  let allTaken: UInt8

  /// `held`: what the entry holds already (a span found again by `activeSpan`), whose watched
  /// keys are not added twice.
  init(_ operation: CrumbsOperation, keys: [String], held: OpenOperation? = nil) {
    self.operation = operation
    self.keys = keys
    allTaken = UInt8(truncatingIfNeeded: (1 << keys.count) - 1)
    if let held {
      let bits = keys.indices.reduce(UInt8(0)) { bits, index in
        held.attributes.contains { $0.key == keys[index] } ? bits | 1 << index : bits
      }
      taken.store(bits, ordering: .relaxed)
    }
  }

  /// Adds to the entry the watched attributes in `attributes` it does not hold yet. Looks up
  /// only the keys not taken (a span's later updates mostly find theirs held already), and none
  /// once all are: each look-up hashes the key, in every attribute update of every span.
  func keep(_ attributes: SpanAttributes) {
    let held = taken.load(ordering: .relaxed)
    guard held != allTaken, !attributes.isEmpty else { return }
    for index in 0..<keys.count where held & (1 << index) == 0 {
      guard let attribute = attributes.get(keys[index]), let value = Self.text(attribute) else { continue }
      // Two threads updating one span: the first to mark the key adds it.
      let bit = UInt8(1) << index
      if taken.bitwiseOr(bit, ordering: .relaxed).oldValue & bit == 0 {
        operation.setAttribute(keys[index], value)
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
