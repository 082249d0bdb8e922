// LiveCaptureFigures — what a live thread capture (a hang report, a thread dump: issue 23) costs
// the process it captures, measured in one run:
//
//   pauses     100 threads blocked in read() on a pipe; per capture, the longest any thread stayed
//              parked (from entering the capture handler to its release: `longest_pause_ns`),
//              the whole capture (`duration_ns`) and the signals it sent (`signalled`; a thread
//              blocked in a system call is walked where it blocks, without one: `read_blocked`),
//              for the default window (4 threads asked at a time) and, for comparison, 1, 16 and
//              every thread at once (the crash handler's way). Goal: each thread paused ≤ 1 ms
//              with 100 threads.
//   requests   one thread runs a request loop (a unit of work of a few µs, each one timed) for
//              PHASE_MS at a time, alternately while another thread takes captures back to back
//              and while nothing else runs; the loop's p50, p99, p99.9 and worst unit per kind of
//              phase (the captured thread's own pause shows in its worst units).
//
// The C entry point is called directly (crumbs_capture_threads_live, as LiveThreadCapture calls
// it): the Swift wrapper's decoding and module list come after every thread is released.
// Usage: LiveCaptureFigures [ROUNDS [PHASE_MS]]   (defaults 30, 400)

import BenchSummary
import CrumbsRecorder
import CrumbsSignalPath
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

func loadAverage() -> String {
  guard let file = fopen("/proc/loadavg", "r") else { return "?" }
  defer { fclose(file) }
  var line = [CChar](repeating: 0, count: 64)
  guard fgets(&line, 64, file) != nil else { return "?" }
  return String(cString: line).split(separator: " ").prefix(3).joined(separator: " ")
}

func percentile(_ sorted: [UInt64], _ fraction: Double) -> UInt64 {
  guard !sorted.isEmpty else { return 0 }
  return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

func microseconds(_ nanoseconds: UInt64) -> String {
  let tenths = (nanoseconds + 50) / 100
  return "\(tenths / 10).\(tenths % 10) µs"
}

func milliseconds(_ nanoseconds: UInt64) -> String {
  let hundredths = (nanoseconds + 5000) / 10000
  return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100) ms"
}

// MARK: - 100 threads blocked in read()

nonisolated(unsafe) var readyPipe: [Int32] = [-1, -1]
nonisolated(unsafe) var neverPipe: [Int32] = [-1, -1]

func startBlockedThreads(_ count: Int) {
  guard pipe(&readyPipe) == 0, pipe(&neverPipe) == 0 else { fatalError("pipe") }
  for _ in 0..<count {
    var thread = pthread_t()
    let started = pthread_create(
      &thread, nil,
      { _ in
        var byte: UInt8 = 1
        _ = write(readyPipe[1], &byte, 1)
        while read(neverPipe[0], &byte, 1) != 0 {}
        return nil
      }, nil)
    guard started == 0 else { fatalError("pthread_create") }
    pthread_detach(thread)
  }
  // Every one of them is about to block (an event, not a sleep).
  var arrived = 0
  var bytes = [UInt8](repeating: 0, count: 128)
  while arrived < count {
    let got = read(readyPipe[0], &bytes, min(bytes.count, count - arrived))
    guard got > 0 else { fatalError("ready pipe") }
    arrived += got
  }
}

// MARK: - Captures

nonisolated(unsafe) let table = UnsafeMutablePointer<crumbs_crash_thread_table>.allocate(capacity: 1)

/// One capture with `window` threads asked at a time (0: the default); its stats.
func capture(window: UInt32) -> crumbs_live_capture_stats {
  var options = crumbs_live_capture_options()
  options.window = window
  var stats = crumbs_live_capture_stats()
  let status = crumbs_capture_threads_live(table, &options, &stats)
  guard status == Int32(CRUMBS_LIVE_CAPTURE_OK) else { fatalError("capture failed: \(status)") }
  return stats
}

// MARK: - The request loop

/// One unit of work: a hash over 16 KiB (a few µs), so a pause of a few µs shows.
let workBuffer: [UInt64] = (0..<2048).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
@inline(never) func unitOfWork(_ seed: UInt64) -> UInt64 {
  var hash = seed
  for word in workBuffer { hash = (hash ^ word) &* 0x100_0000_01B3 }
  return hash
}

final class Phase: @unchecked Sendable {
  let stop = Atomic<Bool>(false)
  var latencies: [UInt64] = []
  var sink: UInt64 = 0
}

/// Runs the request loop on a new thread until `phase.stop`, timing each unit.
func runRequestLoop(_ phase: Phase) -> pthread_t {
  var thread = pthread_t()
  let box = Unmanaged.passRetained(phase).toOpaque()
  pthread_create(
    &thread, nil,
    { argument in
      let phase = Unmanaged<Phase>.fromOpaque(argument!).takeRetainedValue()
      phase.latencies.reserveCapacity(1 << 20)
      var seed: UInt64 = 1
      while !phase.stop.load(ordering: .relaxed) {
        let started = monotonicNanoseconds()
        seed = unitOfWork(seed)
        phase.latencies.append(monotonicNanoseconds() - started)
      }
      phase.sink = seed
      return nil
    }, box)
  return thread
}

