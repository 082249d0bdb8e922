import Crumbs
import CrumbsPlatform
import CrumbsTestChildC
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

// Wait-for graph scenarios: threads that wait on each other in known ways (crumbs_test_waits.c),
// seen by a live capture (captureThreads) and by a hang report.
//   wait-graph DIR [stay]
//                    a client (hang threshold 1 s, no pool watch) and six threads: "dl-a"
//                    (beats the heartbeat "dl-a" once) and "dl-b" deadlocked on two pthread
//                    mutexes taken in opposite order; "ch-holder" holding a mutex and sleeping
//                    in nanosleep, "ch-waiter" (beats the heartbeat "ch-waiter" once) waiting
//                    for it; "sem-waiter" in sem_wait and
//                    "cond-waiter" in pthread_cond_wait. Once each is in its call it prints
//                    "role NAME TID OBJECT" (OBJECT: 0x… of what it waits on), then takes
//                    captureThreads() and prints "wait TID OWNER CALL" for each thread
//                    (OWNER "-" when unknown), "verdict KIND TID,TID…" and "verdict-text TEXT",
//                    and for each thread but the deadlocked ones the graph followed from it:
//                    "from NAME KIND TID,TID… | END" ("-" when none starts at it);
//                    then the watchdog's "hang-began WATCH REPORT-ID" for both heartbeats
//                    (in either order), "done", and exits 0
//                    (the deadlocked threads with it); with "stay" it stays until killed.
//   wait-read-cost DIR [THREADS]
//                    ring + crash handler and THREADS (default 100) threads blocked in read;
//                    then 15 rounds, each timing one whole live capture (the waits read with
//                    it) and, in the same round, the waits' read alone; prints "cost THREADS
//                    CAPTURE_MEDIAN_NS WAITS_MEDIAN_NS" (the figure for docs/hangs.md).
let waitScenarios: [String: @Sendable ([String]) -> Int32] = lockScenarios.merging(ownerScenarios) {
  first, _ in
  first
}

private let ownerScenarios: [String: @Sendable ([String]) -> Int32] = [
  "wait-read-cost": { arguments in
    guard setUp(arguments) else { return 70 }
    let count = arguments.dropFirst().first.flatMap { Int32($0) } ?? 100
    print("threads \(crumbs_test_start_blocked_threads(count, 1))")
    var captures: [UInt64] = []
    var reads: [UInt64] = []
    for _ in 0..<15 {
      let started = nanoseconds(CLOCK_MONOTONIC)
      guard let snapshot = try? LiveThreadCapture.capture() else {
        print("error capture failed")
        return 1
      }
      let captured = nanoseconds(CLOCK_MONOTONIC)
      _ = ThreadWaits.read(threads: snapshot.table.threads.map(\.id), skipping: snapshot.callerID)
      reads.append(nanoseconds(CLOCK_MONOTONIC) - captured)
      captures.append(captured - started)
    }
    print("cost \(count) \(captures.sorted()[7]) \(reads.sorted()[7])")
    return 0
  },
  "wait-graph": { arguments in
    guard let directory = arguments.first else { return 64 }
    let began = DispatchSemaphore(value: 0)
    guard let client = startGraphClient(directory, began: began) else { return 1 }
    let roles: [(String, Int32)] = [
      ("dl-a", Int32(CRUMBS_TEST_ROLE_DEADLOCK_FIRST)), ("dl-b", Int32(CRUMBS_TEST_ROLE_DEADLOCK_SECOND)),
      ("ch-holder", Int32(CRUMBS_TEST_ROLE_CHAIN_HOLDER)),
      ("ch-waiter", Int32(CRUMBS_TEST_ROLE_CHAIN_WAITER)),
      ("sem-waiter", Int32(CRUMBS_TEST_ROLE_SEMAPHORE)), ("cond-waiter", Int32(CRUMBS_TEST_ROLE_CONDITION)),
    ]
    for (name, role) in roles {
      do {
        try BackgroundThread.start(name: name) {
          // Made on the waiting thread itself, so that the hang report leads with it.
          let beating = [Int32(CRUMBS_TEST_ROLE_DEADLOCK_FIRST), Int32(CRUMBS_TEST_ROLE_CHAIN_WAITER)]
          guard beating.contains(role) else { return crumbs_test_wait_role(role) }
          let heartbeat = client.heartbeat(name, threshold: 1)
          heartbeat.beat()
          withExtendedLifetime(heartbeat) { crumbs_test_wait_role(role) }
        }
      } catch {
        print("error \(error)")
        return 1
      }
    }
    for (name, role) in roles {
      guard crumbs_test_wait_until_blocked(role) == 0 else {
        print("error \(name) did not block")
        return 1
      }
      let object = crumbs_test_wait_role_object(role)
      print("role \(name) \(crumbs_test_wait_role_tid(role)) 0x\(String(object, radix: 16))")
    }
    fflush(nil)
    do {
      let dump = try client.captureThreads()
      for wait in dump.waits {
        print(
          "wait \(wait.threadID) \(wait.owner.map(String.init) ?? "-") \(wait.systemCallName ?? "-")")
      }
      if let verdict = dump.verdict {
        print("verdict \(verdict.kind.rawValue) \(verdict.threads.map(String.init).joined(separator: ","))")
      }
      print("verdict-text \(dump.verdictText ?? "-")")
      // The chain and the ownerless waits, each followed from its own thread.
      let waits = ThreadWaits(threads: dump.waits)
      for (name, role) in roles where name != "dl-a" && name != "dl-b" {
        // Only a verdict that starts at it (else the graph's own, the deadlock, came back).
        let tid = crumbs_test_wait_role_tid(role)
        let verdict = waits.verdict(from: tid).flatMap { $0.threads.first == tid ? $0 : nil }
        let threads = verdict?.threads.map(String.init).joined(separator: ",") ?? "-"
        print("from \(name) \(verdict?.kind.rawValue ?? "-") \(threads) | \(verdict?.end ?? "-")")
      }
    } catch {
      print("error \(error)")
    }
    fflush(nil)
    began.wait()
    began.wait()
    print("done")
    fflush(nil)
    // "stay": for `crumbs threads` to ask; the test ends it with a signal.
    while arguments.dropFirst().first == "stay" { pause() }
    exit(0)
  },
]

/// A client for a wait-graph scenario in `directory` (hang threshold 1 s, no pool watch, no
/// automatic breadcrumbs) that prints the watchdog's "hang-began WATCH REPORT-ID" for each hang
/// and signals `began`; nil, the error printed, when it cannot start.
func startGraphClient(_ directory: String, began: DispatchSemaphore) -> CrumbsClient? {
  CrumbsClient.hangWatchdogEvents.withLock {
    $0 = { event in
      guard case .began(let watch, let report) = event else { return }
      print("hang-began \(watch) \(report?.report.id ?? "-")")
      fflush(nil)
      began.signal()
    }
  }
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  configuration.hangs = HangDetection(threshold: 1, watchesConcurrencyPool: false)
  do {
    return try CrumbsClient.start(configuration)
  } catch {
    print("error \(error)")
    return nil
  }
}
