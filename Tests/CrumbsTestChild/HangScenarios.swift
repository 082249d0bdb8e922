import Crumbs
import CrumbsPlatform
import Dispatch
import Synchronization

// Hang scenarios: a client whose watchdog sees a stalled heartbeat, a starved concurrency pool,
// or a saturated but healthy process. SIGUSR1 (blocked in every thread, taken with sigwait) is
// the parent's "go on". Lines printed: "ring PATH" (at start), "hang-began WATCH REPORT-ID" (REPORT-ID "-" when none
// was stored), "hang-ended WATCH SECONDS", "checks N", "done". Each takes the Crumbs directory
// as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let hangScenarios: [String: @Sendable ([String]) -> Int32] = [
  // hang-heartbeat DIR: a thread named "stall-loop" beats the heartbeat "stall-loop"
  // (threshold 1 s) once, then blocks in stallLoopBlockedOnParent() until SIGUSR1; it beats
  // again; once the watchdog saw the hang end, the client closes and the child exits 0.
  "hang-heartbeat": { arguments in
    guard let directory = arguments.first else { return 64 }
    blockGoOnSignal()
    let events = HangEventPrinter()
    guard let client = startHangClient(directory, threshold: 1, pool: false) else { return 1 }
    // Made on the loop's own thread, so that the report leads with it.
    let made = HeartbeatBox()
    let thread = try? BackgroundThread.startJoinable(name: "stall-loop") {
      let heartbeat = client.heartbeat("stall-loop", threshold: 1)
      made.set(heartbeat)
      heartbeat.beat()
      stallLoopBlockedOnParent()
      heartbeat.beat()
    }
    events.waitForEnd()
    made.heartbeat?.end()
    thread?.join()
    client.close()
    print("done")
    fflush(nil)
    return 0
  },

  // hang-heartbeat-kill DIR: as hang-heartbeat, but never resumes: the parent kills it.
  "hang-heartbeat-kill": { arguments in
    guard let directory = arguments.first else { return 64 }
    blockGoOnSignal()
    _ = HangEventPrinter()
    guard let client = startHangClient(directory, threshold: 1, pool: false) else { return 1 }
    let thread = try? BackgroundThread.startJoinable(name: "stall-loop") {
      let heartbeat = client.heartbeat("stall-loop", threshold: 1)
      heartbeat.beat()
      stallLoopBlockedOnParent()
      heartbeat.end()
    }
    thread?.join()
    return 0
  },

  // hang-timed DIR: a thread "timed-loop" beats the heartbeat "timed-loop" (threshold 3 s)
  // every 10 ms until the watchdog has looked at it, then stalls for 4 s (a sleep: the
  // workload) and beats on. It prints "stall WALL START END" (ns: the wall clock and the
  // monotonic clock just after its last beat, the monotonic clock just before its next: the
  // truth a report is held to), then beats until the watchdog saw the hang end, or looked
  // three more times without a hang ("no-hang"); the client closes and the child exits 0.
  "hang-timed": { arguments in
    guard let directory = arguments.first else { return 64 }
    let events = HangEventPrinter()
    guard let client = startHangClient(directory, threshold: 3, pool: false) else { return 1 }
    let thread = try? BackgroundThread.startJoinable(name: "timed-loop") {
      let heartbeat = client.heartbeat("timed-loop", threshold: 3)
      // Two checks ended after the heartbeat joined: one of them looked at it.
      let joined = events.checks
      while events.checks < joined + 2 {
        heartbeat.beat()
        usleep(10_000)
      }
      heartbeat.beat()
      let wall = SystemClock.wallNanoseconds()
      let start = SystemClock.monotonicNanoseconds()
      stallLoopSleeping(until: start + 4_000_000_000)
      let end = SystemClock.monotonicNanoseconds()
      heartbeat.beat()
      print("stall \(wall) \(start) \(end)")
      fflush(nil)
      let after = events.checks
      while !events.sawEnd, events.checks < after + 3 {
        heartbeat.beat()
        usleep(10_000)
      }
      if !events.sawEnd { print("no-hang") }
      heartbeat.end()
    }
    thread?.join()
    client.close()
    print("done")
    fflush(nil)
    return 0
  },

  // hang-pool DIR: 64 tasks block in poolBlockedOnParent() (a semaphore) until SIGUSR1: the
  // concurrency pool (threshold 1 s) starves; once the watchdog saw the hang end, the client
  // closes and the child exits 0.
  "hang-pool": { arguments in
    guard let directory = arguments.first else { return 64 }
    blockGoOnSignal()
    let events = HangEventPrinter()
    guard let client = startHangClient(directory, threshold: 1, pool: true) else { return 1 }
    let release = DispatchSemaphore(value: 0)
    let blockers = 64
    for _ in 0..<blockers {
      Task.detached { poolBlockedOnParent(release) }
    }
    let waiter = try? BackgroundThread.startJoinable(name: "pool-release") {
      waitForGoOn()
      for _ in 0..<blockers { release.signal() }
    }
    events.waitForEnd()
    waiter?.join()
    client.close()
    print("done")
    fflush(nil)
    return 0
  },

  // hang-saturated DIR [CHECKS]: both CPUs busy (two spinning threads beating the heartbeat
  // "busy-loop", threshold 1 s, and a stream of short pool tasks) until the watchdog made
  // CHECKS checks (default 12; Benchmarks/hang-soak.sh runs 600, ten minutes); prints
  // "checks N" and "hangs N" (reports of kind hang in the store), then exits 0.
  "hang-saturated": { arguments in
    guard let directory = arguments.first else { return 64 }
    let wanted = arguments.dropFirst().first.flatMap(UInt64.init) ?? 12
    let events = HangEventPrinter(checksWanted: wanted)
    guard let client = startHangClient(directory, threshold: 1, pool: true) else { return 1 }
    let heartbeat = client.heartbeat("busy-loop", threshold: 1)
    let stop = StopFlag()
    var spinners: [BackgroundThread] = []
    for index in 0..<2 {
      if let spinner = try? BackgroundThread.startJoinable(
        name: "spin-\(index)", { spin(heartbeat, until: stop) })
      {
        spinners.append(spinner)
      }
    }
    let feeder = try? BackgroundThread.startJoinable(name: "task-feeder") {
      while !stop.isSet {
        let group = DispatchGroup()
        for _ in 0..<32 {
          group.enter()
          Task.detached {
            shortWork()
            group.leave()
          }
        }
        group.wait()
      }
    }
    events.waitForChecks()
    stop.set()
    for spinner in spinners { spinner.join() }
    feeder?.join()
    heartbeat.end()
    let hangs = client.store.list(.pending).reports.filter { $0.report.kind == .hang }.count
    client.close()
    print("checks \(events.checks)")
    print("hangs \(hangs)")
    fflush(nil)
    return 0
  },
]

