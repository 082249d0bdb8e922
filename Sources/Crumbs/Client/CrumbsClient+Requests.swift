// CrumbsClient+Requests.swift — a server request as an operation of the in-flight ledger, what
// the Hummingbird and Vapor middleware (CrumbsHummingbird, CrumbsVapor) share and what any other
// server's middleware may call: beginRequest (the trace from `traceparent` or the request id, a
// span id of its own, a breadcrumb at the start) → CrumbsRequest.answered / failed.
//
// The breadcrumb at the start is the one a crashing or killed request leaves: its end is never
// written. Each request gets its own span id (the caller's `traceparent` names its parent), the
// way a server span of a tracer would.

import CrumbsRecorder

/// A request open in the client's in-flight ledger, from `CrumbsClient.beginRequest`.
public struct CrumbsRequest: Sendable {
  /// The ledger's entry: rename it or add attributes while the request runs.
  public let operation: CrumbsOperation
  /// Its name in the ledger and its breadcrumbs: the method and route template.
  public let name: String
  /// Its trace (the caller's trace id, or one made from the request id) and its own span id.
  public let trace: TraceContext
  let client: CrumbsClient

  /// The handler produced a response: a breadcrumb with its status, and the operation ends.
  public func answered(status: Int) {
    client.addBreadcrumb(
      name + " answered", level: status >= 500 ? .error : .info, type: .http,
      attributes: [
        "http.response.status_code": String(status), TraceContext.traceIDKey: trace.traceID,
        TraceContext.spanIDKey: trace.spanID,
      ])
    operation.end()
  }

  /// The handler threw `error`, which the app did not map to a response: a breadcrumb, a
  /// non-fatal report when `report` is true (with the request's name and trace), and the
  /// operation ends.
  public func failed(_ error: any Error, report: Bool) {
    let type = String(reflecting: Swift.type(of: error))
    client.addBreadcrumb(
      name + " failed", level: .error, type: .http,
      attributes: [
        "error.type": type, TraceContext.traceIDKey: trace.traceID, TraceContext.spanIDKey: trace.spanID,
      ])
    if report {
      client.send(
        error: error,
        attributes: [
          "http.route": name, TraceContext.traceIDKey: trace.traceID, TraceContext.spanIDKey: trace.spanID,
        ])
    }
    operation.end()
  }
}

extension CrumbsClient {
  /// Begins a server request named `name` (its method and route template, `GET /orders/:id`:
  /// never the raw path with ids in it) in the ledger, and adds a breadcrumb that it began.
  ///
  /// Its trace id is the one of `traceparent` (a W3C header value; its span becomes the parent)
  /// when that is well formed; otherwise the hex digits of `requestID` (Vapor's and
  /// Hummingbird's ids are 32 or fewer), zero-padded on the left; otherwise a new one. Its span
  /// id is always new. `path` (the raw path) is kept as the entry's `url.path` attribute, and
  /// `requestID` as `http.request.id`.
  public func beginRequest(
    _ name: String, traceparent: String? = nil, requestID: String? = nil, path: String? = nil
  ) -> CrumbsRequest {
    let caller = traceparent.flatMap(TraceIDs.init(traceparent:))
    let ids = TraceIDs.madeUp(in: caller ?? requestID.flatMap(Self.trace(fromRequestID:)))
    let trace = ids.context
    let operation = beginOperation(name, kind: .server, ids: ids, parentSpanID: caller?.spanID ?? 0)
    var started: [(key: String, value: String)] = [
      (TraceContext.traceIDKey, trace.traceID), (TraceContext.spanIDKey, trace.spanID),
    ]
    if let path {
      operation.setAttribute("url.path", path)
      started.append(("url.path", path))
    }
    if let requestID {
      operation.setAttribute("http.request.id", requestID)
      started.append(("http.request.id", requestID))
    }
    addBreadcrumb(name, type: .http, attributes: BreadcrumbAttributes(started))
    return CrumbsRequest(operation: operation, name: name, trace: trace, client: self)
  }
}

extension CrumbsClient {
  /// The trace named by the hex digits of a request id (dashes and other characters dropped),
  /// zero-padded on the left to 32 (its span id a placeholder); nil when there are none, more
  /// than 32, or all are zero.
  static func trace(fromRequestID id: String) -> TraceIDs? {
    let digits = id.filter(\.isHexDigit)
    guard !digits.isEmpty, digits.utf8.count <= 32 else { return nil }
    var padded = (String(repeating: "0", count: 32 - digits.utf8.count) + digits).utf8.makeIterator()
    guard let high = TraceIDs.word(&padded), let low = TraceIDs.word(&padded) else { return nil }
    return TraceIDs(traceHigh: high, traceLow: low, spanID: 1)
  }
}
