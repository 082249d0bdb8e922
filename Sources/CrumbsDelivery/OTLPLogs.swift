// OTLPLogs.swift — OpenTelemetry log records (opentelemetry-proto `logs/v1/logs.proto`,
// `common/v1/common.proto`) and their two OTLP/HTTP encodings: binary protobuf
// (`application/x-protobuf`) and OTLP/JSON (`application/json`).
//
// Entry points: OTLPLogBatch(resource:scope:records:) → protobuf() or json().
// The mapping from a report to records lives in OTLPDestination.swift; the resource and scope
// around the records in OTLPEnvelope.swift.
//
// Field numbers (checked against opentelemetry-proto as shipped by the Python package):
//   ExportLogsServiceRequest: resource_logs 1
//   ResourceLogs, ScopeLogs, Resource, InstrumentationScope: see OTLPEnvelope.swift
//   LogRecord:     time_unix_nano 1 (fixed64), severity_number 2, severity_text 3, body 5,
//                  attributes 6, flags 8 (fixed32), trace_id 9 (16 bytes), span_id 10 (8 bytes),
//                  observed_time_unix_nano 11 (fixed64), event_name 12
//                  (OTLP/JSON: traceId and spanId as lowercase hex, not base64)
//   KeyValue:      key 1, value 2                    ArrayValue / KeyValueList: values 1
//   AnyValue:      string 1, bool 2, int 3, double 4, array 5, kvlist 6, bytes 7
// Not signal-safe.

import CrumbsRecorder
import CrumbsReports
import FoundationEssentials

/// An attribute value (OTLP `AnyValue`).
public indirect enum OTLPValue: Sendable, Equatable {
  case string(String)
  case bool(Bool)
  case int(Int64)
  case double(Double)
  case bytes([UInt8])
  case array([OTLPValue])
  case keyValueList([OTLPAttribute])
}

/// One key/value pair (OTLP `KeyValue`).
public struct OTLPAttribute: Sendable, Equatable {
  public var key: String
  public var value: OTLPValue
  public init(_ key: String, _ value: OTLPValue) {
    self.key = key
    self.value = value
  }
}

/// OTLP severity numbers (`SeverityNumber`): the first of each range of four.
public enum OTLPSeverity: Int, Sendable {
  case trace = 1
  case debug = 5
  case info = 9
  case warn = 13
  case error = 17
  case fatal = 21

  /// The short name OTLP suggests for `severity_text`.
  public var text: String {
    switch self {
    case .trace: "TRACE"
    case .debug: "DEBUG"
    case .info: "INFO"
    case .warn: "WARN"
    case .error: "ERROR"
    case .fatal: "FATAL"
    }
  }

  /// The severity of a breadcrumb level name (`debug`, `info`, `warning`, `error`, `fatal`).
  public init(breadcrumbLevel name: String) {
    switch BreadcrumbLevel(name: name) {
    case .debug: self = .debug
    case .info, nil: self = .info
    case .warning: self = .warn
    case .error: self = .error
    case .fatal: self = .fatal
    }
  }
}

/// One log record (OTLP `LogRecord`).
public struct OTLPLogRecord: Sendable, Equatable {
  public var timeUnixNano: UInt64
  public var observedTimeUnixNano: UInt64
  public var severity: OTLPSeverity
  public var body: OTLPValue?
  public var attributes: [OTLPAttribute]
  /// `event_name` (field 12, opentelemetry-proto ≥ 1.5). Never also sent as the deprecated
  /// `event.name` attribute.
  public var eventName: String?
  /// The trace and span the record belongs to (`trace_id`, `span_id`; `flags` carries its trace
  /// flags in the low byte).
  public var trace: TraceContext?

  public init(
    timeUnixNano: UInt64, observedTimeUnixNano: UInt64, severity: OTLPSeverity, body: OTLPValue?,
    attributes: [OTLPAttribute], eventName: String?, trace: TraceContext? = nil
  ) {
    self.timeUnixNano = timeUnixNano
    self.observedTimeUnixNano = observedTimeUnixNano
    self.severity = severity
    self.body = body
    self.attributes = attributes
    self.eventName = eventName
    self.trace = trace
  }
}

/// One `ExportLogsServiceRequest`: a resource, a scope and its records.
public struct OTLPLogBatch: Sendable, Equatable {
  public var resource: [OTLPAttribute]
  public var scopeName: String
  public var scopeVersion: String
  public var records: [OTLPLogRecord]

  public init(resource: [OTLPAttribute], scopeName: String, scopeVersion: String, records: [OTLPLogRecord]) {
    self.resource = resource
    self.scopeName = scopeName
    self.scopeVersion = scopeVersion
    self.records = records
  }

