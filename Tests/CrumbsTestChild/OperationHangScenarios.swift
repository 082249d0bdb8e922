import Crumbs
import CrumbsPlatform
import CrumbsTestChildC
import Dispatch
import Synchronization

// Stuck-operation scenarios (issue 38, point 5, and the deaths of point 3): a client whose
// watchdog watches the in-flight ledger (`hangs.operationThreshold`) while the pool and a
// heartbeat stay healthy. SIGUSR1 (blocked in every thread, taken with sigwait) is the parent's
// "go on". Lines: "ring PATH", "op-thread TID", "op-hang-began REPORT-ID" ("-" when none was
// stored), "stuck-checks 40" (forty checks after it), "op-hang-ended SECONDS", "other-hang
// WATCH" (any other watch's hang), "checks N",
// "hangs N", "done". Each takes the Crumbs directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let operationHangScenarios: [String: @Sendable ([String]) -> Int32] = [
  // operation-hang DIR resume|kill|term: operation threshold 1 s; the pool (threshold 1 s) and
  // a heartbeat "healthy-loop" beaten every 10 ms by its own thread (a breadcrumb every 20th
  // turn) stay fine. A thread
  // "order-worker" begins "GET /v1/orders/:id" (a trace, a parent, an attribute), prints
  // "op-thread TID", and blocks in operationBlockedOnParent(). A second operation "GET /health"
  // is begun and ended at once. Then:
  //   resume  on SIGUSR1 the worker ends its operation; once the watchdog saw the hang end, the
  //           client closes, "done", exit 0
  //   kill    waits for the parent's SIGKILL
  //   term    the app takes SIGTERM itself (a flag) and begins a shutdown that waits for the
  //           stuck operation forever ("stopping" printed): the parent SIGKILLs it
  //   orphan  instead of the worker: a thread begins "POST /v1/orphan", prints
  //           "orphan-thread TID" and ends; the operation stays open; the parent SIGKILLs it
  "operation-hang": { arguments in
    guard arguments.count == 2, ["resume", "kill", "term", "orphan"].contains(arguments[1]) else { return 64 }
    let mode = arguments[1]
    blockGoOnSignal()
    if mode == "term" { signal(SIGTERM) { _ in operationStopRequested = 1 } }
    let events = OperationHangEvents()
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = mode == "term" ? AutomaticBreadcrumbsOptions() : nil
    configuration.hangs = HangDetection(threshold: 1, watchesConcurrencyPool: true, operationThreshold: 1)
    guard let client = startOperationClient(configuration) else { return 1 }
    let stop = StopFlag()
    let healthy = try? BackgroundThread.startJoinable(name: "healthy-loop") {
      let heartbeat = client.heartbeat("healthy-loop", threshold: 1)
      var turns = 0
      while !stop.isSet {
        heartbeat.beat()
        // A breadcrumb now and then: appends recalibrate the ring's clock (once a second).
        if turns % 20 == 0 { client.addBreadcrumb("healthy-loop turn \(turns)", level: .debug) }
        turns += 1
        usleep(10_000)
      }
      heartbeat.end()
    }
    client.beginOperation("GET /health").end()
    if mode == "orphan" {
      // Begun on a thread that ends at once: the operation stays open without its thread.
      let orphan = try? BackgroundThread.startJoinable(name: "orphan-worker") {
        _ = client.beginOperation("POST /v1/orphan", kind: .job)
        print("orphan-thread \(CurrentThread.id)")
        fflush(nil)
      }
      orphan?.join()
      while true { pause() }
    }
    let worker = try? BackgroundThread.startJoinable(name: "order-worker") {
      let trace = TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7")
      let order = client.beginOperation("GET /v1/orders/:id", trace: trace, parentSpanID: "b7ad6b7169203331")
      order.setAttribute("url.path", "/v1/orders/42")
      print("op-thread \(CurrentThread.id)")
      fflush(nil)
      operationBlockedOnParent()
      order.end()
    }
    switch mode {
    case "kill":
      while true { pause() }
    case "term":
      print("ready")
      fflush(nil)
      while operationStopRequested == 0 { usleep(5_000) }
      client.addBreadcrumb("shutdown: waiting for open requests", level: .info, type: .system)
      print("stopping")
      fflush(nil)
      // The shutdown waits for the stuck request, which never ends.
      worker?.join()
      return 1
    default:
      events.waitForEnd()
      worker?.join()
      stop.set()
      healthy?.join()
      client.close()
      print("done")
      fflush(nil)
      return 0
    }
  },

  // operation-quick DIR: operation threshold 2 s; an operation "POST /v1/quick" open for 0.5 s
  // (a sleep: the workload), then ended; the child waits until the watchdog made two checks
  // after 5 s had passed since the operation began, and prints "checks N", "hangs N" (reports of
  // kind hang in the store), "done".
  "operation-quick": { arguments in
    guard arguments.count == 1 else { return 64 }
    let events = OperationHangEvents()
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = HangDetection(threshold: 1, watchesConcurrencyPool: true, operationThreshold: 2)
    guard let client = startOperationClient(configuration) else { return 1 }
    let start = SystemClock.monotonicNanoseconds()
    let quick = client.beginOperation("POST /v1/quick")
    stallLoopSleeping(until: start + 500_000_000)
    quick.end()
    events.waitForChecks(after: start + 5_000_000_000, count: 2)
    let hangs = client.store.list(.pending).reports.filter { $0.report.kind == .hang }.count
    print("checks \(events.checks)")
    print("hangs \(hangs)")
    client.close()
    print("done")
    fflush(nil)
    return 0
  },

  // ledger-oom DIR CGROUP LIMIT: joins the memory cgroup CGROUP (limit LIMIT bytes), starts a
  // client (hangs off), begins "POST /v1/upload" on a thread that waits forever and
  // "GET /v1/report" on the main thread, prints "op-thread TID" and "ready", then touches
  // memory a MiB at a time until the OOM killer ends it (or, without one, malloc fails:
  // "malloc failed" and exit 3).
  "ledger-oom": { arguments in
    guard arguments.count == 3, let limit = Int(arguments[2]) else { return 64 }
    let procs = arguments[1] + "/cgroup.procs"
    let pid = Array("\(getpid())\n".utf8)
    let fd = open(procs, O_WRONLY)
    guard fd >= 0, pid.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == pid.count else {
      print("error cannot join \(procs): errno \(errno)")
      return 1
    }
    close(fd)
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    guard let client = startOperationClient(configuration) else { return 1 }
    let held = DispatchSemaphore(value: 0)
    _ = try? BackgroundThread.start(name: "upload-worker") {
      let trace = TraceContext(traceID: "5bf92f3577b34da6a3ce929d0e0e4736", spanID: "10f067aa0ba902b7")
      _ = client.beginOperation("POST /v1/upload", trace: trace)
      print("op-thread \(CurrentThread.id)")
      fflush(nil)
      held.signal()
      while true { pause() }
    }
    held.wait()
    _ = client.beginOperation("GET /v1/report")
    print("ready")
    fflush(nil)
    let step = 1 << 20
    var blocks: [UnsafeMutableRawPointer] = []
    blocks.reserveCapacity(limit / step * 4)
    while true {
      guard let block = malloc(step) else {
        print("malloc failed")
        fflush(nil)
        return 3
      }
      memset(block, 0x5A, step)
      blocks.append(block)
    }
  },
]

