// CrumbsClient+Operations.swift — operations (requests, jobs) open in the in-flight ledger, so
// that every death lists what was running: beginOperation → CrumbsOperation (rename,
// setAttribute, setUser, end), or withOperation around a body, which also makes it the task's
// current operation (CrumbsOperation.current) for the reports made inside it. The ledger is in
// the ring file (BreadcrumbRing+Ledger.swift, crumbs_ledger.h); each call is lock-free,
// allocates nothing for a native name and makes no system call.

import CrumbsRecorder

/// An operation open in the client's in-flight ledger until `end()`. Copies share the entry: the
/// first `end()` ends it, later ones do nothing.
///
/// Its scope (user, attributes) lives in its ledger entry, nowhere else: a non-fatal report made
/// while it is current carries them, and a death lists them with it. An operation the ledger had
/// no room for keeps only its trace.
public struct CrumbsOperation: Sendable {
  /// The ring, kept only when it was never published: a client's ring is (installed), so its
  /// memory stays for the process and the entry alone reaches it, with no reference count
  /// touched by begin and end (two threads would contend on the ring's).
  @usableFromInline let keeper: BreadcrumbRing?
  @usableFromInline let entry: LedgerEntry
  /// The trace it was begun in, its span id the operation's own, as numbers: a string is made
  /// only when `trace` is asked for.
  package let ids: TraceIDs?

  @usableFromInline init(keeper: BreadcrumbRing?, entry: LedgerEntry, ids: TraceIDs?) {
    self.keeper = keeper
    self.entry = entry
    self.ids = ids
  }

  /// The trace it was begun in, its span id the operation's own.
  public var trace: TraceContext? { ids?.context }

  /// The operation the current task runs in: set by `withOperation` for its body. (CrumbsTracer
  /// carries the span's operation in the `ServiceContext` instead.)
  @TaskLocal public static var current: CrumbsOperation?

  /// The attribute `setUser(id:)` sets: OpenTelemetry's `enduser.id`, as the client's.
  public static let userIDKey = CrumbsClient.userIDKey

  /// False when the ledger was full (the operation is counted, not held) or the ring has none.
  public var isRecorded: Bool { entry.isRecorded }

  /// Renames it, e.g. to its route once routing is done (`GET /v1/orders/:id`: a template, never
  /// a path with ids in it).
  public func rename(_ name: String) { entry.rename(to: name) }

  /// A short attribute (at most four an operation; keys and values cut to fit 288 bytes). The
  /// ledger only appends: a key set twice is held twice, and a report reads the last value.
  public func setAttribute(_ key: String, _ value: String) {
    entry.addAttribute(key: key, value: value)
  }

  /// The user this operation serves (`enduser.id`, one of its four attributes): a non-fatal
  /// report made inside it carries this user over the client's `setUser(id:)`, and a death lists
  /// it with the operation.
  public func setUser(id: String) { setAttribute(Self.userIDKey, id) }

  /// What the ledger holds for it now (name, ids, attributes); nil once ended or when it was
  /// never recorded.
  public var contents: OpenOperation? { entry.contents }

  /// Ends it: it is no longer open.
  @inlinable public func end() { entry.end() }
}

extension CrumbsClient {
  /// Begins an operation named `name` (a route template or a job's name), of `kind`, in the trace
  /// `trace` (its span id is the operation's own), a child of `parentSpanID` when given. End it
  /// with `end()`; a crash, a kill or a hang before that lists it in the report.
  @inlinable public func beginOperation(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil
  ) -> CrumbsOperation {
    beginOperation(
      name, kind: kind, ids: trace.flatMap(TraceIDs.init), parentSpanID: TraceIDs.spanID(hex: parentSpanID))
  }

  /// `beginOperation` with the ids as numbers (`parentSpanID` 0: none): what CrumbsTracer calls
  /// for every span, parsing and making no hex.
  @inlinable package func beginOperation(
    _ name: String, kind: OpenOperation.Kind, ids: TraceIDs?, parentSpanID: UInt64
  ) -> CrumbsOperation {
    CrumbsOperation(
      keeper: ring.isPublished ? nil : ring,
      entry: ring.beginOperation(name, kind: kind, ids: ids, parentSpanID: parentSpanID), ids: ids)
  }

  /// The open operation of the span `ids` names, else (unless `exactly`) the one of its trace
  /// begun last, with the span's flags: how CrumbsTracer finds a span's operation when the
  /// span's context does not carry it. One pass over the ledger: not for every span.
  package func openOperation(of ids: TraceIDs, exactly: Bool = false) -> CrumbsOperation? {
    guard let found = ring.findOperation(ids), found.exact || !exactly else { return nil }
    var foundIDs = ids
    foundIDs.spanID = found.spanID
    return CrumbsOperation(keeper: ring.isPublished ? nil : ring, entry: found.entry, ids: foundIDs)
  }

  /// Runs `body` as an operation: begun before it, ended after it returns or throws, and the
  /// task's current operation (`CrumbsOperation.current`) while it runs.
  public func withOperation<Result>(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil,
    _ body: (CrumbsOperation) async throws -> Result
  ) async rethrows -> Result {
    let operation = beginOperation(name, kind: kind, trace: trace, parentSpanID: parentSpanID)
    defer { operation.end() }
    return try await CrumbsOperation.$current.withValue(operation) { try await body(operation) }
  }

  /// The synchronous `withOperation`.
  public func withOperation<Result>(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil,
    _ body: (CrumbsOperation) throws -> Result
  ) rethrows -> Result {
    let operation = beginOperation(name, kind: kind, trace: trace, parentSpanID: parentSpanID)
    defer { operation.end() }
    return try CrumbsOperation.$current.withValue(operation) { try body(operation) }
  }
}
