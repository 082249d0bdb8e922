// OTLPDestination+Traces.swift — spans (the operations a death left open, closed at it:
// ClosingSpans) to the same collector as the logs: `POST {endpoint}/v1/traces`, in the
// destination's encoding and compression, with its headers and the traces' own over them. The
// URL: `tracesEndpoint` as is (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), else the logs URL's base with
// `/v1/traces`; a logs URL given as is (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) names no traces URL
// unless it ends in `/v1/logs`, as for the metrics. Not signal-safe.

extension OTLPDestination {
  /// Where spans go; nil when no traces URL is known (see the file comment).
  public var tracesURL: String? {
    if let tracesEndpoint { return tracesEndpoint }
    let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
    if base.hasSuffix("/v1/logs") { return String(base.dropLast("/v1/logs".count)) + "/v1/traces" }
    return appendsLogsPath ? base + "/v1/traces" : nil
  }

  /// The POST of `traces` to `tracesURL`; sent uncompressed if gzip fails (out of memory).
  public func request(forTraces traces: OTLPTraceBatch, id: String) -> DeliveryRequest? {
    guard let url = tracesURL else { return nil }
    let body = encoding == .protobuf ? traces.protobuf() : traces.json()
    return request(body: body, records: traces.spans.count, id: id, url: url, signal: .traces)
  }
}
