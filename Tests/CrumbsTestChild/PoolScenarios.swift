import Crumbs
import CrumbsPlatform
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// The cooperative pool's seats (PoolCensus, the watchdog's look at them: HangWatchdog+Pool.swift).
// SIGUSR1 (blocked in every thread, taken with sigwait) is the parent's "go on". Lines printed:
// "ring PATH", "seats N" (each pool's seats), "hang-began WATCH REPORT-ID", "hang-ended WATCH
// SECONDS", "comm TID NAME" (each thread's kernel name), "census TEXT", "seat TID STATE POOL
// CALL APP-FRAME" ("-" for none), "checks N", "hangs N", "done".
//   pool-starved DIR [stay]
//                  2 × seats tasks each wait in censusBlockedOnSemaphore() (DispatchSemaphore
//                  .wait) until SIGUSR1: the pool starves (threshold 1 s). After the pool's
//                  "hang-began", the threads' names and captureThreads()' census; "ready"; with
//                  "stay" it waits for SIGUSR1 (the parent asks `crumbs threads` meanwhile), else
//                  it sends it to itself; then the pool's "hang-ended", "done", exit 0.
//   pool-partial DIR
//                  half the seats (at least one) wait in censusBlockedOnSemaphore() until SIGUSR1,
//                  and as many tasks spin and yield: the pool runs on. The look (threshold 1 s,
//                  `reportsBlockedPoolSeats`) gives "hang-began pool-seats ID"; the census is
//                  printed, the parent sends SIGUSR1, "hang-ended pool-seats", then "done".
//   pool-healthy DIR [CHECKS]
//                  2 × seats tasks spin and yield until the watchdog (threshold 1 s, the look
//                  reporting) made CHECKS checks (default 12), then the pool goes idle (its
//                  threads wait for work, then end) for 8 more; prints "checks N", "hangs N" (hang
//                  reports stored) and "pool-seat-events N" (began events of `pool-seats`).
let poolScenarios: [String: @Sendable ([String]) -> Int32] = [
  "pool-starved": { arguments in
    guard let directory = arguments.first else { return 64 }
    blockGoOnSignal()
    let events = PoolEvents()
    guard let client = startPoolClient(directory, reports: false) else { return 1 }
    let seats = DispatchPools.seats()
    print("seats \(seats)")
    let release = DispatchSemaphore(value: 0)
    for _ in 0..<(2 * seats) { Task.detached { censusBlockedOnSemaphore(release) } }
    events.waitForBegan(HangWatchdogNames.pool)
    printThreadNames()
    printCensus(client)
    print("ready")
    fflush(nil)
    if arguments.dropFirst().first != "stay" { kill(getpid(), SIGUSR1) }
    waitForGoOn()
    // Each task waits once: one signal each.
    for _ in 0..<(2 * seats) { release.signal() }
    events.waitForEnded(HangWatchdogNames.pool)
    client.close()
    print("done")
    fflush(nil)
    return 0
  },

  "pool-partial": { arguments in
    guard let directory = arguments.first else { return 64 }
    blockGoOnSignal()
    let events = PoolEvents()
    guard let client = startPoolClient(directory, reports: true) else { return 1 }
    let seats = DispatchPools.seats()
    print("seats \(seats)")
    let blockers = max(1, seats / 2)
    let release = DispatchSemaphore(value: 0)
    let stop = StopFlag()
    for _ in 0..<blockers { Task.detached { censusBlockedOnSemaphore(release) } }
    for _ in 0..<max(1, seats - blockers) {
      Task.detached {
        while !stop.isSet {
          shortWork()
          await Task.yield()
        }
      }
    }
    events.waitForBegan(HangWatchdogNames.seats)
    printCensus(client)
    fflush(nil)
    waitForGoOn()
    for _ in 0..<blockers { release.signal() }
    events.waitForEnded(HangWatchdogNames.seats)
    stop.set()
    client.close()
    print("done")
    fflush(nil)
    return 0
  },

  "pool-healthy": { arguments in
    guard let directory = arguments.first else { return 64 }
    let wanted = arguments.dropFirst().first.flatMap(UInt64.init) ?? 12
    let events = PoolEvents()
    guard let client = startPoolClient(directory, reports: true) else { return 1 }
    let seats = DispatchPools.seats()
    print("seats \(seats)")
    let stop = StopFlag()
    let finished = DispatchSemaphore(value: 0)
    for _ in 0..<(2 * seats) {
      Task.detached {
        while !stop.isSet {
          shortWork()
          await Task.yield()
        }
        finished.signal()
      }
    }
    events.waitForChecks(wanted)
    stop.set()
    for _ in 0..<(2 * seats) { finished.wait() }
    // The pool idle: its threads wait for work (at most 5 s each), then end.
    events.waitForChecks(wanted + 8)
    let hangs = client.store.list(.pending).reports.filter { $0.report.kind == .hang }.count
    client.close()
    print("checks \(events.checks)")
    print("hangs \(hangs)")
    print("pool-seat-events \(events.began(HangWatchdogNames.seats))")
    print("done")
    fflush(nil)
    return 0
  },
]

