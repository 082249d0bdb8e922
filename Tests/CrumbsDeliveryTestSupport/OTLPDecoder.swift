// OTLPDecoder.swift — what we send, decoded by a tool we did not write: the official
// OpenTelemetry protobuf classes (Tests/Tools/decode_otlp.py).

import CrumbsTestSupport
import Foundation
import Testing

/// Runs Tests/Tools/decode_otlp.py on a captured body; returns its JSON.
package func decodeOTLP(_ body: [UInt8], json: Bool = false, gzip: Bool = false) throws -> [String: Any] {
  let directory = TestDirectory()
  let file = directory.file("body.bin")
  try Data(body).write(to: URL(fileURLWithPath: file))
  let child = try ChildProcess(
    "/usr/bin/env",
    ["python3", testTool("decode_otlp.py"), file] + (json ? ["--json"] : []) + (gzip ? ["--gzip"] : []))
  let output = child.readRemaining()
  child.wait()
  try #require(
    child.exitCode == 0, "decode_otlp.py failed (is opentelemetry-proto installed? `make test` installs it)")
  return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
}

/// An `ExportLogsServiceResponse` with a partial success, made by the official classes (binary,
/// or OTLP/JSON), as a collector would answer.
package func otlpPartialSuccessBody(rejected: Int, message: String, json: Bool = false) throws -> [UInt8] {
  let child = try ChildProcess(
    "/usr/bin/env",
    ["python3", testTool("decode_otlp.py"), "--partial-success", String(rejected), message]
      + (json ? ["--json"] : []))
  let output = child.readToEnd(timeoutMilliseconds: 60_000)
  child.wait()
  try #require(child.exitCode == 0, "decode_otlp.py --partial-success failed")
  return output
}

/// The `crumbs.report.id` in an OTLP protobuf body (found by its key; the value follows).
package func reportID(ofOTLP request: CapturedRequest) -> String? {
  let key = Array("crumbs.report.id".utf8)
  guard let range = request.body.firstRange(of: key) else { return nil }
  // KeyValue.value (0x12, len) → AnyValue.string_value (0x0A, len) → 36 bytes.
  let start = range.upperBound + 4
  guard start + 36 <= request.body.count else { return nil }
  return String(decoding: request.body[start..<(start + 36)], as: UTF8.self)
}
