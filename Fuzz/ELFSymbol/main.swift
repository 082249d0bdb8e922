// FuzzELFSymbol — libFuzzer target for the crash handler's symbol lookup
// (Sources/CrumbsSignalPath/crash/crumbs_elf_symbol.c), which reads the executable's file from inside
// a signal handler to name the frame of the termination message: the file may be truncated,
// replaced, or not ELF at all, and the lookup must stay inside it and end, whatever it holds.
// The same inputs go, as text, through the termination message's redaction (crumbs_redact.c).
//
// Entry points, in call order:
//   FuzzMain.run            dispatches on the arguments (shared: Fuzz/Support):
//     crumbs_fuzz_run       in a `-sanitize=fuzzer` build: libFuzzer's driver, calling fuzzOneInput
//     replay(files)         in a normal build: feeds each file given to fuzzOneInput
//     --make-seeds DIR ELF… writes seeds: each ELF file with the address of a function in it
//   fuzzOneInput → check    the lookup at the input's address, and the Swift name reader on what it found
//
// Input: one little-endian u64 (a file address), then the bytes of an ELF file. The property
// checked: the lookup returns a status, never reads outside the bytes (AddressSanitizer sees the
// buffer's end), never loops without end (libFuzzer's -timeout); a symbol it finds starts at or
// below the address; a name it gives is NUL-terminated within the buffer. Not signal-safe (an
// ordinary program).

import CFuzzDriver
import CrumbsSignalPath
import CrumbsSignalPathTesting
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// One libFuzzer input. Any trap or sanitizer report here is a finding.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  _ = check(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
  return 0
}

/// Runs the termination line's redaction (crumbs_redact.c, with the default keys, set below)
/// on the input's first 240 bytes as the handler runs it on the fatal message: it stays within
/// its output, whatever the text.
func checkRedaction(_ input: UnsafeRawBufferPointer) {
  var out = [CChar](repeating: 0, count: 240)
  let count = input.withMemoryRebound(to: CChar.self) {
    crumbs_termination_message_testing_redact($0.baseAddress, min($0.count, 240), &out, out.count)
  }
  precondition(count <= out.count, "redaction past its output")
}

/// Runs the lookup at the input's address, and the redaction on its bytes; returns a one-line
/// summary.
func check(_ input: UnsafeRawBufferPointer) -> String {
  checkRedaction(input)
  guard input.count >= 8 else { return "too short" }
  let address = input.loadUnaligned(as: UInt64.self)
  // A copy of exactly the file's bytes: reading one past its end is a heap overflow.
  let file = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, input.count - 8), alignment: 8)
  defer { file.deallocate() }
  file.copyMemory(from: UnsafeRawBufferPointer(rebasing: input[8...]))
  var name = [CChar](repeating: 0, count: 64)
  var start: UInt64 = 0
  let status = crumbs_elf_symbol_testing_lookup(
    file.baseAddress!.assumingMemoryBound(to: UInt8.self), input.count - 8, address, &name, name.count, &start
  )
  precondition((-1...1).contains(status), "unknown status \(status)")
  guard status == 1 else { return "status \(status)" }
  precondition(start <= address, "symbol at \(start) for \(address)")
  precondition(name.contains(0), "name not terminated")
  var simple = [CChar](repeating: 0, count: 32)
  let length = crumbs_swift_name_testing_simplify(name, &simple, simple.count)
  precondition(length < simple.count, "simplified name past its buffer")
  _ = crumbs_symbol_testing_is_crumbs(name)
  return "found \(String(cString: name)) at 0x\(String(start, radix: 16))"
}

/// Each ELF file as a seed, with the address of its first sized function symbol of .symtab (or
/// .dynsym), read by hand, one byte in.
func seed(fromELF bytes: [UInt8], name: String) throws -> [UInt8] {
  func u16(_ at: Int) -> UInt64 { UInt64(bytes[at]) | UInt64(bytes[at + 1]) << 8 }
  func u32(_ at: Int) -> UInt64 { u16(at) | u16(at + 2) << 16 }
  func u64(_ at: Int) -> UInt64 { u32(at) | u32(at + 4) << 32 }
  guard bytes.count > 64, bytes[0..<4] == [0x7f, 0x45, 0x4c, 0x46], bytes[4] == 2 else {
    throw FuzzToolError(message: "\(name): not an ELF64 file")
  }
  let shoff = Int(u64(0x28)), shnum = Int(u16(0x3c))
  var address: UInt64?
  for type: UInt64 in [2, 11] where address == nil {  // SHT_SYMTAB, then SHT_DYNSYM
    for index in 0..<shnum {
      let at = shoff + index * 64
      guard at + 64 <= bytes.count, u32(at + 4) == type else { continue }
      let offset = Int(u64(at + 24)), size = Int(u64(at + 32))
      for symbol in stride(from: offset, to: min(bytes.count, offset + size) - 23, by: 24)
      where bytes[symbol + 4] & 0xf == 2 && u64(symbol + 16) > 0 {  // STT_FUNC, sized
        address = u64(symbol + 8) + 1
        break
      }
    }
  }
  guard let address else { throw FuzzToolError(message: "\(name): no sized function symbol") }
  var input: [UInt8] = []
  withUnsafeBytes(of: address.littleEndian) { input += $0 }
  return input + bytes
}

let defaultKeys = Array("password\0passwd\0secret\0token\0api_key\0authorization\0cookie\0set-cookie\0".utf8)
_ = defaultKeys.withUnsafeBufferPointer {
  $0.withMemoryRebound(to: CChar.self) {
    crumbs_termination_message_set_redaction($0.baseAddress, $0.count, true)
  }
}

FuzzMain.run(
  name: "FuzzELFSymbol", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, files in
    mkdir(directory, 0o755)
    for path in files {
      let name = String(path.split(separator: "/").last ?? "elf")
      try FuzzMain.writeFile(
        directory + "/" + name, try seed(fromELF: try FuzzMain.readFile(path), name: name))
    }
    return files.count
  },
  describe: { bytes in bytes.withUnsafeBytes { check($0) } })
