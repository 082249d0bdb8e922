// OTLPTraces.swift — OpenTelemetry spans (opentelemetry-proto `trace/v1/trace.proto`), only what
// Crumbs sends: the spans a death left open, each closed at the death (ClosingSpans.swift), in
// the two OTLP/HTTP encodings the logs use (OTLPLogs.swift: the same ProtobufWriter, JSONWriter,
// attribute encoding and envelope, OTLPEnvelope.swift), for `POST {endpoint}/v1/traces`.
//
// Entry points: OTLPTraceBatch(resource:scopeName:scopeVersion:spans:) → protobuf() or json().
//
// Field numbers (checked against opentelemetry-proto as shipped by the Python package):
//   ExportTraceServiceRequest: resource_spans 1
//   ResourceSpans, ScopeSpans: see OTLPEnvelope.swift
//   Span:   trace_id 1 (16 bytes), span_id 2 (8 bytes), parent_span_id 4, name 5, kind 6
//           (INTERNAL 1, SERVER 2, CONSUMER 5), start_time_unix_nano 7 (fixed64),
//           end_time_unix_nano 8 (fixed64), attributes 9, links 13, status 15
//   Link:   trace_id 1, span_id 2, attributes 4
//   Status: message 2, code 3 (ERROR = 2)
//   (OTLP/JSON: traceId, spanId and parentSpanId as lowercase hex, not base64)
// Not signal-safe.

import CrumbsRecorder
import CrumbsReports

/// A link from a span to another span (OTLP `Span.Link`).
public struct OTLPSpanLink: Sendable, Equatable {
  /// The span linked to (its trace id and span id; the flags are not sent).
  public var context: TraceContext
  public var attributes: [OTLPAttribute]

  public init(context: TraceContext, attributes: [OTLPAttribute]) {
    self.context = context
    self.attributes = attributes
  }
}

/// One span (OTLP `Span`): its trace id and span id are `context`'s (valid by construction).
public struct OTLPSpan: Sendable, Equatable {
  /// OTLP's `SpanKind`, the members Crumbs sends.
  public enum Kind: Int, Sendable {
    case `internal` = 1
    case server = 2
    case consumer = 5
  }

  public var context: TraceContext
  /// 16 lowercase hex digits; nil (or not a span id) for a root span.
  public var parentSpanID: String?
  public var name: String
  public var kind: Kind
  public var startTimeUnixNano: UInt64
  public var endTimeUnixNano: UInt64
  public var attributes: [OTLPAttribute]
  public var links: [OTLPSpanLink]
  /// With a message, status ERROR (code 2); nil: status UNSET.
  public var errorMessage: String?

  public init(
    context: TraceContext, parentSpanID: String?, name: String, kind: Kind,
    startTimeUnixNano: UInt64, endTimeUnixNano: UInt64, attributes: [OTLPAttribute], links: [OTLPSpanLink],
    errorMessage: String?
  ) {
    self.context = context
    self.parentSpanID = parentSpanID
    self.name = name
    self.kind = kind
    self.startTimeUnixNano = startTimeUnixNano
    self.endTimeUnixNano = endTimeUnixNano
    self.attributes = attributes
    self.links = links
    self.errorMessage = errorMessage
  }

  /// The parent as a normalized span id; nil when there is none or it is not one.
  var parent: TraceContext? {
    parentSpanID.flatMap { TraceContext(traceID: context.traceID, spanID: $0) }
  }
}

/// One `ExportTraceServiceRequest`: a resource, a scope and its spans.
public struct OTLPTraceBatch: Sendable, Equatable {
  public var resource: [OTLPAttribute]
  public var scopeName: String
  public var scopeVersion: String
  public var spans: [OTLPSpan]

  public init(resource: [OTLPAttribute], scopeName: String, scopeVersion: String, spans: [OTLPSpan]) {
    self.resource = resource
    self.scopeName = scopeName
    self.scopeVersion = scopeVersion
    self.spans = spans
  }

  /// OTLP's `STATUS_CODE_ERROR`.
  static let statusError = 2

  /// The binary protobuf encoding (`Content-Type: application/x-protobuf`).
  public func protobuf() -> [UInt8] {
    var request = ProtobufWriter()
    OTLPEnvelope.protobuf(
      resource: resource, scopeName: scopeName, scopeVersion: scopeVersion, into: &request
    ) { scopeSpans in
      for span in spans { scopeSpans.message(2) { Self.encode(span, into: &$0) } }
    }
    return request.bytes
  }

  static func encode(_ span: OTLPSpan, into writer: inout ProtobufWriter) {
    writer.bytes(1, span.context.traceIDBytes)
    writer.bytes(2, span.context.spanIDBytes)
    if let parent = span.parent { writer.bytes(4, parent.spanIDBytes) }
    writer.string(5, span.name)
    writer.varint(6, UInt64(span.kind.rawValue))
    writer.fixed64(7, span.startTimeUnixNano, always: true)
    writer.fixed64(8, span.endTimeUnixNano, always: true)
    for attribute in span.attributes { writer.message(9) { OTLPLogBatch.encode(attribute, into: &$0) } }
    for link in span.links {
      writer.message(13) { message in
        message.bytes(1, link.context.traceIDBytes)
        message.bytes(2, link.context.spanIDBytes)
        for attribute in link.attributes { message.message(4) { OTLPLogBatch.encode(attribute, into: &$0) } }
      }
    }
    if let message = span.errorMessage {
      writer.message(15) { status in
        status.string(2, message)
        status.varint(3, UInt64(Self.statusError))
      }
    }
  }

  /// The OTLP/JSON encoding (`Content-Type: application/json`), as OTLPLogBatch.json().
  public func json() -> [UInt8] {
    var json = JSONWriter()
    json.object { request in
      request.array(OTLPEnvelope.JSONNames.traces.resources) { resources in
        OTLPEnvelope.json(
          .traces, resource: resource, scopeName: scopeName, scopeVersion: scopeVersion, into: &resources
        ) { items in
          for span in spans { items.object { Self.json(span, into: &$0) } }
        }
      }
    }
    return json.bytes
  }

  static func json(_ span: OTLPSpan, into json: inout JSONObject) {
    json.field("traceId", span.context.traceID)
    json.field("spanId", span.context.spanID)
    if let parent = span.parent { json.field("parentSpanId", parent.spanID) }
    json.field("name", span.name)
    json.field("kind", span.kind.rawValue)
    json.field("startTimeUnixNano", String(span.startTimeUnixNano))
    json.field("endTimeUnixNano", String(span.endTimeUnixNano))
    json.array("attributes") { OTLPLogBatch.json(span.attributes, into: &$0) }
    json.array("links") { links in
      for link in span.links {
        links.object { object in
          object.field("traceId", link.context.traceID)
          object.field("spanId", link.context.spanID)
          object.array("attributes") { OTLPLogBatch.json(link.attributes, into: &$0) }
        }
      }
    }
    if let message = span.errorMessage {
      json.object("status") { status in
        status.field("message", message)
        status.field("code", Self.statusError)
      }
    }
  }
}