/// Waits `milliseconds` with poll (this thread is the one timing the phase, not a test).
func pause(milliseconds: Int32) {
  var none = pollfd(fd: -1, events: 0, revents: 0)
  _ = poll(&none, 0, milliseconds)
}

// MARK: - Run

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let rounds = arguments.first ?? 30
let phaseMilliseconds = Int32(arguments.dropFirst().first ?? 400)

var directoryTemplate = Array("/tmp/crumbs-live-capture-XXXXXX".utf8CString)
guard let made = mkdtemp(&directoryTemplate) else { fatalError("mkdtemp") }
let directory = String(cString: made)
let ring = try RingDirectory(path: directory).createRing()
ring.install()
try CrashHandler.install(ring: ring)
let blocked = 100
startBlockedThreads(blocked)
print(
  "== Live thread capture (issue 23): \(blocked) threads blocked in read(), \(rounds) captures per window ==")
print("   load average \(loadAverage())")

_ = capture(window: 0)  // warm: binds the calls, touches the buffers
let windows: [(name: String, value: UInt32)] = [
  ("4 (default)", 0), ("1", 1), ("16", 16), ("all at once", 256),
]
var longest: [[UInt64]] = Array(repeating: [], count: windows.count)
var durations: [[UInt64]] = Array(repeating: [], count: windows.count)
var signals: [[UInt64]] = Array(repeating: [], count: windows.count)
for _ in 0..<rounds {
  for (index, window) in windows.enumerated() {
    let stats = capture(window: window.value)
    guard stats.parked + stats.read_blocked >= UInt32(blocked) else {
      fatalError("only \(stats.parked) threads parked, \(stats.read_blocked) read where they block")
    }
    longest[index].append(stats.longest_pause_ns)
    durations[index].append(stats.duration_ns)
    signals[index].append(UInt64(stats.signalled))
  }
}
print(
  "   window          longest pause per capture: median   p90      max     whole capture: median   max"
    + "      signals sent: median   max")
for (index, window) in windows.enumerated() {
  let pauses = longest[index].sorted()
  let wholes = durations[index].sorted()
  let sent = signals[index].sorted()
  print(
    "   \(window.name.padding(16))\(milliseconds(percentile(pauses, 0.5)).padding(9))"
      + "\(milliseconds(percentile(pauses, 0.9)).padding(9))\(milliseconds(pauses.last ?? 0).padding(22))"
      + "\(milliseconds(percentile(wholes, 0.5)).padding(9))\(milliseconds(wholes.last ?? 0).padding(22))"
      + "\(percentile(sent, 0.5))".padding(7) + "\(sent.last ?? 0)")
}
let defaultPauses = longest[0].sorted()
let defaultWholes = durations[0].sorted()
BenchSummary.record(
  "live capture, 100 threads: longest pause per thread (median of \(rounds))",
  milliseconds(percentile(defaultPauses, 0.5)) + ", worst \(milliseconds(defaultPauses.last ?? 0))",
  goal: "≤ 1 ms", met: percentile(defaultPauses, 0.5) <= 1_000_000)
BenchSummary.record(
  "live capture, 100 threads: whole capture (median)", milliseconds(percentile(defaultWholes, 0.5)))
BenchSummary.record(
  "live capture, 100 threads blocked in read: signals sent (median)",
  "\(percentile(signals[0].sorted(), 0.5))")

// The request loop, alternately with captures running and without.
var quiet: [UInt64] = []
var capturing: [UInt64] = []
var capturesTaken = 0
for pair in 0..<3 {
  for withCaptures in pair % 2 == 0 ? [false, true] : [true, false] {
    let phase = Phase()
    let loop = runRequestLoop(phase)
    let started = monotonicNanoseconds()
    let end = started + UInt64(phaseMilliseconds) * 1_000_000
    if withCaptures {
      while monotonicNanoseconds() < end {
        _ = capture(window: 0)
        capturesTaken += 1
      }
    } else {
      pause(milliseconds: phaseMilliseconds)
    }
    phase.stop.store(true, ordering: .relaxed)
    pthread_join(loop, nil)
    if withCaptures { capturing += phase.latencies } else { quiet += phase.latencies }
  }
}
quiet.sort()
capturing.sort()
func summary(_ sorted: [UInt64]) -> String {
  "p50 \(microseconds(percentile(sorted, 0.5))), p99 \(microseconds(percentile(sorted, 0.99))), "
    + "p99.9 \(microseconds(percentile(sorted, 0.999))), max \(microseconds(sorted.last ?? 0)) (\(sorted.count) units)"
}
print("   request loop, nothing else running:      \(summary(quiet))")
print("   request loop, captures back to back:     \(summary(capturing)) (\(capturesTaken) captures)")
BenchSummary.record(
  "request loop during back-to-back captures: p99 / max",
  "\(microseconds(percentile(capturing, 0.99))) / \(microseconds(capturing.last ?? 0))")
BenchSummary.record(
  "request loop without captures: p99 / max",
  "\(microseconds(percentile(quiet, 0.99))) / \(microseconds(quiet.last ?? 0))")

CrashHandler.uninstall()
exit(0)

extension String {
  func padding(_ width: Int) -> String {
    count >= width ? self + " " : self + String(repeating: " ", count: width - count)
  }
}
