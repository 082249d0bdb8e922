// OTLPMetrics.swift — OpenTelemetry metrics (opentelemetry-proto `metrics/v1/metrics.proto`),
// only what Crumbs sends: monotonic cumulative Sums of integers (`crumbs.sessions`), in the two
// OTLP/HTTP encodings the logs use (OTLPLogs.swift: the same ProtobufWriter, JSONWriter,
// attribute encoding and envelope, OTLPEnvelope.swift), for `POST {endpoint}/v1/metrics`.
//
// Entry points: OTLPMetricBatch(resources:scopeName:scopeVersion:) → protobuf() or json().
//
// Field numbers (checked against opentelemetry-proto as shipped by the Python package):
//   ExportMetricsServiceRequest: resource_metrics 1
//   ResourceMetrics, ScopeMetrics: see OTLPEnvelope.swift
//   Metric:          name 1, description 2, unit 3, sum 7
//   Sum:             data_points 1, aggregation_temporality 2 (CUMULATIVE = 2), is_monotonic 3
//   NumberDataPoint: start_time_unix_nano 2 (fixed64), time_unix_nano 3 (fixed64),
//                    as_int 6 (sfixed64), attributes 7
// Not signal-safe.

import CrumbsReports

/// One data point of a Sum (`NumberDataPoint` with `as_int`).
public struct OTLPSumPoint: Sendable, Equatable {
  public var attributes: [OTLPAttribute]
  /// When the series started counting: the same in every request until it resets.
  public var startTimeUnixNano: UInt64
  public var timeUnixNano: UInt64
  public var value: Int64

  public init(attributes: [OTLPAttribute], startTimeUnixNano: UInt64, timeUnixNano: UInt64, value: Int64) {
    self.attributes = attributes
    self.startTimeUnixNano = startTimeUnixNano
    self.timeUnixNano = timeUnixNano
    self.value = value
  }
}

/// A monotonic cumulative Sum (`Metric` with `sum`).
public struct OTLPSum: Sendable, Equatable {
  public var name: String
  public var description: String
  public var unit: String
  public var points: [OTLPSumPoint]

  public init(name: String, description: String, unit: String, points: [OTLPSumPoint]) {
    self.name = name
    self.description = description
    self.unit = unit
    self.points = points
  }
}

/// One `ExportMetricsServiceRequest`: per resource, the sums measured under it, in one scope.
public struct OTLPMetricBatch: Sendable, Equatable {
  public var resources: [(resource: [OTLPAttribute], sums: [OTLPSum])]
  public var scopeName: String
  public var scopeVersion: String

  public init(
    resources: [(resource: [OTLPAttribute], sums: [OTLPSum])], scopeName: String, scopeVersion: String
  ) {
    self.resources = resources
    self.scopeName = scopeName
    self.scopeVersion = scopeVersion
  }

  public static func == (left: Self, right: Self) -> Bool {
    left.scopeName == right.scopeName && left.scopeVersion == right.scopeVersion
      && left.resources.count == right.resources.count
      && zip(left.resources, right.resources).allSatisfy { $0.resource == $1.resource && $0.sums == $1.sums }
  }

  /// Data points in the batch (a partial success counts rejected ones).
  public var pointCount: Int { resources.reduce(0) { $0 + $1.sums.reduce(0) { $0 + $1.points.count } } }

  /// OTLP's `AGGREGATION_TEMPORALITY_CUMULATIVE`.
  static let cumulative = 2

  /// The binary protobuf encoding (`Content-Type: application/x-protobuf`).
  public func protobuf() -> [UInt8] {
    var request = ProtobufWriter()
    for (resource, sums) in resources {
      OTLPEnvelope.protobuf(
        resource: resource, scopeName: scopeName, scopeVersion: scopeVersion, into: &request
      ) { scopeMetrics in
        for sum in sums { scopeMetrics.message(2) { Self.encode(sum, into: &$0) } }
      }
    }
    return request.bytes
  }

  static func encode(_ sum: OTLPSum, into writer: inout ProtobufWriter) {
    writer.string(1, sum.name)
    writer.string(2, sum.description)
    writer.string(3, sum.unit)
    writer.message(7) { message in
      for point in sum.points {
        message.message(1) { data in
          data.fixed64(2, point.startTimeUnixNano)
          data.fixed64(3, point.timeUnixNano)
          // as_int is a oneof member: written even when 0.
          data.fixed64(6, UInt64(bitPattern: point.value), always: true)
          for attribute in point.attributes { data.message(7) { OTLPLogBatch.encode(attribute, into: &$0) } }
        }
      }
      message.varint(2, UInt64(Self.cumulative))
      message.bool(3, true)
    }
  }

  /// The OTLP/JSON encoding (`Content-Type: application/json`), as OTLPLogBatch.json().
  public func json() -> [UInt8] {
    var json = JSONWriter()
    json.object { request in
      request.array(OTLPEnvelope.JSONNames.metrics.resources) { list in
        for (resource, sums) in resources {
          OTLPEnvelope.json(
            .metrics, resource: resource, scopeName: scopeName, scopeVersion: scopeVersion, into: &list
          ) { metrics in
            for sum in sums { metrics.object { Self.json(sum, into: &$0) } }
          }
        }
      }
    }
    return json.bytes
  }

  static func json(_ sum: OTLPSum, into json: inout JSONObject) {
    json.field("name", sum.name)
    json.field("description", sum.description)
    json.field("unit", sum.unit)
    json.object("sum") { message in
      message.array("dataPoints") { points in
        for point in sum.points {
          points.object { data in
            data.array("attributes") { OTLPLogBatch.json(point.attributes, into: &$0) }
            data.field("startTimeUnixNano", String(point.startTimeUnixNano))
            data.field("timeUnixNano", String(point.timeUnixNano))
            data.field("asInt", String(point.value))
          }
        }
      }
      message.field("aggregationTemporality", Self.cumulative)
      message.field("isMonotonic", true)
    }
  }
}
