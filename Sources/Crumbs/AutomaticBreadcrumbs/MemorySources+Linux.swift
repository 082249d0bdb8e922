// MemorySources+Linux.swift — what the kernel says about memory, read from /proc and /sys.
//
// Entry points, in call order:
//   MemorySources.locate(configuration)   which files exist for this process (under a root prefix,
//                                         so tests feed fixture files in the kernel's formats)
//   MemorySources.read(at:)               one MemorySample: PSI, the cgroup's usage/limit/events,
//                                         /proc/meminfo
//   the parsers (KernelText.*)            PSI lines, flat-keyed files, single numbers
//
// Formats (as the kernel writes them):
//   /proc/pressure/memory, <cgroup v2>/memory.pressure
//       some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//       full avg10=0.00 avg60=0.00 avg300=0.00 total=0          (total: stall time in µs)
//   <cgroup v2>/memory.events         low 0 / high 0 / max 0 / oom 0 / oom_kill 0 / oom_group_kill 0
//   <cgroup v2>/memory.current, memory.max, memory.high   a number of bytes, or "max"
//   <cgroup v1>/memory.usage_in_bytes, memory.limit_in_bytes, memory.failcnt   numbers
//   <cgroup v1>/memory.oom_control     oom_kill_disable 0 / under_oom 0 / oom_kill 0
//   /proc/meminfo                      MemTotal:  24684224 kB / MemAvailable: ... kB
// Not signal-safe; runs on the monitor's thread.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// One reading of every memory source, at one time.
struct MemorySample: Equatable {
  /// CLOCK_MONOTONIC nanoseconds when it was read.
  var monotonicNanoseconds: UInt64
  var pressure: PressureStall?
  var cgroup: CgroupMemory?
  var system: SystemMemory?
}

/// A PSI file's two lines.
struct PressureStall: Equatable {
  var someAverage10: Double
  var fullAverage10: Double
  /// Total stall time, µs since boot (or since the cgroup was made).
  var someTotalMicroseconds: UInt64
  var fullTotalMicroseconds: UInt64
}

/// A memory cgroup's figures. Counters are cumulative; the assessor looks at their deltas.
struct CgroupMemory: Equatable {
  enum Version: String { case v1, v2 }
  var version: Version
  /// The cgroup, as /proc/self/cgroup names it (e.g. `/system.slice/app.service`).
  var path: String
  var usageBytes: UInt64
  /// The tightest limit of this cgroup and its ancestors (memory.max / memory.limit_in_bytes);
  /// nil when unlimited.
  var limitBytes: UInt64?
  /// v2 memory.high, nil when "max".
  var highBytes: UInt64?
  /// v2 memory.events `high`, `max`, `oom`; v1 memory.failcnt counts as `max` (limit hit).
  var highEvents: UInt64 = 0
  var maxEvents: UInt64 = 0
  var oomEvents: UInt64 = 0
  var oomKills: UInt64 = 0
  /// v1 memory.oom_control `under_oom`.
  var underOOM: Bool = false
}

/// /proc/meminfo's two figures that matter.
struct SystemMemory: Equatable {
  var totalBytes: UInt64
  var availableBytes: UInt64
}

/// The files the monitor reads, resolved once at start.
struct MemorySources {
  /// PSI file: the cgroup's own memory.pressure on v2, else /proc/pressure/memory.
  var pressureFile: String?
  var cgroup: (version: CgroupMemory.Version, path: String, directory: String)?
  /// The cgroup directory whose limit is the tightest (this one or an ancestor).
  var limitDirectory: String?
  var meminfoFile: String?

  /// Finds what exists under `root` ("" for the real system). `cgroup` overrides
  /// /proc/self/cgroup ("v2:/path" or "v1:/path", as `SystemFacts.memoryCgroup` names it).
  static func locate(root: String, cgroup override: String?) -> MemorySources {
    var sources = MemorySources()
    let named = override ?? SystemFacts.memoryCgroup(procFile: root + "/proc/self/cgroup")
    if let named {
      let version: CgroupMemory.Version = named.hasPrefix("v1:") ? .v1 : .v2
      let path = String(named.dropFirst(3))
      let mounts =
        version == .v1
        ? [root + "/sys/fs/cgroup/memory"]
        : [root + "/sys/fs/cgroup", root + "/sys/fs/cgroup/unified"]
      let probe = version == .v1 ? "memory.usage_in_bytes" : "memory.current"
      for mount in mounts {
        let directory = joined(mount, path)
        if Syscall.fileExists(directory + "/" + probe) {
          sources.cgroup = (version, path, directory)
          sources.limitDirectory = tightestLimit(from: directory, mount: mount, version: version)
          if version == .v2, Syscall.fileExists(directory + "/memory.pressure") {
            sources.pressureFile = directory + "/memory.pressure"
          }
          break
        }
      }
    }
    if sources.pressureFile == nil, Syscall.fileExists(root + "/proc/pressure/memory") {
      sources.pressureFile = root + "/proc/pressure/memory"
    }
    if Syscall.fileExists(root + "/proc/meminfo") { sources.meminfoFile = root + "/proc/meminfo" }
    return sources
  }

