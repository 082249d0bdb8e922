// FuzzSourceLines — libFuzzer target for the readers of bytes behind a frame's file, line and
// source lines: SourceExcerpt.lines (a source file a path in DWARF names, cut into lines) and
// LLVMSymbolizer.parse (llvm-symbolizer's answer), through SourceExcerpt.fuzzViolation (shared
// with the regression replay).
//
// Entry points, in call order:
//   FuzzMain.run            dispatches on the arguments (shared: Fuzz/Support)
//   fuzzOneInput            SourceExcerpt.fuzzViolation; a violation is a finding
//
// Seeds: `.build/debug/FuzzSourceLines --make-seeds Fuzz/Corpus/source-lines`. Not signal-safe.

import CFuzzDriver
import CrumbsReports
import FuzzSupport

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  if let violation = SourceExcerpt.fuzzViolation(bytes) { fatalError(violation) }
  return 0
}

func makeSeeds(in directory: String) throws -> Int {
  // Three bytes (line − 1, radius, longest line − 1), then the file; or llvm-symbolizer's answer.
  let source = "import Foundation\r\n\nfunc f() {\n  let é = \"tab\there\"\n}\n"
  let seeds: [(String, String)] = [
    ("swift-file", "\u{3}\u{2}\u{50}" + source),
    ("first-line", "\u{0}\u{3}\u{7f}" + source),
    ("past-the-end", "\u{40}\u{1}\u{7f}" + source),
    ("long-line-cut", "\u{0}\u{0}\u{4}" + String(repeating: "é", count: 40)),
    ("nul-byte", "\u{1}\u{1}\u{7f}a\n\u{0}\nb"),
    (
      "symbolizer-answer",
      "0x1234\n$s3app5storeyyF\n/src/App.swift:90:51\n$s3app6recordyyF\n/src/App.swift:84:5\n\n"
        + "0x99\n??\n??:0:0\n\n"
    ),
    ("symbolizer-colons", "0x10\nf\nC:/odd:path:12:3\n\n"),
  ]
  return try FuzzMain.writeSeeds(seeds, in: directory)
}

FuzzMain.run(
  name: "FuzzSourceLines", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in SourceExcerpt.fuzzViolation(bytes) ?? "every check holds" })
