// TestTools.swift — the scripts in Tests/Tools, and the system's own tools tests check our
// output against (the lz4 command).

import Foundation
import Testing

/// The path of a script in Tests/Tools.
package func testTool(_ name: String) -> String {
  URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Tools/" + name).path
}

/// `lz4 -dc FILE` through the real CLI.
package func runLZ4Decompress(_ path: String) throws -> String {
  let child = try ChildProcess("/usr/bin/lz4", ["-dc", path])
  let output = child.readRemaining()
  child.wait()
  #expect(child.exitCode == 0)
  return output
}