  /// The directory, from `directory` up to `mount`, with the smallest limit (nil: none limited).
  private static func tightestLimit(from directory: String, mount: String, version: CgroupMemory.Version)
    -> String?
  {
    var buffer = [UInt8](repeating: 0, count: 256)
    var best: (String, UInt64)?
    var current = directory
    while current.count >= mount.count {
      if let limit = readLimit(current, version: version, buffer: &buffer), limit < (best?.1 ?? .max) {
        best = (current, limit)
      }
      if current == mount { break }
      current = Syscall.directoryName(of: current)
    }
    return best?.0
  }

  fileprivate static func readLimit(_ directory: String, version: CgroupMemory.Version, buffer: inout [UInt8])
    -> UInt64?
  {
    let file = directory + (version == .v1 ? "/memory.limit_in_bytes" : "/memory.max")
    guard let count = try? Syscall.readSmallFile(file, into: &buffer) else { return nil }
    return KernelText.limit(buffer[0..<count])
  }

  private static func joined(_ mount: String, _ path: String) -> String {
    path == "/" || path.isEmpty ? mount : mount + (path.hasPrefix("/") ? path : "/" + path)
  }

  /// Reads every located source now. A file that vanished or does not parse leaves its part nil.
  func read(at monotonicNanoseconds: UInt64, buffer: inout [UInt8]) -> MemorySample {
    var sample = MemorySample(monotonicNanoseconds: monotonicNanoseconds)
    if let pressureFile, let count = try? Syscall.readSmallFile(pressureFile, into: &buffer) {
      sample.pressure = KernelText.pressureStall(buffer[0..<count])
    }
    if let cgroup {
      sample.cgroup = readCgroup(
        cgroup.version, path: cgroup.path, directory: cgroup.directory, buffer: &buffer)
    }
    if let meminfoFile, let count = try? Syscall.readSmallFile(meminfoFile, into: &buffer) {
      sample.system = KernelText.systemMemory(buffer[0..<count])
    }
    return sample
  }

  private func readCgroup(
    _ version: CgroupMemory.Version, path: String, directory: String, buffer: inout [UInt8]
  ) -> CgroupMemory? {
    func number(_ name: String) -> UInt64? {
      guard let count = try? Syscall.readSmallFile(directory + "/" + name, into: &buffer) else { return nil }
      return KernelText.limit(buffer[0..<count])
    }
    func keyed(_ name: String) -> [(Substring, UInt64)] {
      guard let count = try? Syscall.readSmallFile(directory + "/" + name, into: &buffer) else { return [] }
      return KernelText.keyedNumbers(buffer[0..<count])
    }
    let limit = limitDirectory.flatMap { Self.readLimit($0, version: version, buffer: &buffer) }
    switch version {
    case .v2:
      guard let current = number("memory.current") else { return nil }
      var figures = CgroupMemory(version: .v2, path: path, usageBytes: current, limitBytes: limit)
      figures.highBytes = number("memory.high")
      for (key, value) in keyed("memory.events") {
        switch key {
        case "high": figures.highEvents = value
        case "max": figures.maxEvents = value
        case "oom": figures.oomEvents = value
        case "oom_kill": figures.oomKills = value
        default: break
        }
      }
      return figures
    case .v1:
      guard let usage = number("memory.usage_in_bytes") else { return nil }
      var figures = CgroupMemory(version: .v1, path: path, usageBytes: usage, limitBytes: limit)
      figures.maxEvents = number("memory.failcnt") ?? 0
      for (key, value) in keyed("memory.oom_control") {
        switch key {
        case "under_oom": figures.underOOM = value != 0
        case "oom_kill": figures.oomKills = value
        default: break
        }
      }
      return figures
    }
  }
}

