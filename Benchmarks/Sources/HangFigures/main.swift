// HangFigures — what hang detection costs (issue 23), as same-run figures for `make bench`:
//
//   1. `heartbeat.beat()` against its floor in C: a read of CLOCK_MONOTONIC_COARSE and a relaxed
//      store of it (the beat stamps its time, so that a hang's start and end are true); also a
//      plain relaxed store in C and in Swift (`Atomic<Bool>.store`: what a flag beat cost) and
//      the stamp with CLOCK_MONOTONIC (what the fine clock would cost); each the best of several
//      rounds of 20 million calls in the same shape of loop; the goal is ≤ 2× the C floor.
//      Mallocs over a million beats (goal 0).
//   2. The watchdog idle: a client with hang detection on (the default: the pool watched,
//      threshold 3 s) and nothing else running (no automatic breadcrumbs, no destination),
//      watched for WATCH_SECONDS (default 30): the process's CPU time per second (the watchdog
//      thread and its probe jobs; goal ≤ 0.05 ms/s), the watchdog thread's wake-ups per second
//      (goal: no more than one per threshold), against the same window with `hangs = nil`;
//      then `hangs = nil` again once the pool has run a job: libdispatch's pool monitor (1 Hz,
//      from a process's first pool job on) is in that baseline, as in any app using Swift
//      concurrency, and the watchdog's probe is what starts it in a process that never did.
//
// The dump pause (threads parked by a capture) is ThreadCaptureFigures'. Not a timed test.

import BenchSummary
import CBaselineAppend
import Crumbs
import MallocInterposerSwift
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Nanoseconds per call of `body(count)`, the best of `rounds`.
func best(rounds: Int = 7, count: UInt64, _ body: (UInt64) -> Void) -> Double {
  var fastest = Double.infinity
  for _ in 0..<rounds {
    let start = monotonicNanoseconds()
    body(count)
    fastest = min(fastest, Double(monotonicNanoseconds() - start) / Double(count))
  }
  return fastest
}

@inline(never) func beats(_ heartbeat: Heartbeat, _ count: UInt64) {
  for _ in 0..<count { heartbeat.beat() }
}

final class Flag: Sendable { let value = Atomic<Bool>(false) }

@inline(never) func swiftStores(_ flag: Flag, _ count: UInt64) {
  for _ in 0..<count { flag.value.store(true, ordering: .relaxed) }
}

func format(_ value: Double, _ decimals: Int = 2) -> String {
  var scale = 1.0
  for _ in 0..<decimals { scale *= 10 }
  let rounded = (value * scale).rounded() / scale
  return "\(rounded)"
}

// MARK: 1. The beat

let count: UInt64 = 20_000_000
let heartbeat = Heartbeat(name: "bench", threshold: 3)
let flag = Flag()
var cFlag: UInt8 = 0
var cStamp: UInt64 = 0
heartbeat.beat()
var cFloor = Double.infinity, cStore = Double.infinity, cFine = Double.infinity
var swiftStore = Double.infinity, beat = Double.infinity
for _ in 0..<3 {  // interleaved, so a busy moment hits each alike
  cFloor = min(
    cFloor, best(count: count) { crumbs_bench_stamped_stores(&cStamp, $0, CLOCK_MONOTONIC_COARSE) })
  cFine = min(cFine, best(count: count) { crumbs_bench_stamped_stores(&cStamp, $0, CLOCK_MONOTONIC) })
  cStore = min(cStore, best(count: count) { crumbs_bench_relaxed_stores(&cFlag, $0) })
  swiftStore = min(swiftStore, best(count: count) { swiftStores(flag, $0) })
  beat = min(beat, best(count: count) { beats(heartbeat, $0) })
}
MallocInterposerSwift.initialize()
MallocInterposerSwift.hook()
beats(heartbeat, 1_000_000)
MallocInterposerSwift.unhook()
let beatMallocs = MallocInterposerSwift.getStatistics().mallocCount
let beatRatio = beat / cFloor
print("== Heartbeat (issue 23) ==")
print("  coarse clock + store, C (floor) \(format(cFloor, 3)) ns")
print("  fine clock + store, C           \(format(cFine, 3)) ns")
print("  relaxed store, C                \(format(cStore, 3)) ns")
print("  relaxed store, Swift Atomic     \(format(swiftStore, 3)) ns")
print(
  "  heartbeat.beat()                \(format(beat, 3)) ns  = \(format(beatRatio))× the floor, \(beatMallocs) mallocs per 1,000,000 beats"
)
BenchSummary.record(
  "heartbeat.beat() / coarse clock + store (C)", "\(format(beatRatio))× (\(format(beat, 3)) ns)",
  goal: "≤ 2×", met: beatRatio <= 2)
BenchSummary.record(
  "heartbeat.beat() mallocs", "\(beatMallocs) per 1,000,000", goal: "0", met: beatMallocs == 0)

// MARK: 2. The watchdog idle

let watchSeconds = getenv("WATCH_SECONDS").flatMap { Double(String(cString: $0)) } ?? 30

/// `/proc/self/task/<tid>` of the thread named `name`, or nil.
func taskDirectory(ofThreadNamed name: String) -> String? {
  guard let directory = opendir("/proc/self/task") else { return nil }
  defer { closedir(directory) }
  while let entry = readdir(directory) {
    let tid = withUnsafeBytes(of: entry.pointee.d_name) {
      String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
    }
    guard tid.first?.isNumber == true else { continue }
    if read("/proc/self/task/\(tid)/comm").trimmingSuffix() == name { return "/proc/self/task/\(tid)" }
  }
  return nil
}

