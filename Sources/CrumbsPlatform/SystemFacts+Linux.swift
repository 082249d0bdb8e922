// SystemFacts+Linux.swift — facts about this machine and process read from /proc and /sys.
// Read once, at set-up; never on the hot path and never in a signal handler.

#if canImport(Glibc)
  import Glibc
#endif

package enum SystemFacts {
  /// The inode of /proc/<process>/ns/pid (`process`: a pid or "self"), or 0 when unreadable:
  /// a pid means something only inside its own pid namespace.
  package static func pidNamespace(of process: String) -> UInt64 {
    Syscall.inode(ofPath: "/proc/\(process)/ns/pid") ?? 0
  }

  /// This boot's id (/proc/sys/kernel/random/boot_id) as 16 bytes; zeros when unreadable.
  /// Clock ticks stored in a ring compare with "now" only within one boot.
  package static let bootID: [UInt8] = {
    // Parsed as bytes (hex digits, dashes ignored): it is first needed on the caller's thread of
    // ring creation, where String processing costs its first uses of generic code.
    let none = [UInt8](repeating: 0, count: 16)
    guard let bytes = try? Syscall.readFile("/proc/sys/kernel/random/boot_id", limit: 64) else { return none }
    var id: [UInt8] = []
    var high: UInt8?
    for byte in bytes where byte != UInt8(ascii: "-") && byte != UInt8(ascii: "\n") {
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: return none
      }
      if let first = high {
        id.append(first << 4 | digit)
        high = nil
      } else {
        high = digit
      }
    }
    return id.count == 16 && high == nil ? id : none
  }()

  /// The running executable (/proc/self/exe), or "" when unreadable.
  package static let executablePath: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return "" }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }()

  /// Whether the CPU's cycle counter can stand in for CLOCK_MONOTONIC: on x86_64 when the kernel
  /// itself keeps time with the TSC (so it is invariant and synchronized across CPUs); on aarch64
  /// the generic timer always is.
  package static let cpuCounterIsReliable: Bool = {
    #if arch(x86_64)
      guard
        let bytes = try? Syscall.readFile(
          "/sys/devices/system/clocksource/clocksource0/current_clocksource", limit: 256)
      else { return false }
      // The first line, compared in place: a split would make an array of slices (a generic
      // metadata instantiation on the caller's thread of every ring creation).
      let end = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
      return bytes[..<end].elementsEqual("tsc".utf8)
    #elseif arch(arm64)
      return true
    #else
      return false
    #endif
  }()

  /// Where this process's memory cgroup is: `v2:/PATH` (unified hierarchy) or `v1:/PATH` (the
  /// v1 memory controller), from /proc/self/cgroup; nil when neither is listed. Parsed as bytes:
  /// it runs on the caller's thread of every ring creation.
  package static func memoryCgroup(procFile: String = "/proc/self/cgroup") -> String? {
    guard let bytes = try? Syscall.readFile(procFile, limit: 1 << 16) else { return nil }
    var unified: String?
    for line in bytes.split(separator: UInt8(ascii: "\n")) {
      let fields = line.split(separator: UInt8(ascii: ":"), maxSplits: 2, omittingEmptySubsequences: false)
      guard fields.count == 3 else { continue }
      let path = String(decoding: fields[2], as: UTF8.self)
      if fields[1].split(separator: UInt8(ascii: ",")).contains(where: { $0.elementsEqual("memory".utf8) }) {
        return "v1:" + path
      }
      if fields[0].elementsEqual("0".utf8) && fields[1].isEmpty { unified = "v2:" + path }
    }
    return unified
  }

  /// The OOM-kill count of a memory cgroup named as `memoryCgroup` names it: `oom_kill` in
  /// memory.events (v2) or memory.oom_control (v1). Nil when unreadable.
  package static func cgroupOOMKills(cgroup: String, root: String = "/sys/fs/cgroup") -> UInt64? {
    let file: String
    if cgroup.hasPrefix("v2:") {
      file = root + String(cgroup.dropFirst(3)) + "/memory.events"
    } else if cgroup.hasPrefix("v1:") {
      file = root + "/memory" + String(cgroup.dropFirst(3)) + "/memory.oom_control"
    } else {
      return nil
    }
    guard let bytes = try? Syscall.readFile(file.collapsingDoubleSlashes(), limit: 1 << 16) else {
      return nil
    }
    for line in bytes.split(separator: UInt8(ascii: "\n")) {
      let fields = line.split(separator: UInt8(ascii: " "))
      if fields.count == 2, fields[0].elementsEqual("oom_kill".utf8) {
        return UInt64(String(decoding: fields[1], as: UTF8.self))
      }
    }
    return nil
  }

  /// The process's environment variables whose names start with `prefix`, read from `environ`
  /// as it is now. Only the matching entries become Strings: Foundation's
  /// `ProcessInfo.processInfo.environment` builds the whole dictionary, and its first use sets
  /// up ProcessInfo — together about 0.4 ms, a third of `CrumbsClient.start` before this.
  package static func environment(prefixed prefix: String) -> [String: String] {
    var found: [String: String] = [:]
    let cPrefix = prefix.utf8CString
    let length = cPrefix.count - 1
    var entry = environ
    while let text = entry.pointee {
      entry += 1
      guard cPrefix.withUnsafeBufferPointer({ strncmp(text, $0.baseAddress!, length) }) == 0 else { continue }
      let line = String(cString: text)
      guard let equals = line.firstIndex(of: "=") else { continue }
      found[String(line[..<equals])] = String(line[line.index(after: equals)...])
    }
    return found
  }

  /// Whether this reader runs in the boot that wrote `bootID`.
  package static func isCurrentBoot(_ other: [UInt8]) -> Bool {
    other == bootID && !bootID.allSatisfy { $0 == 0 }
  }

  /// Whether `bootID` is known to be another boot's: both ids known (16 bytes, not all zero) and
  /// different, so the machine restarted since it was written. An unknown id proves nothing
  /// (not the same as `!isCurrentBoot`, which is also true when either id is unknown).
  package static func isAnotherBoot(_ other: [UInt8]) -> Bool {
    let unknown: ([UInt8]) -> Bool = { $0.count != 16 || $0.allSatisfy { $0 == 0 } }
    return !unknown(other) && !unknown(bootID) && other != bootID
  }

  /// A field of /etc/os-release: PRETTY_NAME ("Debian GNU/Linux 12 (bookworm)") by default,
  /// NAME ("Debian GNU/Linux").
  package static func osRelease(_ name: String = "PRETTY_NAME", file: String = "/etc/os-release") -> String? {
    guard let bytes = try? Syscall.readFile(file, limit: 1 << 16) else { return nil }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    where line.hasPrefix(name + "=") {
      return String(line.dropFirst(name.count + 1)).trimmingCharacters(in: "\"")
    }
    return nil
  }

  /// A /proc/meminfo field in bytes.
  package static func meminfo(_ name: String, file: String = "/proc/meminfo") -> UInt64? {
    guard let bytes = try? Syscall.readFile(file, limit: 1 << 16) else { return nil }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    where line.hasPrefix(name + ":") {
      let fields = line.split(separator: " ")
      guard fields.count >= 2, let kilobytes = UInt64(fields[1]) else { return nil }
      let (bytes, overflow) = kilobytes.multipliedReportingOverflow(by: 1024)
      return overflow ? nil : bytes
    }
    return nil
  }
}

extension String {
  /// `self` with every run of slashes made one (a byte loop: String's generic `replacing` brings
  /// in the string-processing library, its pages and its time, on the path of ring creation).
  fileprivate func collapsingDoubleSlashes() -> String {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    for byte in utf8 where !(byte == UInt8(ascii: "/") && bytes.last == UInt8(ascii: "/")) {
      bytes.append(byte)
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// `self` without leading and trailing characters from `set`.
  package func trimmingCharacters(in set: String) -> String {
    let characters = Set(set)
    guard let first = firstIndex(where: { !characters.contains($0) }),
      let last = lastIndex(where: { !characters.contains($0) })
    else { return "" }
    return String(self[first...last])
  }
}
