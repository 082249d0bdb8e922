// FuzzELFReader — libFuzzer target for ELFImage.parse(bytes:), the reader symbolication uses on
// module files found on disk at the next launch (untrusted input: a binary replaced or truncated
// by an update, a file that is not ELF at all, a hostile one).
//
// Entry points, in call order:
//   FuzzMain.run            dispatches on the arguments (shared: Fuzz/Support):
//     crumbs_fuzz_run       in a `-sanitize=fuzzer` build: libFuzzer's driver, calling fuzzOneInput
//     replay(files)         in a normal build: feeds each file given to fuzzOneInput and prints
//                           what the reader made of it; no files: says "not a fuzzer build"
//   fuzzOneInput            parse(bytes:), then lookups at every segment and symbol boundary,
//                           the package note (PackageNote.parse), and the check a debug file
//                           fetched from a debuginfod server passes (DebuginfodCache.check)
//
// Seeds (Fuzz/Corpus/elf-reader/) are tiny real ELF files: see Fuzz/README.md for the commands.
// The property checked: parse returns an image or throws PersistedFileError, never traps, and
// what it returns is self-consistent (symbols sorted, lookups land inside the symbol they
// return). Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsReports
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// One libFuzzer input. Any trap here is a finding.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
  _ = check(input)
  return 0
}

/// Parses `bytes` and checks what the reader promises about any result. Returns a one-line
/// summary for the replay mode.
func check(_ bytes: UnsafeRawBufferPointer) -> String {
  do {
    let image = try ELFImage.parse(bytes: bytes)
    precondition(image.buildID.count <= bytes.count, "build id longer than the file")
    let symbols = image.symbols
    precondition(symbols.count == image.symbolCount, "symbol count disagrees")
    var previous: UInt64 = 0
    for symbol in symbols {
      precondition(symbol.start >= previous, "symbols not sorted")
      previous = symbol.start
    }
    // Lookups at every boundary the file itself names, and just around them.
    var probes: [UInt64] = [0, UInt64.max]
    for segment in image.segments {
      probes += [
        segment.virtualAddress, segment.virtualAddress &+ segment.memorySize, segment.virtualAddress &- 1,
      ]
    }
    for symbol in symbols.prefix(256) {
      probes += [
        symbol.start, symbol.start &+ symbol.size, symbol.start &+ symbol.size &- 1, symbol.start &- 1,
      ]
    }
    for address in probes {
      guard let found = image.symbol(containing: address) else { continue }
      precondition(found.start <= address, "lookup returned a symbol starting above the address")
      precondition(found.size == 0 || address - found.start < found.size, "lookup outside the symbol")
    }
    // What a debuginfod download goes through: the same reader, a verdict, never a trap.
    let verdict = DebuginfodCache.check(bytes, buildID: image.buildID, kind: .debuginfo)
    precondition(verdict.map { !$0.isEmpty } ?? true, "a refusal without a reason")
    var package = ""
    switch image.packageNote {
    case .success(let note)?:
      precondition(note.fields.count <= PackageNote.maxKeys, "too many package note keys")
      precondition(
        note.fields.values.allSatisfy { $0.utf8.count <= PackageNote.maxValueBytes }, "a value past its bound"
      )
      package = "; package \(note.name ?? "?") \(note.version ?? "?")"
    case .failure(let failure)?:
      precondition(!failure.reason.isEmpty, "a package note failure without a reason")
      package = "; package note: \(failure.reason)"
    case nil:
      break
    }
    return "ELF type \(image.fileType), machine \(image.machine), \(image.segments.count) segments, "
      + "\(image.symbolCount) symbols from \(image.symbolTable.rawValue), build id \(image.buildID.count) bytes"
      + (image.problems.isEmpty ? "" : "; problems: " + image.problems.joined(separator: "; ")) + package
  } catch {
    precondition(!error.reason.isEmpty, "an error without a reason")
    return "rejected (\(error.kind.rawValue)): \(error.reason)"
  }
}

// MARK: - Main

FuzzMain.run(
  name: "FuzzELFReader", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in
    throw FuzzToolError(
      message: "ELF seeds are built with cc (see Fuzz/README.md), not by this tool: \(directory)")
  },
  describe: { bytes in bytes.withUnsafeBytes { check($0) } })
