// OTLPMetricsDecoder.swift — the metrics we send, decoded by the official OpenTelemetry protobuf
// classes (Tests/Tools/decode_otlp.py --metrics).

import CrumbsTestSupport
import Foundation
import Testing

/// Runs `decode_otlp.py --metrics` on a captured `/v1/metrics` body; returns its JSON.
package func decodeOTLPMetrics(_ body: [UInt8], json: Bool = false, gzip: Bool = false) throws -> [String:
  Any]
{
  let directory = TestDirectory()
  let file = directory.file("metrics.bin")
  try Data(body).write(to: URL(fileURLWithPath: file))
  let child = try ChildProcess(
    "/usr/bin/env",
    ["python3", testTool("decode_otlp.py"), "--metrics", file] + (json ? ["--json"] : [])
      + (gzip ? ["--gzip"] : []))
  let output = child.readRemaining()
  child.wait()
  try #require(
    child.exitCode == 0,
    "decode_otlp.py --metrics failed (is opentelemetry-proto installed? `make test` installs it): \(output)")
  return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
}
