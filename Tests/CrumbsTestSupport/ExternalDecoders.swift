// ExternalDecoders.swift — what we send and store, decoded by tools we did not write: the
// official OpenTelemetry protobuf decoder (Tests/Tools/decode_otlp.py) and the lz4 command.

import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// The path of a script in Tests/Tools.
package func testTool(_ name: String) -> String {
  URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Tools/" + name).path
}

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

/// `lz4 -dc FILE` through the real CLI.
package func runLZ4Decompress(_ path: String) throws -> String {
  let child = try ChildProcess("/usr/bin/lz4", ["-dc", path])
  let output = child.readRemaining()
  child.wait()
  #expect(child.exitCode == 0)
  return output
}
