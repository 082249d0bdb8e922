// FuzzCFIReader — libFuzzer target for the crash handler's .eh_frame_hdr / .eh_frame parser
// (Sources/CrumbsSignalPath/unwind/crumbs_cfi.c), which reads bytes a compiler and a linker wrote, in a
// process whose memory may be damaged, from inside a signal handler: it must stay inside the
// bytes it was given and end, whatever they hold.
//
// Entry points, in call order:
//   FuzzMain.run            dispatches on the arguments (shared: Fuzz/Support):
//     crumbs_fuzz_run       in a `-sanitize=fuzzer` build: libFuzzer's driver, calling fuzzOneInput
//     replay(files)         in a normal build: feeds each file given to fuzzOneInput
//     --make-seeds DIR ELF… writes seeds cut out of real ELF files (below)
//   fuzzOneInput → check    the parser at the input's pc and around it
//
// Input: three little-endian u64 — the address the bytes are loaded at, the .eh_frame_hdr's
// address, the pc — then the bytes (a module's segment holding .eh_frame_hdr and .eh_frame). The
// property checked: the parser returns a status, never reads outside the bytes (AddressSanitizer
// sees the input buffer's end), never loops without end (libFuzzer's -timeout), and a row it
// returns covers the pc. Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsSignalPath
import CrumbsSignalPathTesting
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// One libFuzzer input. Any trap or sanitizer report here is a finding.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
  _ = check(input)
  return 0
}

func word(_ bytes: UnsafeRawBufferPointer, _ index: Int) -> UInt64 {
  bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)
}

/// Runs the parser at the input's pc and its neighbours; returns a one-line summary.
func check(_ input: UnsafeRawBufferPointer) -> String {
  guard input.count > 24 else { return "too short" }
  let base = word(input, 0), header = word(input, 1), pc = word(input, 2)
  // A copy of exactly the segment's bytes: reading one past its end is a heap overflow.
  let segment = UnsafeMutableRawBufferPointer.allocate(byteCount: input.count - 24, alignment: 8)
  defer { segment.deallocate() }
  segment.copyMemory(from: UnsafeRawBufferPointer(rebasing: input[24...]))
  var summary = ""
  for probe in [pc, pc &- 1, pc &+ 1, header, base] {
    var result = crumbs_cfi_testing_result()
    crumbs_cfi_testing_row(
      segment.baseAddress!.assumingMemoryBound(to: UInt8.self), segment.count, base, header, probe, &result)
    precondition((0...3).contains(result.status), "unknown status \(result.status)")
    if result.status == 0 {
      precondition(
        result.function_start <= probe && probe < result.function_end,
        "row for \(probe) from an FDE covering [\(result.function_start), \(result.function_end))")
      precondition(result.return_rule <= 5, "unknown rule \(result.return_rule)")
    }
    if probe == pc {
      summary =
        "status \(result.status): function [0x\(String(result.function_start, radix: 16)), "
        + "0x\(String(result.function_end, radix: 16))), CFA r\(result.cfa_register)+\(result.cfa_offset), "
        + "return r\(result.return_register) rule \(result.return_rule) \(result.return_value)"
    }
  }
  return summary
}

// MARK: - Seeds

/// The segment holding PT_GNU_EH_FRAME of an ELF64 file, as fuzz inputs: one per FDE-table
/// entry (first, middle, last), with the pc one byte into that function.
func seeds(fromELF bytes: [UInt8], name: String) throws -> [(String, [UInt8])] {
  func u16(_ at: Int) -> UInt64 { UInt64(bytes[at]) | UInt64(bytes[at + 1]) << 8 }
  func u32(_ at: Int) -> UInt64 { u16(at) | u16(at + 2) << 16 }
  func u64(_ at: Int) -> UInt64 { u32(at) | u32(at + 4) << 32 }
  guard bytes.count > 64, bytes[0..<4] == [0x7f, 0x45, 0x4c, 0x46], bytes[4] == 2 else {
    throw FuzzToolError(message: "\(name): not an ELF64 file")
  }
  let phoff = Int(u64(0x20)), phentsize = Int(u16(0x36)), phnum = Int(u16(0x38))
  var header: UInt64?
  var loads: [(offset: UInt64, address: UInt64, size: UInt64)] = []
  for index in 0..<phnum {
    let at = phoff + index * phentsize
    guard at + 56 <= bytes.count else { break }
    let type = u32(at)
    if type == 0x6474_e550 { header = u64(at + 16) }  // PT_GNU_EH_FRAME: p_vaddr
    // PT_LOAD: offset, vaddr, filesz.
    if type == 1 { loads.append((u64(at + 8), u64(at + 16), u64(at + 32))) }
  }
  guard let header, let load = loads.first(where: { header >= $0.address && header < $0.address + $0.size })
  else { throw FuzzToolError(message: "\(name): no PT_GNU_EH_FRAME in a PT_LOAD") }
  let segment = Array(bytes[Int(load.offset)..<min(bytes.count, Int(load.offset + load.size))])
  // The table (datarel sdata4 pairs) after version, 3 encodings, eh_frame_ptr and fde_count.
  let table = Int(header - load.address) + 12
  let count = Int(segment[table - 4]) | Int(segment[table - 3]) << 8
  var result: [(String, [UInt8])] = []
  for (label, entry) in [("first", 0), ("middle", count / 2), ("last", max(0, count - 1))] where count > 0 {
    let at = table + entry * 8
    let relative = Int32(
      bitPattern: UInt32(segment[at]) | UInt32(segment[at + 1]) << 8
        | UInt32(segment[at + 2]) << 16 | UInt32(segment[at + 3]) << 24)
    let pc = UInt64(Int64(header) + Int64(relative) + 1)
    var input: [UInt8] = []
    for value in [load.address, header, pc] { withUnsafeBytes(of: value.littleEndian) { input += $0 } }
    result.append(("\(name)-\(label)", input + segment))
  }
  return result
}

// MARK: - Main

FuzzMain.run(
  name: "FuzzCFIReader", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, files in
    mkdir(directory, 0o755)
    var written = 0
    for path in files {
      let name = String(path.split(separator: "/").last ?? "elf")
      for (seed, bytes) in try seeds(fromELF: try FuzzMain.readFile(path), name: name) {
        try FuzzMain.writeFile(directory + "/" + seed, bytes)
        written += 1
      }
    }
    return written
  },
  describe: { bytes in bytes.withUnsafeBytes { check($0) } })
