// OTLPTracesDecoder.swift — the spans we send, decoded by the official OpenTelemetry protobuf
// classes (Tests/Tools/decode_otlp.py --traces).

import CrumbsTestSupport
import Foundation
import Testing

/// Runs `decode_otlp.py --traces` on a captured `/v1/traces` body; returns its spans (every
/// resource's) and the resource of the first.
package func decodeOTLPTraces(_ body: [UInt8], json: Bool = false, gzip: Bool = false) throws -> (
  spans: [[String: Any]], resource: [String: Any]
) {
  let directory = TestDirectory()
  let file = directory.file("traces.bin")
  try Data(body).write(to: URL(fileURLWithPath: file))
  let child = try ChildProcess(
    "/usr/bin/env",
    ["python3", testTool("decode_otlp.py"), "--traces", file] + (json ? ["--json"] : [])
      + (gzip ? ["--gzip"] : []))
  let output = child.readRemaining()
  child.wait()
  try #require(
    child.exitCode == 0,
    "decode_otlp.py --traces failed (is opentelemetry-proto installed? `make test` installs it): \(output)")
  let decoded = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
  let resources = decoded["resource_spans"] as? [[String: Any]] ?? []
  return (
    resources.flatMap { $0["spans"] as? [[String: Any]] ?? [] },
    resources.first?["resource"] as? [String: Any] ?? [:]
  )
}

/// The spans a loopback server received on `/v1/traces` (protobuf bodies), in order.
package func receivedSpans(_ server: LoopbackHTTPServer) throws -> [[String: Any]] {
  try server.requests.filter { $0.target.hasSuffix("/v1/traces") }.flatMap {
    try decodeOTLPTraces($0.body).spans
  }
}
