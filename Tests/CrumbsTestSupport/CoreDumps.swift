// CoreDumps.swift — what the kernel does with a crashing child's core here (RLIMIT_CORE,
// core_pattern), and how many threads an ELF core file holds (its NT_PRSTATUS notes).

import CrumbsPlatform

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package enum CoreDumps {
  /// /proc/sys/kernel/core_pattern without its newline ("" when unreadable).
  package static var pattern: String {
    let bytes = (try? Syscall.readFile("/proc/sys/kernel/core_pattern", limit: 4096)) ?? []
    return String(decoding: bytes, as: UTF8.self).trimmingSuffix("\n")
  }

  /// Whether a child started now, crashing by a signal whose default action dumps core, would
  /// have a core written (its RLIMIT_CORE is this process's): the crash handler then keeps the
  /// other threads parked instead of ending them.
  package static var wouldBeWritten: Bool {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit) == 0 else { return false }
    let pattern = pattern
    return pattern.hasPrefix("|") || (limit.rlim_cur > 0 && !pattern.isEmpty)
  }

  /// The number of threads in the ELF core file at `path` (NT_PRSTATUS notes), or nil when it
  /// is not one (x86_64/aarch64 ELF64 little-endian).
  package static func threadCount(core path: String) -> Int? {
    guard let bytes = try? Syscall.readFile(path, limit: 256 << 20), bytes.count >= 64,
      bytes[0] == 0x7f, bytes[1] == 0x45, bytes[2] == 0x4c, bytes[3] == 0x46, bytes[4] == 2, bytes[5] == 1,
      word(bytes, 16, 2) == 4  // ET_CORE
    else { return nil }
    let headersAt = word(bytes, 32, 8)
    let size = word(bytes, 54, 2)
    let count = word(bytes, 56, 2)
    var threads = 0
    for index in 0..<count {
      let header = headersAt + index * size
      guard header + 56 <= bytes.count else { return nil }
      guard word(bytes, header, 4) == 4 else { continue }  // PT_NOTE
      var note = word(bytes, header + 8, 8)
      let end = note + word(bytes, header + 32, 8)
      guard end <= bytes.count else { return nil }
      while note + 12 <= end {
        let nameSize = word(bytes, note, 4)
        let descriptorSize = word(bytes, note + 4, 4)
        if word(bytes, note + 8, 4) == 1 { threads += 1 }  // NT_PRSTATUS
        note += 12 + (nameSize + 3) / 4 * 4 + (descriptorSize + 3) / 4 * 4
      }
    }
    return threads
  }

  private static func word(_ bytes: [UInt8], _ offset: Int, _ size: Int) -> Int {
    guard offset >= 0, offset + size <= bytes.count else { return Int.max / 4 }
    var value = 0
    for index in (0..<size).reversed() { value = value << 8 | Int(bytes[offset + index]) }
    return value
  }
}

extension String {
  fileprivate func trimmingSuffix(_ suffix: String) -> String {
    hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
  }
}
