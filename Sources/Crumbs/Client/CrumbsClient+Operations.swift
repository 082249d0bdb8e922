// CrumbsClient+Operations.swift — operations (requests, jobs) open in the in-flight ledger, so
// that every death lists what was running: beginOperation → CrumbsOperation (rename,
// setAttribute, end), or withOperation around a body. The ledger is in the ring file
// (BreadcrumbRing+Ledger.swift, crumbs_ledger.h); each call is lock-free, allocates nothing for
// a native name and makes no system call.

import CrumbsRecorder

/// An operation open in the client's in-flight ledger until `end()`. Copies share the entry: the
/// first `end()` ends it, later ones do nothing.
public struct CrumbsOperation: Sendable {
  let ring: BreadcrumbRing
  let entry: LedgerEntry

  /// False when the ledger was full (the operation is counted, not held) or the ring has none.
  public var isRecorded: Bool { entry.isRecorded }

  /// Renames it, e.g. to its route once routing is done (`GET /v1/orders/:id`: a template, never
  /// a path with ids in it).
  public func rename(_ name: String) { ring.renameOperation(entry, to: name) }

  /// A short attribute (at most four an operation; keys and values cut to fit 288 bytes).
  public func setAttribute(_ key: String, _ value: String) {
    ring.addOperationAttribute(entry, key: key, value: value)
  }

  /// Ends it: it is no longer open.
  public func end() { ring.endOperation(entry) }
}

extension CrumbsClient {
  /// Begins an operation named `name` (a route template or a job's name), of `kind`, in the trace
  /// `trace` (its span id is the operation's own), a child of `parentSpanID` when given. End it
  /// with `end()`; a crash, a kill or a hang before that lists it in the report.
  public func beginOperation(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil
  ) -> CrumbsOperation {
    CrumbsOperation(
      ring: ring, entry: ring.beginOperation(name, kind: kind, trace: trace, parentSpanID: parentSpanID))
  }

  /// Runs `body` as an operation: begun before it, ended after it returns or throws.
  public func withOperation<Result>(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil,
    _ body: (CrumbsOperation) async throws -> Result
  ) async rethrows -> Result {
    let operation = beginOperation(name, kind: kind, trace: trace, parentSpanID: parentSpanID)
    defer { operation.end() }
    return try await body(operation)
  }

  /// The synchronous `withOperation`.
  public func withOperation<Result>(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil,
    _ body: (CrumbsOperation) throws -> Result
  ) rethrows -> Result {
    let operation = beginOperation(name, kind: kind, trace: trace, parentSpanID: parentSpanID)
    defer { operation.end() }
    return try body(operation)
  }
}
