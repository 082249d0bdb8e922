// SymbolizerOracle.swift — what `llvm-symbolizer --inlines`, a tool we did not write, says of
// the addresses of a report's frames (its JSON output, read with Foundation), and where a
// report's frames, as its stored report.json holds them, differ from it.

import CrumbsPlatform
import CrumbsReports
import Foundation

/// One location llvm-symbolizer gives for an address, as a report's frame would show it: the
/// readable name, no file or line for `??` or `<compiler-generated>`, no column without a line.
package struct OracleLocation: Equatable, CustomStringConvertible {
  package var function: String?
  package var file: String?
  package var line: Int?
  package var column: Int?

  package var description: String {
    "\(function ?? "??") at \(file ?? "??"):\(line.map(String.init) ?? "?"):\(column.map(String.init) ?? "?")"
  }
}

/// The `llvm-symbolizer` on PATH, or nil.
package func oracleSymbolizer() -> String? { LLVMSymbolizer.onPath("llvm-symbolizer") }

/// Per ELF virtual address of the file `module`, llvm-symbolizer's locations, innermost inlined
/// call first (`--inlines`); empty when it has no line for the address (no DWARF there).
package func symbolizerOracle(_ symbolizer: String, module: String, offsets: [UInt64]) throws
  -> [[OracleLocation]]
{
  let output = try Subprocess.run(
    symbolizer,
    ["--obj=" + module, "--inlines", "--no-demangle", "--output-style=JSON"]
      + offsets.map { "0x" + String($0, radix: 16) }, timeoutMilliseconds: 60_000)
  guard output.exitStatus == 0,
    let answers = try JSONSerialization.jsonObject(with: Data(output.standardOutput)) as? [[String: Any]],
    answers.count == offsets.count
  else {
    throw OracleFailure(
      "llvm-symbolizer: status \(output.exitStatus.map(String.init) ?? "signal"), "
        + String(
          decoding: output.standardOutput.prefix(300) + output.standardError.prefix(300), as: UTF8.self))
  }
  return answers.map { answer in
    let symbols = answer["Symbol"] as? [[String: Any]] ?? []
    let locations = symbols.map { symbol -> OracleLocation in
      let name = symbol["FunctionName"] as? String ?? ""
      let file = symbol["FileName"] as? String ?? ""
      let line = symbol["Line"] as? Int ?? 0
      let column = symbol["Column"] as? Int ?? 0
      let known = !file.isEmpty && file != "??" && !file.hasSuffix("<compiler-generated>") && line > 0
      return OracleLocation(
        function: name.isEmpty || name == "??"
          ? nil
          : SymbolDemangler.readable(name) ?? SymbolDemangler.demangle(name, style: .simplified) ?? name,
        file: known ? file : nil, line: known ? line : nil, column: known && column > 0 ? column : nil)
    }
    return locations.contains { $0.line != nil } ? locations : []
  }
}

/// A frame as a stored report.json holds it (read with Foundation, not with the report's own
/// decoder): the fields a person and llvm-symbolizer compare.
package struct StoredFrame: CustomStringConvertible {
  package var index: Int?
  package var address: String?
  package var module: String?
  package var moduleOffset: String?
  package var function: String?
  package var symbolOffset: Int?
  package var file: String?
  package var line: Int?
  package var column: Int?
  package var inlined: Bool
  package var foundBy: String?
  package var note: String? = nil
  /// The lines of source around `line`, when the report has them.
  package var source: Source? = nil

  package struct Source {
    package var startLine: Int?
    package var lines: [String]?
    package var origin: String?
  }

  package var description: String {
    "#\(index ?? -1) \(function ?? "?")\(inlined ? " [inlined]" : "") at \(file ?? "?"):\(line ?? 0):\(column ?? 0)"
  }
}

/// The crashing thread's frames of the stored report whose report.json is at `path`.
package func storedFrames(ofReportAt path: String) throws -> [StoredFrame] {
  let data = try Data(contentsOf: URL(fileURLWithPath: path))
  guard let report = try JSONSerialization.jsonObject(with: data) as? [String: Any],
    let frames = report["frames"] as? [[String: Any]]
  else { throw OracleFailure("\(path) has no frames") }
  return frames.map { frame in
    StoredFrame(
      index: frame["index"] as? Int, address: frame["address"] as? String, module: frame["module"] as? String,
      moduleOffset: frame["moduleOffset"] as? String, function: frame["function"] as? String,
      symbolOffset: frame["symbolOffset"] as? Int, file: frame["file"] as? String,
      line: frame["line"] as? Int,
      column: frame["column"] as? Int, inlined: frame["inlined"] as? Bool ?? false,
      foundBy: frame["foundBy"] as? String, note: frame["note"] as? String,
      source: (frame["source"] as? [String: Any]).map { source in
        StoredFrame.Source(
          startLine: source["startLine"] as? Int, lines: source["lines"] as? [String],
          origin: source["origin"] as? String)
      })
  }
}

package struct OracleFailure: Error, CustomStringConvertible {
  package var description: String
  package init(_ description: String) { self.description = description }
}

/// Where `frames` (one thread's, innermost first; the first an exact PC when `firstIsExactPC`,
/// every other a return address, looked up one byte back) differ from llvm-symbolizer for the
/// addresses in `module`: each address's frames — its inlined calls, then the frame they were
/// inlined into — must be llvm-symbolizer's locations in its order, with the same function,
/// file, line and column, `inlined` on all but the last. Frames of other modules are skipped.
package func oracleMismatches(
  _ frames: [StoredFrame], module: String, symbolizer: String, firstIsExactPC: Bool
) throws -> [String] {
  var groups: [[StoredFrame]] = []
  var pending: [StoredFrame] = []
  for frame in frames {
    pending.append(frame)
    if !frame.inlined {
      groups.append(pending)
      pending = []
    }
  }
  var compared: [(group: [StoredFrame], offset: UInt64)] = []
  for (position, group) in groups.enumerated() {
    let owner = group[group.count - 1]
    guard owner.module == module, let text = owner.moduleOffset, text.hasPrefix("0x"),
      let offset = UInt64(text.dropFirst(2), radix: 16)
    else { continue }
    let exact = (position == 0 && firstIsExactPC) || owner.foundBy == "async"
    compared.append((group, exact ? offset : offset - 1))
  }
  var mismatches: [String] = []
  if !pending.isEmpty { mismatches.append("inlined frames with no frame after them: \(pending)") }
  guard !compared.isEmpty else { return mismatches + ["no frame in \(module)"] }
  let answers = try symbolizerOracle(symbolizer, module: module, offsets: compared.map(\.offset))
  for ((group, offset), expected) in zip(compared, answers) {
    let got = group.map {
      OracleLocation(function: $0.function, file: $0.file, line: $0.line, column: $0.column)
    }
    let inlinedFlags = group.map(\.inlined)
    if expected.isEmpty {
      // No line from DWARF: the frame keeps its symbol-table name alone.
      if group.count != 1 || group[0].file != nil {
        mismatches.append("0x\(String(offset, radix: 16)): llvm-symbolizer has no line; report has \(got)")
      }
      continue
    }
    if got != expected || inlinedFlags != expected.indices.map({ $0 < expected.count - 1 }) {
      mismatches.append(
        "0x\(String(offset, radix: 16)): llvm-symbolizer \(expected); report \(got) inlined \(inlinedFlags)")
    }
  }
  return mismatches
}