/// The named thread's on-CPU nanoseconds (schedstat's first field), or nil.
func cpuNanoseconds(ofThreadNamed name: String) -> UInt64? {
  taskDirectory(ofThreadNamed: name).flatMap { task in
    read(task + "/schedstat").split(separator: " ").first.flatMap { UInt64($0) }
  }
}

/// The named thread's voluntary context switches (its wake-ups from a wait), or nil.
func wakeUps(ofThreadNamed name: String) -> Int? {
  guard let task = taskDirectory(ofThreadNamed: name) else { return nil }
  let line = read(task + "/status").split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
  return line.flatMap { $0.split(separator: "\t").last.flatMap { Int($0) } }
}

func read(_ path: String) -> String {
  guard let file = fopen(path, "r") else { return "" }
  defer { fclose(file) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 4096)
  while true {
    let got = fread(&buffer, 1, buffer.count, file)
    if got <= 0 { break }
    bytes += buffer[0..<got]
  }
  return String(decoding: bytes, as: UTF8.self)
}

extension String {
  func trimmingSuffix() -> String {
    var copy = self
    while copy.last == "\n" { copy.removeLast() }
    return copy
  }
}

nonisolated(unsafe) var runs = 0

/// CPU ms per second of the whole process over `seconds` of idling, with a client started
/// with `hangs`; and the watchdog's wake-ups per second.
func idle(hangs: HangDetection?, seconds: Double) -> (cpu: Double, wakeUps: Double?) {
  // A directory of its own: a client's start-up processes what earlier sessions left in its
  // directory, work that would be counted here.
  runs += 1
  let directory = "/tmp/crumbs-hang-figures-\(getpid())-\(runs)"
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  configuration.hangs = hangs
  guard let client = try? CrumbsClient.start(configuration) else {
    print("cannot start a client in \(directory)")
    exit(1)
  }
  // Let start-up work (the background thread, the first probe) settle.
  usleep(2_000_000)
  let wakeStart = wakeUps(ofThreadNamed: "crumbs.watchdog")
  let threadStart = cpuNanoseconds(ofThreadNamed: "crumbs.watchdog")
  let cpuStart = processCPUNanoseconds()
  usleep(UInt32(seconds * 1e6))
  let cpu = Double(processCPUNanoseconds() - cpuStart) / 1e6 / seconds
  let wakeEnd = wakeUps(ofThreadNamed: "crumbs.watchdog")
  if let threadStart, let threadEnd = cpuNanoseconds(ofThreadNamed: "crumbs.watchdog") {
    print(
      "  (the watchdog thread's own schedstat: \(format(Double(threadEnd - threadStart) / 1e6 / seconds, 4)) ms/s)"
    )
  }
  client.close()
  if directory.hasPrefix("/tmp/crumbs-hang-figures-") { _ = system("rm -rf '\(directory)'") }
  let wakes = wakeStart.flatMap { start in wakeEnd.map { Double($0 - start) / seconds } }
  return (cpu, wakes)
}

let off = idle(hangs: nil, seconds: watchSeconds)
// The watchdog's own share, without the pool probe's job (a pool thread woken and parked);
// before the pool is ever used, so that no pool thread of an earlier run ends in its window.
let alone = idle(hangs: HangDetection(watchesConcurrencyPool: false), seconds: watchSeconds)
let on = idle(hangs: HangDetection(), seconds: watchSeconds)
let watchdogCPU = max(0, on.cpu - off.cpu)
// The same client with hangs off once the pool has run a job (the probes above ran some): the
// libdispatch worker pool's monitor (a timer on its manager thread, once a second from the
// first pool job on, for the life of the process) runs in every process that used Swift
// concurrency once. The watchdog's probe started it above; in an app that uses the pool, this
// is its baseline, and on − this is what the watchdog adds.
let offPoolUsed = idle(hangs: nil, seconds: watchSeconds)
let watchdogOverUsedPool = max(0, on.cpu - offPoolUsed.cpu)
let allowedWakeUps = 1 / HangDetection().threshold
print("== Watchdog idle (issue 23), \(Int(watchSeconds)) s each ==")
print("  process CPU, hangs off        \(format(off.cpu, 4)) ms/s")
print(
  "  process CPU, hangs on         \(format(on.cpu, 4)) ms/s  (the watchdog's share: \(format(watchdogCPU, 4)) ms/s)"
)
print(
  "  process CPU, no pool probe    \(format(alone.cpu, 4)) ms/s  (the watchdog thread alone: \(format(max(0, alone.cpu - off.cpu), 4)) ms/s)"
)
print(
  "  process CPU, hangs off, pool used  \(format(offPoolUsed.cpu, 4)) ms/s  (libdispatch's pool monitor: \(format(max(0, offPoolUsed.cpu - off.cpu), 4)) ms/s; the watchdog over it: \(format(watchdogOverUsedPool, 4)) ms/s)"
)
print(
  "  watchdog wake-ups             \(on.wakeUps.map { format($0) } ?? "?") /s (threshold 3 s: at most \(format(allowedWakeUps)) /s)"
)
BenchSummary.record(
  "watchdog idle CPU (hangs on − off)", "\(format(watchdogCPU, 4)) ms/s", goal: "≤ 0.05 ms/s",
  met: watchdogCPU <= 0.05)
BenchSummary.record(
  "watchdog idle CPU in a process whose pool ran a job (hangs on − off)",
  "\(format(watchdogOverUsedPool, 4)) ms/s",
  goal: "≤ 0.05 ms/s", met: watchdogOverUsedPool <= 0.05)
if let wakes = on.wakeUps {
  BenchSummary.record(
    "watchdog wake-ups (threshold 3 s)", "\(format(wakes)) /s", goal: "≤ \(format(allowedWakeUps)) /s",
    met: wakes <= allowedWakeUps + 0.01)
}
