// OTLPEnvelope.swift — the part every OTLP export request shares, written once for the logs
// (OTLPLogs.swift), the metrics (OTLPMetrics.swift) and the spans (OTLPTraces.swift): per
// resource, its attributes and one instrumentation scope holding the items (log records,
// metrics or spans).
//
// Entry points: OTLPEnvelope.protobuf(resource:scopeName:scopeVersion:into:items:) and
// OTLPEnvelope.json(_:resource:scopeName:scopeVersion:into:items:), each writing one resource.
//
// Field numbers (checked against opentelemetry-proto as shipped by the Python package), the same
// for every signal:
//   Resource{Logs,Metrics,Spans}: resource 1, scope_{logs,metrics,spans} 2
//   Scope{Logs,Metrics,Spans}:    scope 1, {log_records,metrics,spans} 2
//   Resource: attributes 1        InstrumentationScope: name 1, version 2
// Not signal-safe.

import CrumbsReports

enum OTLPEnvelope {
  /// The OTLP/JSON names of one signal's envelope.
  struct JSONNames {
    var resources: String
    var scopes: String
    var items: String

    static let logs = JSONNames(resources: "resourceLogs", scopes: "scopeLogs", items: "logRecords")
    static let metrics = JSONNames(resources: "resourceMetrics", scopes: "scopeMetrics", items: "metrics")
    static let traces = JSONNames(resources: "resourceSpans", scopes: "scopeSpans", items: "spans")
  }

  /// Writes one `resource_logs` / `resource_metrics` (field 1 of the request); `items` writes the
  /// scope's items (field 2 of the scope message) into the writer it is given.
  static func protobuf(
    resource: [OTLPAttribute], scopeName: String, scopeVersion: String, into request: inout ProtobufWriter,
    items: (inout ProtobufWriter) -> Void
  ) {
    request.message(1) { resourceMessage in
      resourceMessage.message(1) { attributes in
        for attribute in resource { attributes.message(1) { OTLPLogBatch.encode(attribute, into: &$0) } }
      }
      resourceMessage.message(2) { scopeMessage in
        scopeMessage.message(1) { scope in
          scope.string(1, scopeName)
          scope.string(2, scopeVersion)
        }
        items(&scopeMessage)
      }
    }
  }

  /// Writes one element of the request's `resourceLogs` / `resourceMetrics` array; `items` fills
  /// the scope's `logRecords` / `metrics` array.
  static func json(
    _ names: JSONNames, resource: [OTLPAttribute], scopeName: String, scopeVersion: String,
    into resources: inout JSONArray, items: (inout JSONArray) -> Void
  ) {
    resources.object { resourceObject in
      resourceObject.object("resource") { message in
        message.array("attributes") { OTLPLogBatch.json(resource, into: &$0) }
      }
      resourceObject.array(names.scopes) { scopes in
        scopes.object { scopeObject in
          scopeObject.object("scope") { scope in
            scope.field("name", scopeName)
            scope.field("version", scopeVersion)
          }
          scopeObject.array(names.items, items)
        }
      }
    }
  }
}