/// Set by the app's own SIGTERM handler (operation-hang term), read by the main loop.
nonisolated(unsafe) private var operationStopRequested: sig_atomic_t = 0

private func startOperationClient(_ configuration: CrumbsConfiguration) -> CrumbsClient? {
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

/// Prints the watchdog's events: an operation's hang as "op-hang-began"/"op-hang-ended", any
/// other watch's as "other-hang"; the main thread waits on them.
private final class OperationHangEvents: Sendable {
  private let ended = DispatchSemaphore(value: 0)
  private let checked = DispatchSemaphore(value: 0)
  private let seen = Atomic<UInt64>(0)
  /// Checks since the first operation hang began (0 before it).
  private let sinceBegan = Atomic<UInt64>(0)
  var checks: UInt64 { seen.load(ordering: .relaxed) }

  init() {
    CrumbsClient.hangWatchdogEvents.withLock {
      $0 = { [self] event in
        switch event {
        case .checked(let count):
          seen.store(count, ordering: .relaxed)
          checked.signal()
          if sinceBegan.load(ordering: .relaxed) > 0,
            sinceBegan.add(1, ordering: .relaxed).newValue == 41
          {
            print("stuck-checks 40")
            fflush(nil)
          }
          return
        case .began(let watch, let report) where watch.hasPrefix("operation "):
          _ = sinceBegan.compareExchange(expected: 0, desired: 1, ordering: .relaxed)
          print("op-hang-began \(report?.report.id ?? "-")")
        case .ended(let watch, let nanoseconds) where watch.hasPrefix("operation "):
          print("op-hang-ended \(Double(nanoseconds) / 1e9)")
          ended.signal()
        case .began(let watch, _):
          print("other-hang \(watch)")
        case .ended:
          break
        }
        fflush(nil)
      }
    }
  }

  func waitForEnd() { ended.wait() }

  /// Waits for `count` checks that ended after the monotonic clock passed `deadline` (ns).
  func waitForChecks(after deadline: UInt64, count: Int) {
    var after = 0
    while after < count {
      checked.wait()
      if SystemClock.monotonicNanoseconds() >= deadline { after += 1 }
    }
  }
}

/// The stuck request: waits for the parent's SIGUSR1.
@inline(never) func operationBlockedOnParent() {
  waitForGoOn()
}
