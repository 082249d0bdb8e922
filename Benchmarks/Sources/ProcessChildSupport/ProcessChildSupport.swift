// ProcessChildSupport.swift — what the three child programs of ProcessFigures share: reading
// their instructions, reporting a moment to the parent, and the ways they end.
//
// Protocol (see ProcessFigures): a child is started as `<child> ACTION DIR`, with its standard
// output a pipe to the parent. It writes one line `main <ns>` as its first statement (CLOCK_MONOTONIC
// at entry to main), then sets up (plain: nothing; recorder: a ring and the crash handler; client:
// CrumbsClient.start, its start-up work awaited), writes
// `ready <rss-kib> <start-ns> <start-cpu-ns> <configuration-ns>` (the client: the time to make its
// CrumbsConfiguration before start),
// and then, for ACTION:
//   crash   writes `end <ns>` and stores through a null pointer (SIGSEGV)
//   exit    writes `end <ns>` and calls exit(0)
//   wait    waits for a byte (or end of file) on standard input, then exits (the parent reads
//           the RSS meanwhile)
// Not part of Crumbs: benchmark fixture.

#if canImport(Glibc)
  import Glibc
#endif

/// CLOCK_MONOTONIC nanoseconds.
public func monotonicNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// CPU time of the calling thread.
public func threadCPUNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
  return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Writes one line to standard output at once (no buffering: the process may die right after).
public func report(_ line: String) {
  var text = line + "\n"
  text.withUTF8 { bytes in
    var offset = 0
    while offset < bytes.count {
      let written = write(1, bytes.baseAddress! + offset, bytes.count - offset)
      if written <= 0 { return }
      offset += written
    }
  }
}

/// The resident set size of this process, in KiB (VmRSS in /proc/self/status).
public func residentKiB() -> Int {
  guard let file = fopen("/proc/self/status", "r") else { return -1 }
  defer { fclose(file) }
  var line = [CChar](repeating: 0, count: 256)
  while fgets(&line, Int32(line.count), file) != nil {
    let text = String(cString: line)
    if text.hasPrefix("VmRSS:") {
      return Int(text.dropFirst(6).filter { $0.isNumber }) ?? -1
    }
  }
  return -1
}

/// A child's arguments: ACTION and DIR.
public struct ChildArguments {
  public let action: String
  public let directory: String

  public init() {
    let arguments = CommandLine.arguments
    guard arguments.count == 3, ["crash", "exit", "wait"].contains(arguments[1]) else {
      report("usage: \(arguments.first ?? "child") crash|exit|wait DIR")
      exit(2)
    }
    action = arguments[1]
    directory = arguments[2]
  }

  /// Reports `ready`, then ends the way ACTION says.
  public func finish(
    startNanoseconds: UInt64 = 0, startCPUNanoseconds: UInt64 = 0, configurationNanoseconds: UInt64 = 0
  ) -> Never {
    report("ready \(residentKiB()) \(startNanoseconds) \(startCPUNanoseconds) \(configurationNanoseconds)")
    switch action {
    case "crash":
      report("end \(monotonicNanoseconds())")
      crashNow()
    case "exit":
      report("end \(monotonicNanoseconds())")
      exit(0)
    default:
      var byte: UInt8 = 0
      _ = read(0, &byte, 1)
      exit(0)
    }
  }
}

/// Called through a variable, so the store cannot be optimized away or moved.
nonisolated(unsafe) public var crashTarget = UnsafeMutablePointer<Int>(bitPattern: 0x10)!

/// Stores through a null pointer.
@inline(never)
public func crashNow() -> Never {
  crashTarget.pointee = 1
  fatalError("unreachable")
}
