// PoolLookFigures — what the watchdog's look at the pool's seats costs (issue 40, point 4): the
// pool threads' kernel files read at each look (HangWatchdog+Pool.swift), next to the watchdog
// without it, in the same run.
//
// Three clients, one after the other in each round, in an order that turns each round (so a
// busy moment of the machine falls on each alike), each idle for WATCH_SECONDS (default 20)
// after two seconds of start-up: hang detection off; on at the 3 s threshold without the look
// (`watchesPoolSeats = false`); on with it (the default). The process's CPU time per second of
// each window; ROUNDS rounds (default 3), medians. Then the same three with 100 extra threads
// parked in a read (the look lists every thread of the process at each look). Goal: the
// watchdog with the look ≤ 0.1 ms CPU per second over hangs off, same run.
//
//   cd Benchmarks && swift build -c release --product PoolLookFigures
//   ROUNDS=3 WATCH_SECONDS=20 .build/release/PoolLookFigures

import BenchSummary
import Crumbs

#if canImport(Glibc)
  import Glibc
#endif

let watchSeconds = getenv("WATCH_SECONDS").flatMap { Double(String(cString: $0)) } ?? 20
let rounds = getenv("ROUNDS").flatMap { Int(String(cString: $0)) } ?? 3

nonisolated(unsafe) var runs = 0

/// CPU ms per second of the whole process over `seconds` of idling, with a client started with
/// `hangs`.
func idle(hangs: HangDetection?, seconds: Double) -> Double {
  runs += 1
  let directory = "/tmp/crumbs-pool-look-figures-\(getpid())-\(runs)"
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  configuration.hangs = hangs
  guard let client = try? CrumbsClient.start(configuration) else {
    print("cannot start a client in \(directory)")
    exit(1)
  }
  usleep(2_000_000)
  let start = processCPUNanoseconds()
  usleep(UInt32(seconds * 1e6))
  let cpu = Double(processCPUNanoseconds() - start) / 1e6 / seconds
  client.close()
  if directory.hasPrefix("/tmp/crumbs-pool-look-figures-") { _ = system("rm -rf '\(directory)'") }
  return cpu
}

func format(_ value: Double, _ decimals: Int = 4) -> String {
  var scale = 1.0
  for _ in 0..<decimals { scale *= 10 }
  return "\((value * scale).rounded() / scale)"
}

/// Parks `count` threads in a read of a pipe nobody writes (they end with the process).
func parkThreads(_ count: Int) {
  var ends: [Int32] = [0, 0]
  guard pipe(&ends) == 0 else { return }
  for _ in 0..<count {
    var thread = pthread_t()
    let descriptor = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
    descriptor.pointee = ends[0]
    pthread_create(
      &thread, nil,
      { argument in
        let fd = argument!.assumingMemoryBound(to: Int32.self).pointee
        var byte: UInt8 = 0
        _ = read(fd, &byte, 1)
        return nil
      }, descriptor)
  }
}

let variants: [(name: String, hangs: HangDetection?)] = [
  ("hangs off", nil),
  (
    "watchdog, no look",
    {
      var hangs = HangDetection(threshold: 3)
      hangs.watchesPoolSeats = false
      return hangs
    }()
  ),
  ("watchdog + look", HangDetection(threshold: 3)),
]

func measure(_ title: String) -> [Double] {
  var figures = Array(repeating: [Double](), count: variants.count)
  for round in 0..<rounds {
    for step in 0..<variants.count {
      let index = (step + round) % variants.count
      figures[index].append(idle(hangs: variants[index].hangs, seconds: watchSeconds))
    }
  }
  let medians = figures.map(median)
  print("== \(title): \(rounds) rounds of \(Int(watchSeconds)) s, medians (process CPU) ==")
  for (index, variant) in variants.enumerated() {
    let all = figures[index].map { format($0) }.joined(separator: ", ")
    let name = variant.name + String(repeating: " ", count: max(0, 20 - variant.name.count))
    print("  \(name) \(format(medians[index])) ms/s  [\(all)]")
  }
  print("  the look alone (+look − no look)   \(format(medians[2] - medians[1])) ms/s")
  print("  the watchdog with the look (− off) \(format(medians[2] - medians[0])) ms/s")
  return medians
}

var load = [Double](repeating: 0, count: 3)
_ = getloadavg(&load, 3)
print("load average \(format(load[0], 2)) (figures from a busy machine are noisy: compare within the run)")
let few = measure("idle process")
let withLook = max(0, few[2] - few[0])
BenchSummary.record(
  "watchdog + pool-seat look idle CPU (− hangs off), threshold 3 s", "\(format(withLook)) ms/s",
  goal: "≤ 0.1 ms/s", met: withLook <= 0.1)
BenchSummary.record("pool-seat look alone (same run)", "\(format(few[2] - few[1])) ms/s")
parkThreads(100)
let many = measure("idle process with 100 more threads")
BenchSummary.record(
  "watchdog + pool-seat look idle CPU, 100 threads (− hangs off)",
  "\(format(max(0, many[2] - many[0]))) ms/s",
  goal: "≤ 0.1 ms/s", met: many[2] - many[0] <= 0.1)