/// Parsers for the kernel's text formats. Pure; tolerant of extra keys and lines.
enum KernelText {
  /// Both lines of a PSI file; nil when the `some` line is missing (a `full` line is optional:
  /// old kernels' cpu file has none, and it reads as zero).
  static func pressureStall(_ bytes: ArraySlice<UInt8>) -> PressureStall? {
    var stall = PressureStall(
      someAverage10: 0, fullAverage10: 0, someTotalMicroseconds: 0, fullTotalMicroseconds: 0)
    var sawSome = false
    for line in bytes.split(separator: UInt8(ascii: "\n")) {
      let fields = line.split(separator: UInt8(ascii: " "))
      guard let kind = fields.first else { continue }
      var average10: Double?
      var total: UInt64?
      for field in fields.dropFirst() {
        guard let equals = field.firstIndex(of: UInt8(ascii: "=")) else { continue }
        let key = String(decoding: field[field.startIndex..<equals], as: UTF8.self)
        let value = String(decoding: field[(equals + 1)...], as: UTF8.self)
        if key == "avg10" { average10 = Double(value) }
        if key == "total" { total = UInt64(value) }
      }
      guard let average10, let total else { continue }
      if kind.elementsEqual("some".utf8) {
        stall.someAverage10 = average10
        stall.someTotalMicroseconds = total
        sawSome = true
      } else if kind.elementsEqual("full".utf8) {
        stall.fullAverage10 = average10
        stall.fullTotalMicroseconds = total
      }
    }
    return sawSome ? stall : nil
  }

  /// `key value` lines (memory.events, memory.oom_control, memory.stat).
  static func keyedNumbers(_ bytes: ArraySlice<UInt8>) -> [(Substring, UInt64)] {
    String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ")
      guard fields.count == 2, let value = UInt64(fields[1]) else { return nil }
      return (fields[0], value)
    }
  }

  /// A limit or counter file: a number, or "max" (v2 unlimited) → nil. v1 "unlimited" is a
  /// huge number (PAGE_COUNTER_MAX pages, ~2^63): anything at or above 2^62 reads as nil.
  static func limit(_ bytes: ArraySlice<UInt8>) -> UInt64? {
    let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \n")
    guard let value = UInt64(text), value < 1 << 62 else { return nil }
    return value
  }

  /// MemTotal and MemAvailable from /proc/meminfo (kB in the file, bytes here).
  static func systemMemory(_ bytes: ArraySlice<UInt8>) -> SystemMemory? {
    // Bytes, not Strings: this runs every sampling interval, and String splitting of the 1.5 KB
    // /proc/meminfo cost ~0.4 ms of CPU per sample. The two lines wanted come first; stop there.
    var total: UInt64?
    var available: UInt64?
    var lineStart = bytes.startIndex
    while lineStart < bytes.endIndex, total == nil || available == nil {
      let lineEnd = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
      let line = bytes[lineStart..<lineEnd]
      if line.starts(with: "MemTotal:".utf8) {
        total = kibibytes(line.dropFirst("MemTotal:".utf8.count))
      } else if line.starts(with: "MemAvailable:".utf8) {
        available = kibibytes(line.dropFirst("MemAvailable:".utf8.count))
      }
      lineStart = lineEnd < bytes.endIndex ? bytes.index(after: lineEnd) : lineEnd
    }
    guard let total, let available, total > 0 else { return nil }
    return SystemMemory(totalBytes: total, availableBytes: available)
  }

  /// "   16318500 kB" → bytes (a value without a unit is taken as bytes); nil when it does not
  /// parse or would overflow.
  private static func kibibytes(_ field: ArraySlice<UInt8>) -> UInt64? {
    var value: UInt64 = 0
    var digits = 0
    var index = field.startIndex
    while index < field.endIndex, field[index] == UInt8(ascii: " ") { index += 1 }
    while index < field.endIndex, field[index] >= UInt8(ascii: "0"), field[index] <= UInt8(ascii: "9") {
      let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(UInt64(field[index] - UInt8(ascii: "0")))
      guard !overflow1, !overflow2 else { return nil }
      value = sum
      digits += 1
      index += 1
    }
    guard digits > 0 else { return nil }
    let unit = field[index...].drop { $0 == UInt8(ascii: " ") }
    if unit.starts(with: "kB".utf8) {
      let (bytes, overflow) = value.multipliedReportingOverflow(by: 1024)
      return overflow ? nil : bytes
    }
    return value
  }
}
