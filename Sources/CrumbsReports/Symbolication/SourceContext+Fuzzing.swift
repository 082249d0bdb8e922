// SourceContext+Fuzzing.swift — the checks Fuzz/SourceLines runs on arbitrary bytes, and the
// fuzz regression tests replay: the two readers of bytes that file:line and source lines pass
// through, a source file cut into lines (SourceExcerpt: the file is whatever a path in DWARF
// names) and llvm-symbolizer's answer (LLVMSymbolizer.parse: a tool's output, parsed
// defensively).
//
// Entry point: SourceExcerpt.fuzzViolation(_:) — the first three bytes choose the line, the
// radius and the longest line kept, the rest is the file; then the whole input as
// llvm-symbolizer's output, asked for the addresses its own lines start with; then as a path a
// debuginfod cache names a kept source by (DebuginfodCache.sourceEntryName) and as a fetched
// source (checkSource). Nil when every check holds, else what broke. Not signal-safe.

extension SourceExcerpt {
  package static func fuzzViolation(_ bytes: [UInt8]) -> String? {
    guard bytes.count >= 3 else { return nil }
    let line = Int(bytes[0]) + 1
    let radius = Int(bytes[1] % 8)
    let maxLineBytes = Int(bytes[2]) + 1
    let file = Array(bytes.dropFirst(3))
    if let excerpt = lines(in: file, around: line, radius: radius, maxLineBytes: maxLineBytes) {
      if excerpt.startLine < 1 || excerpt.startLine > line {
        return "start \(excerpt.startLine) for line \(line)"
      }
      if excerpt.lines.count > 2 * radius + 1 { return "\(excerpt.lines.count) lines for radius \(radius)" }
      if excerpt.startLine + excerpt.lines.count - 1 < line { return "the excerpt ends before line \(line)" }
      // A cut line: at most the bytes kept, then "…" (3 bytes); U+FFFD may stand for one byte.
      for text in excerpt.lines where text.unicodeScalars.count > maxLineBytes + 1 {
        return "a line of \(text.unicodeScalars.count) characters kept of \(maxLineBytes) bytes"
      }
    }
    // The same bytes as a path DWARF names, kept in a debuginfod cache: one file name, within
    // the cache's build ID folder; and as a fetched source file: refused unless text.
    let path = String(decoding: bytes, as: UTF8.self)
    if let name = DebuginfodCache.sourceEntryName(path) {
      if !name.hasPrefix("source#") || name.utf8.contains(UInt8(ascii: "/")) || name.utf8.count > 255 {
        return "source entry name \(name.debugDescription) for \(path.debugDescription)"
      }
    }
    if bytes.contains(0), DebuginfodCache.checkSource(bytes, limit: 1 << 20) == nil {
      return "fetched source with a NUL byte accepted"
    }
    // The same bytes as llvm-symbolizer's answer, for the addresses its lines name.
    let text = String(decoding: bytes, as: UTF8.self)
    let offsets = text.split(separator: "\n").prefix(64).compactMap(LLVMSymbolizer.parseHex)
    if let answers = LLVMSymbolizer.parse(bytes, offsets: offsets) {
      if answers.count != offsets.count { return "\(answers.count) answers for \(offsets.count) addresses" }
      for location in answers.joined() {
        if location.line != nil && location.file == nil { return "a line without a file" }
        if location.column != nil && location.line == nil { return "a column without a line" }
        if let line = location.line, line <= 0 { return "line \(line)" }
      }
    }
    return nil
  }
}
