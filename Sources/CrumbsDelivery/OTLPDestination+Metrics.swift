// OTLPDestination+Metrics.swift — metrics (the session counts) to the same collector as the
// logs: `POST {endpoint}/v1/metrics`, in the destination's encoding and compression, with its
// headers and the metrics' own over them. The URL: `metricsEndpoint` as is
// (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT), else the logs URL's base with `/v1/metrics`; a logs URL
// given as is (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) names no metrics URL unless it ends in
// `/v1/logs` (then `/v1/metrics` replaces it): metrics are not sent there. Not signal-safe.

extension OTLPDestination {
  /// Where metrics go; nil when the logs URL was given as is and does not end in `/v1/logs`.
  public var metricsURL: String? {
    if let metricsEndpoint { return metricsEndpoint }
    let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
    if base.hasSuffix("/v1/logs") { return String(base.dropLast("/v1/logs".count)) + "/v1/metrics" }
    return appendsLogsPath ? base + "/v1/metrics" : nil
  }

  /// The POST of `metrics` to `metricsURL`; sent uncompressed if gzip fails (out of memory).
  public func request(forMetrics metrics: OTLPMetricBatch, id: String) -> DeliveryRequest? {
    guard let url = metricsURL else { return nil }
    let body = encoding == .protobuf ? metrics.protobuf() : metrics.json()
    return request(body: body, records: metrics.pointCount, id: id, url: url, signal: .metrics)
  }
}
