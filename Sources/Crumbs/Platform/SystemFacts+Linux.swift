// SystemFacts+Linux.swift — facts about this machine and process read from /proc and /sys.
// Read once, at set-up; never on the hot path and never in a signal handler.

#if canImport(Glibc)
  import Glibc
#endif

enum SystemFacts {
  /// This boot's id (/proc/sys/kernel/random/boot_id) as 16 bytes; zeros when unreadable.
  /// Clock ticks stored in a ring compare with "now" only within one boot.
  static let bootID: [UInt8] = {
    guard let bytes = try? Syscall.readFile("/proc/sys/kernel/random/boot_id", limit: 64),
      let text = String(validating: bytes, as: UTF8.self),
      let id = SessionID(text.trimmingCharacters(in: " \n"))
    else { return [UInt8](repeating: 0, count: 16) }
    return id.bytes
  }()

  /// The running executable (/proc/self/exe), or "" when unreadable.
  static let executablePath: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return "" }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }()

  /// Whether the CPU's cycle counter can stand in for CLOCK_MONOTONIC: on x86_64 when the kernel
  /// itself keeps time with the TSC (so it is invariant and synchronized across CPUs); on aarch64
  /// the generic timer always is.
  static let cpuCounterIsReliable: Bool = {
    #if arch(x86_64)
      guard
        let bytes = try? Syscall.readFile(
          "/sys/devices/system/clocksource/clocksource0/current_clocksource", limit: 256)
      else { return false }
      return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \n") == "tsc"
    #elseif arch(arm64)
      return true
    #else
      return false
    #endif
  }()

  /// Whether this reader runs in the boot that wrote `bootID`.
  static func isCurrentBoot(_ other: [UInt8]) -> Bool {
    other == bootID && !bootID.allSatisfy { $0 == 0 }
  }
}

extension String {
  /// `self` without leading and trailing characters from `set`.
  func trimmingCharacters(in set: String) -> String {
    let characters = Set(set)
    guard let first = firstIndex(where: { !characters.contains($0) }),
      let last = lastIndex(where: { !characters.contains($0) })
    else { return "" }
    return String(self[first...last])
  }
}