enum HangWatchdogNames {
  static let pool = "concurrency-pool"
  static let seats = "pool-seats"
}

@inline(never) func censusBlockedOnSemaphore(_ release: DispatchSemaphore) {
  release.wait()
}

private func startPoolClient(_ directory: String, reports: Bool) -> CrumbsClient? {
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  var hangs = HangDetection(threshold: 1)
  hangs.reportsBlockedPoolSeats = reports
  configuration.hangs = hangs
  do {
    let client = try CrumbsClient.start(configuration)
    print("ring \(client.ring.path)")
    fflush(nil)
    return client
  } catch {
    print("error \(error)")
    fflush(nil)
    return nil
  }
}

/// "comm TID NAME" for every thread of this process.
private func printThreadNames() {
  var buffer = [UInt8](repeating: 0, count: 64)
  for entry in (try? Syscall.directoryEntries("/proc/self/task")) ?? [] {
    guard let count = try? Syscall.readSmallFile("/proc/self/task/\(entry)/comm", into: &buffer) else {
      continue
    }
    let name = String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").first ?? ""
    print("comm \(entry) \(name)")
  }
}

/// captureThreads()' census: "census TEXT", then "seat …" per seat.
private func printCensus(_ client: CrumbsClient) {
  guard let dump = try? client.captureThreads(), let census = dump.poolCensus else {
    print("census -")
    return
  }
  print("census \(census.text)")
  for seat in census.seats {
    print(
      "seat \(seat.threadID) \(seat.state.rawValue) \(seat.pool) \(seat.call ?? "-") \(seat.appFrame ?? "-")")
  }
}

/// The watchdog's events, printed, and waited for by watch.
private final class PoolEvents: Sendable {
  private let state = Mutex<(checks: UInt64, began: [String: Int], ended: [String: Int])>((0, [:], [:]))
  private let changed = DispatchSemaphore(value: 0)

  var checks: UInt64 { state.withLock { $0.checks } }
  func began(_ watch: String) -> Int { state.withLock { $0.began[watch] ?? 0 } }

  init() {
    CrumbsClient.hangWatchdogEvents.withLock {
      $0 = { [self] event in
        switch event {
        case .checked(let count):
          state.withLock { $0.checks = count }
        case .began(let watch, let report):
          print("hang-began \(watch) \(report?.report.id ?? "-")")
          fflush(nil)
          state.withLock { $0.began[watch, default: 0] += 1 }
        case .ended(let watch, let nanoseconds):
          print("hang-ended \(watch) \(Double(nanoseconds) / 1e9)")
          fflush(nil)
          state.withLock { $0.ended[watch, default: 0] += 1 }
        }
        changed.signal()
      }
    }
  }

  private func wait(until done: () -> Bool) {
    while !done() { changed.wait() }
  }

  func waitForBegan(_ watch: String) { wait { began(watch) > 0 } }
  func waitForEnded(_ watch: String) { wait { state.withLock { ($0.ended[watch] ?? 0) > 0 } } }
  func waitForChecks(_ count: UInt64) { wait { checks >= count } }
}
