// LLVMSymbolizer.swift — file, line and inlined calls from DWARF, via `llvm-symbolizer`.
//
// Entry points, in call order:
//   LLVMSymbolizer.find(options)        the explicit path, else the first `llvm-symbolizer` on
//                                       PATH, else the Swift toolchain's, beside the `swift` on
//                                       PATH; nil when there is none (never required)
//   symbolizer.lineInfo(path:offsets:)  ONE run per module for all its frames:
//                                         llvm-symbolizer --obj=PATH --no-demangle --addresses
//                                           --output-style=LLVM --inlines 0xOFFSET…
//                                       (the LLVM text style parses without Foundation; with
//                                       --addresses each answer starts with its address, so the
//                                       parser checks it is reading the answer it expects)
//     → parse(_:offsets:)               per address, its locations (function, file, line,
//                                       column), innermost inlined call first
//
// Any failure (not found, spawn error, timeout, non-zero exit, output that does not parse, or
// only "??" answers with an error on stderr) is returned as an error; the Symbolicator then keeps
// the ELF names and notes it. Not signal-safe (spawns a process).

import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// One source location llvm-symbolizer gave for an address.
package struct SymbolizerLocation: Equatable {
  /// The (linkage) function name, nil when it printed "??".
  package var function: String?
  /// The source file, nil when unknown.
  package var file: String?
  /// The line, nil when unknown (0).
  package var line: Int?
  /// The column, nil when unknown (0) or without a line.
  package var column: Int?
}

package struct LLVMSymbolizerError: Error, Equatable {
  package var reason: String
}

