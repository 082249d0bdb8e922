// CrumbsClient+Requests.swift — a server request as an operation of the in-flight ledger, what
// the Hummingbird and Vapor middleware (CrumbsHummingbird, CrumbsVapor) share and what any other
// server's middleware may call: beginRequest (the trace from `traceparent` or the request id, a
// span id of its own, a breadcrumb at the start) → CrumbsRequest.answered / failed.
//
// The breadcrumb at the start is the one a crashing or killed request leaves: its end is never
// written. Each request gets its own span id (the caller's `traceparent` names its parent), the
// way a server span of a tracer would.

import CrumbsRecorder
import Synchronization

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
    let caller = traceparent.flatMap(TraceContext.init(traceparent:))
    let traceID =
      caller?.traceID ?? requestID.flatMap(RequestSpanIDs.traceID(fromRequestID:))
      ?? RequestSpanIDs.next(digits: 32)
    let trace =
      TraceContext(traceID: traceID, spanID: RequestSpanIDs.next(digits: 16), flags: caller?.flags ?? 0)
      ?? TraceContext(traceID: RequestSpanIDs.next(digits: 32), spanID: RequestSpanIDs.next(digits: 16))!
    let operation = beginOperation(name, kind: .server, trace: trace, parentSpanID: caller?.spanID)
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

/// Span ids (and trace ids when a request brings none) for requests: unique, not secret, so a
/// counter through a mixing function (splitmix64) seeded once at random serves, with no system
/// call per request.
enum RequestSpanIDs {
  private static let counter = Atomic<UInt64>(UInt64.random(in: 1...UInt64.max))

  /// `digits` (16 or 32) lowercase hex digits, never all zero.
  static func next(digits: Int) -> String {
    var text = ""
    for _ in 0..<(digits / 16) {
      text += hex(mixed(counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue))
    }
    return text
  }

  /// The hex digits of a request id (dashes and other characters dropped), lowercase and
  /// zero-padded on the left to 32; nil when there are none, more than 32, or all are zero.
  static func traceID(fromRequestID id: String) -> String? {
    let digits = id.lowercased().filter(\.isHexDigit)
    guard !digits.isEmpty, digits.count <= 32, digits.contains(where: { $0 != "0" }) else { return nil }
    return String(repeating: "0", count: 32 - digits.count) + digits
  }

  private static func mixed(_ seed: UInt64) -> UInt64 {
    var z = seed
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    return z == 0 ? 1 : z
  }

  private static func hex(_ value: UInt64) -> String {
    let text = String(value, radix: 16)
    return String(repeating: "0", count: 16 - text.count) + text
  }
}