/// The heartbeat a thread made, for the main thread to end.
final class HeartbeatBox: Sendable {
  private let value = Mutex<Heartbeat?>(nil)
  var heartbeat: Heartbeat? { value.withLock { $0 } }
  func set(_ heartbeat: Heartbeat) { value.withLock { $0 = heartbeat } }
}

final class StopFlag: Sendable {
  private let value = Atomic<Bool>(false)
  var isSet: Bool { value.load(ordering: .relaxed) }
  func set() { value.store(true, ordering: .relaxed) }
}

/// Prints the watchdog's events and lets the main thread wait for them.
private final class HangEventPrinter: Sendable {
  private let ended = DispatchSemaphore(value: 0)
  private let checked = DispatchSemaphore(value: 0)
  private let seen = Atomic<UInt64>(0)
  private let endSeen = Atomic<Bool>(false)
  var checks: UInt64 { seen.load(ordering: .relaxed) }
  /// Whether a hang ended (without waiting for it).
  var sawEnd: Bool { endSeen.load(ordering: .relaxed) }

  init(checksWanted: UInt64 = .max) {
    CrumbsClient.hangWatchdogEvents.withLock {
      $0 = { [self] event in
        switch event {
        case .checked(let count):
          seen.store(count, ordering: .relaxed)
          if count == checksWanted { checked.signal() }
          return
        case .began(let watch, let report):
          print("hang-began \(watch) \(report?.report.id ?? "-")")
        case .ended(let watch, let nanoseconds):
          print("hang-ended \(watch) \(Double(nanoseconds) / 1e9)")
          endSeen.store(true, ordering: .relaxed)
          ended.signal()
        }
        fflush(nil)
      }
    }
  }

  func waitForEnd() { ended.wait() }
  func waitForChecks() { checked.wait() }
}

private func startHangClient(_ directory: String, threshold: Double, pool: Bool) -> CrumbsClient? {
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  configuration.hangs = HangDetection(threshold: threshold, watchesConcurrencyPool: pool)
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

@inline(never) func stallLoopBlockedOnParent() {
  waitForGoOn()
}

/// Sleeps until the monotonic clock reads `deadline` (ns), whatever interrupts the sleep.
@inline(never) func stallLoopSleeping(until deadline: UInt64) {
  var wake = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
  while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nil) == EINTR {}
}

@inline(never) func poolBlockedOnParent(_ release: DispatchSemaphore) {
  release.wait()
}

@inline(never) func spin(_ heartbeat: Heartbeat, until stop: StopFlag) {
  var value: UInt64 = 1
  while !stop.isSet {
    for _ in 0..<10_000 { value = value &* 6_364_136_223_846_793_005 &+ 1 }
    heartbeat.beat()
  }
  if value == 0 { print("") }
}

@inline(never) func shortWork() {
  var value: UInt64 = 1
  for _ in 0..<20_000 { value = value &* 6_364_136_223_846_793_005 &+ 1 }
  if value == 0 { print("") }
}