package struct LLVMSymbolizer {
  package var executable: String
  package var timeoutMilliseconds: Int

  /// The symbolizer the options ask for: nil when it is off or none is on PATH; an error when
  /// `llvmSymbolizerPath` names no executable (asked for explicitly, so worth a note).
  package static func find(_ options: Symbolicator.Options) -> Result<LLVMSymbolizer?, LLVMSymbolizerError> {
    guard options.useLLVMSymbolizer else { return .success(nil) }
    let timeout = options.llvmSymbolizerTimeoutMilliseconds
    if let path = options.llvmSymbolizerPath {
      guard Syscall.isExecutableFile(path) else {
        return .failure(LLVMSymbolizerError(reason: "llvm-symbolizer not found at \(path)"))
      }
      return .success(LLVMSymbolizer(executable: path, timeoutMilliseconds: timeout))
    }
    return .success(
      (onPath("llvm-symbolizer") ?? besideSwift()).map {
        LLVMSymbolizer(executable: $0, timeoutMilliseconds: timeout)
      })
  }

  /// The `llvm-symbolizer` of the Swift toolchain whose `swift` is on PATH: every toolchain
  /// ships one in its `usr/bin` (a newer LLVM than a distribution's, matching the compiler's
  /// DWARF), where PATH may hold only `swift` (a toolchain unpacked under /opt, its `swift`
  /// linked from /usr/local/bin). Slim runtime images have neither.
  package static func besideSwift() -> String? {
    guard let swift = onPath("swift") else { return nil }
    var directories = [Syscall.directoryName(of: swift)]
    if let target = Syscall.readLink(swift) {
      directories.append(
        Syscall.directoryName(
          of: target.hasPrefix("/") ? target : Syscall.directoryName(of: swift) + "/" + target))
    }
    return directories.map { $0 + "/llvm-symbolizer" }.first(where: Syscall.isExecutableFile)
  }

  /// The first executable file named `name` in the directories of $PATH.
  package static func onPath(_ name: String) -> String? {
    guard let path = getenv("PATH").map({ String(cString: $0) }) else { return nil }
    for directory in path.split(separator: ":") where !directory.isEmpty {
      let candidate = directory + "/" + name
      if Syscall.isExecutableFile(candidate) { return candidate }
    }
    return nil
  }

  /// For each ELF virtual address in `offsets`, its source locations (innermost inlined first).
  package func lineInfo(path: String, offsets: [UInt64]) -> Result<
    [[SymbolizerLocation]], LLVMSymbolizerError
  > {
    let arguments =
      ["--obj=" + path, "--no-demangle", "--addresses", "--output-style=LLVM", "--inlines"]
      + offsets.map { "0x" + String($0, radix: 16) }
    let output: ProcessOutput
    do {
      output = try Subprocess.run(executable, arguments, timeoutMilliseconds: timeoutMilliseconds)
    } catch {
      return .failure(LLVMSymbolizerError(reason: "llvm-symbolizer did not start: \(error)"))
    }
    if output.timedOut {
      return .failure(LLVMSymbolizerError(reason: "llvm-symbolizer took over \(timeoutMilliseconds) ms"))
    }
    guard output.exitStatus == 0 else {
      return .failure(
        LLVMSymbolizerError(
          reason: "llvm-symbolizer ended with status \(output.exitStatus.map(String.init) ?? "signal")"))
    }
    guard let results = Self.parse(output.standardOutput, offsets: offsets) else {
      return .failure(LLVMSymbolizerError(reason: "llvm-symbolizer printed what this parser does not know"))
    }
    let found = results.contains { $0.contains { $0.file != nil || $0.function != nil } }
    if !found, !output.standardError.isEmpty {
      let message =
        String(decoding: output.standardError.prefix(200), as: UTF8.self)
        .split(separator: "\n").first.map(String.init) ?? ""
      return .failure(LLVMSymbolizerError(reason: message))
    }
    return .success(results)
  }

  /// Parses `--addresses --output-style=LLVM` output: for each address, a line with the address,
  /// then pairs of lines (function, `file:line:column`), then an empty line. Nil when it does not
  /// have that shape or answers other addresses than asked.
  package static func parse(_ bytes: [UInt8], offsets: [UInt64]) -> [[SymbolizerLocation]]? {
    let text = String(decoding: bytes, as: UTF8.self)
    let blocks = text.split(separator: "\n", omittingEmptySubsequences: false)
      .split(separator: "", omittingEmptySubsequences: true)
    guard blocks.count == offsets.count else { return nil }
    var results: [[SymbolizerLocation]] = []
    for (block, offset) in zip(blocks, offsets) {
      let lines = Array(block)
      guard lines.count >= 1, lines.count % 2 == 1, parseHex(lines[0]) == offset else { return nil }
      var locations: [SymbolizerLocation] = []
      var index = 1
      while index + 1 < lines.count {
        locations.append(parseLocation(function: lines[index], place: lines[index + 1]))
        index += 2
      }
      results.append(locations)
    }
    return results
  }

  package static func parseHex(_ text: Substring) -> UInt64? {
    guard text.hasPrefix("0x") else { return nil }
    return UInt64(text.dropFirst(2), radix: 16)
  }

  /// `function` and `file:line:column` (file may itself contain colons: split from the right).
  package static func parseLocation(function: Substring, place: Substring) -> SymbolizerLocation {
    var location = SymbolizerLocation()
    if function != "??" { location.function = String(function) }
    var parts = place.split(separator: ":", omittingEmptySubsequences: false)
    // Column, then line, when numeric; what remains is the file.
    if parts.count >= 3, let column = Int(parts[parts.count - 1]), let line = Int(parts[parts.count - 2]) {
      parts.removeLast(2)
      location.line = line > 0 ? line : nil
      location.column = column > 0 ? column : nil
    } else if parts.count >= 2, let line = Int(parts[parts.count - 1]) {
      parts.removeLast()
      location.line = line > 0 ? line : nil
    }
    let file = parts.joined(separator: ":")
    if file != "??", !file.isEmpty, !file.hasSuffix("<compiler-generated>") { location.file = file }
    if location.file == nil { location.line = nil }
    if location.line == nil { location.column = nil }
    return location
  }
}