  /// The binary protobuf encoding (`Content-Type: application/x-protobuf`).
  public func protobuf() -> [UInt8] {
    var request = ProtobufWriter()
    OTLPEnvelope.protobuf(
      resource: resource, scopeName: scopeName, scopeVersion: scopeVersion, into: &request
    ) { scopeLogs in
      for record in records { scopeLogs.message(2) { Self.encode(record, into: &$0) } }
    }
    return request.bytes
  }

  static func encode(_ record: OTLPLogRecord, into writer: inout ProtobufWriter) {
    writer.fixed64(1, record.timeUnixNano)
    writer.varint(2, UInt64(record.severity.rawValue))
    writer.string(3, record.severity.text)
    if let body = record.body { writer.message(5) { encode(body, into: &$0) } }
    for attribute in record.attributes { writer.message(6) { encode(attribute, into: &$0) } }
    if let trace = record.trace {
      writer.fixed32(8, UInt32(trace.flags))
      writer.bytes(9, trace.traceIDBytes)
      writer.bytes(10, trace.spanIDBytes)
    }
    writer.fixed64(11, record.observedTimeUnixNano)
    if let eventName = record.eventName { writer.string(12, eventName) }
  }

  static func encode(_ attribute: OTLPAttribute, into writer: inout ProtobufWriter) {
    writer.string(1, attribute.key)
    writer.message(2) { encode(attribute.value, into: &$0) }
  }

  /// An AnyValue: exactly one oneof member, written even when it holds the default value
  /// (an empty string is still a string).
  static func encode(_ value: OTLPValue, into writer: inout ProtobufWriter) {
    switch value {
    case .string(let text): writer.string(1, text, always: true)
    case .bool(let flag): writer.bool(2, flag, always: true)
    case .int(let number): writer.int64(3, number, always: true)
    case .double(let number): writer.double(4, number, always: true)
    case .array(let values):
      writer.message(5) { array in
        for element in values { array.message(1) { encode(element, into: &$0) } }
      }
    case .keyValueList(let attributes):
      writer.message(6) { list in
        for attribute in attributes { list.message(1) { encode(attribute, into: &$0) } }
      }
    case .bytes(let bytes): writer.bytes(7, bytes, always: true)
    }
  }

  /// The OTLP/JSON encoding (`Content-Type: application/json`): proto3 JSON mapping with
  /// lowerCamelCase names, 64-bit integers as strings, bytes as base64, enums as numbers.
  public func json() -> [UInt8] {
    var json = JSONWriter()
    json.object { request in
      request.array(OTLPEnvelope.JSONNames.logs.resources) { resources in
        OTLPEnvelope.json(
          .logs, resource: resource, scopeName: scopeName, scopeVersion: scopeVersion, into: &resources
        ) { logRecords in
          for record in records { logRecords.object { Self.json(record, into: &$0) } }
        }
      }
    }
    return json.bytes
  }

  static func json(_ record: OTLPLogRecord, into json: inout JSONObject) {
    json.field("timeUnixNano", String(record.timeUnixNano))
    json.field("observedTimeUnixNano", String(record.observedTimeUnixNano))
    json.field("severityNumber", record.severity.rawValue)
    json.field("severityText", record.severity.text)
    if let body = record.body { json.object("body") { Self.json(body, into: &$0) } }
    json.array("attributes") { Self.json(record.attributes, into: &$0) }
    if let trace = record.trace {
      json.field("flags", Int(trace.flags))
      json.field("traceId", trace.traceID)
      json.field("spanId", trace.spanID)
    }
    if let eventName = record.eventName { json.field("eventName", eventName) }
  }

  static func json(_ attributes: [OTLPAttribute], into json: inout JSONArray) {
    for attribute in attributes {
      json.object { keyValue in
        keyValue.field("key", attribute.key)
        keyValue.object("value") { Self.json(attribute.value, into: &$0) }
      }
    }
  }

  /// An AnyValue's one member.
  static func json(_ value: OTLPValue, into json: inout JSONObject) {
    switch value {
    case .string(let text): json.field("stringValue", text)
    case .bool(let flag): json.field("boolValue", flag)
    case .int(let number): json.field("intValue", String(number))
    case .double(let number):
      // JSON has no NaN or infinities; proto3 JSON spells them as strings.
      if number.isNaN {
        json.field("doubleValue", "NaN")
      } else if number.isInfinite {
        json.field("doubleValue", number > 0 ? "Infinity" : "-Infinity")
      } else {
        json.field("doubleValue", number)
      }
    case .bytes(let bytes): json.field("bytesValue", Data(bytes).base64EncodedString())
    case .array(let values):
      json.object("arrayValue") { array in
        array.array("values") { elements in
          for element in values { elements.object { Self.json(element, into: &$0) } }
        }
      }
    case .keyValueList(let attributes):
      json.object("kvlistValue") { list in
        list.array("values") { Self.json(attributes, into: &$0) }
      }
    }
  }
}
