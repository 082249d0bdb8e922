// OTLPMetricsEncodingTests.swift — the metrics encodings (protobuf and OTLP/JSON) read back by
// the official OpenTelemetry classes, and the metrics URL next to the logs one.

import CrumbsDeliveryTestSupport
import Testing

@testable import CrumbsDelivery

struct OTLPMetricsEncodingTests {
  static let batch = OTLPMetricBatch(
    resources: [
      (
        resource: [
          OTLPAttribute("service.name", .string("app")), OTLPAttribute("service.version", .string("1.0")),
        ],
        sums: [
          OTLPSum(
            name: "crumbs.sessions", description: "Ended sessions", unit: "{session}",
            points: [
              OTLPSumPoint(
                attributes: [OTLPAttribute("crumbs.session.end", .string("clean"))],
                startTimeUnixNano: 1_700_000_000_000_000_000, timeUnixNano: 1_700_000_100_000_000_000,
                value: 2),
              OTLPSumPoint(
                attributes: [OTLPAttribute("crumbs.session.end", .string("crashed"))],
                startTimeUnixNano: 1_700_000_000_000_000_000, timeUnixNano: 1_700_000_100_000_000_000,
                value: 0),
            ])
        ]
      )
    ], scopeName: "crumbs", scopeVersion: "9.9")

  @Test(arguments: [false, true]) func bothEncodingsReadBackAsACumulativeMonotonicSum(json: Bool) throws {
    let body = json ? Self.batch.json() : Self.batch.protobuf()
    let decoded = try decodeOTLPMetrics(body, json: json)
    let resources = try #require(decoded["resource_metrics"] as? [[String: Any]])
    #expect(resources.count == 1)
    let resource = try #require(resources.first)
    #expect((resource["resource"] as? [String: Any])?["service.version"] as? String == "1.0")
    #expect((resource["scope"] as? [String: Any])?["version"] as? String == "9.9")
    let metric = try #require((resource["metrics"] as? [[String: Any]])?.first)
    #expect(metric["name"] as? String == "crumbs.sessions")
    #expect(metric["unit"] as? String == "{session}")
    #expect(metric["kind"] as? String == "sum")
    #expect(metric["is_monotonic"] as? Bool == true)
    #expect(metric["aggregation_temporality"] as? Int == 2)
    let points = try #require(metric["points"] as? [[String: Any]])
    #expect(points.map { $0["as_int"] as? Int } == [2, 0], "a zero is sent, not left out")
    #expect(points.allSatisfy { $0["start_time_unix_nano"] as? String == "1700000000000000000" })
    #expect(points.allSatisfy { $0["time_unix_nano"] as? String == "1700000100000000000" })
    #expect(
      points.map { ($0["attributes"] as? [String: Any])?["crumbs.session.end"] as? String } == [
        "clean", "crashed",
      ])
  }

  @Test func metricsGoBesideTheLogs() {
    #expect(OTLPDestination(endpoint: "http://c:4318").metricsURL == "http://c:4318/v1/metrics")
    #expect(OTLPDestination(endpoint: "http://c:4318/").metricsURL == "http://c:4318/v1/metrics")
    #expect(OTLPDestination(endpoint: "http://c:4318/v1/logs").metricsURL == "http://c:4318/v1/metrics")
    var signalSpecific = OTLPDestination(endpoint: "http://c:4318/custom/logs")
    signalSpecific.appendsLogsPath = false
    #expect(signalSpecific.metricsURL == nil)
  }
}
