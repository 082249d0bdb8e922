import Crumbs
import CrumbsPlatform
import CrumbsTestChildC

// Store scenarios: writers that die inside a write or meet a full disk, and a crash loop. Each
// takes the Crumbs directory as its first argument and starts a client there with no
// destination and no automatic breadcrumbs (so nothing else writes in the background), and
// waits for its start-up work before the part under test.
#if canImport(Glibc)
  import Glibc
#endif

let storeScenarios: [String: @Sendable ([String]) -> Int32] = [
  // die-mid-write DIR report|delivery-state|reason|session-metrics: prepares what it will write,
  // prints "pid N", limits file size so that the write under test goes past it, and writes:
  //   report           a non-fatal report with a 1 MiB attachment (ReportStore.store)
  //   delivery-state   a report's delivery.json with a 64 KiB error text
  //   reason           a report dropped with a 64 KiB reason (dropped.reason)
  //   session-metrics  session-metrics.json, written anew (SessionMetricsFile.read)
  // The process stops inside that write and prints "in-write" (crumbs_test_limit_file_size),
  // for the test to SIGKILL it there; "finished" would mean it did not stop.
  "die-mid-write": { arguments in
    guard arguments.count == 2, let client = quietClient(arguments[0]) else { return 64 }
    let directory = arguments[0]
    let big = String(repeating: "x", count: 64 << 10)
    var write: () -> Void
    var limit: UInt64 = 4 << 10
    switch arguments[1] {
    case "report":
      let attachment = directory + "/big.bin"
      guard writeFile(attachment, [UInt8](repeating: 7, count: 1 << 20)) else { return 1 }
      limit = 64 << 10
      write = { _ = client.send(message: "dies in the write", attachments: [attachment]) }
    case "delivery-state":
      guard let stored = client.send(message: "its delivery state dies in the write") else { return 1 }
      var state = DeliveryState()
      var history = DeliveryState.Destination()
      history.lastError = big
      state.destinations["otlp"] = history
      write = { try? stored.writeDeliveryState(state) }
    case "reason":
      guard let stored = client.send(message: "its reason dies in the write") else { return 1 }
      write = { _ = try? client.store.drop(id: stored.report.id, reason: big) }
    case "session-metrics":
      unlink(CrumbsDirectory(directory).path(.sessionMetrics))
      limit = 16
      write = { _ = try? SessionMetricsFile.read(directory: directory) }
    default:
      return 64
    }
    print("pid \(getpid())")
    fflush(nil)
    guard crumbs_test_limit_file_size(limit, 1) == 0 else { return 1 }
    write()
    print("finished")
    return 0
  },

  // store-on-full-disk DIR: limits file size to 64 KiB with SIGXFSZ ignored (writes past it
  // fail with EFBIG, as on a full disk), sends a non-fatal report with a 1 MiB attachment, and
  // prints "stored yes|no", each of the client's problems as "problem TEXT", and "incoming N":
  // the entries left in reports/.incoming.
  "store-on-full-disk": { arguments in
    guard let directory = arguments.first, let client = quietClient(directory) else { return 64 }
    let attachment = directory + "/big.bin"
    guard writeFile(attachment, [UInt8](repeating: 7, count: 1 << 20)) else { return 1 }
    guard crumbs_test_limit_file_size(64 << 10, 0) == 0 else { return 1 }
    let stored = client.send(message: "the disk is full", attachments: [attachment])
    print("stored \(stored == nil ? "no" : "yes")")
    for problem in client.problems { print("problem \(problem)") }
    print("incoming \((try? Syscall.directoryEntries(directory + "/reports/.incoming"))?.count ?? -1)")
    return 0
  },

  // client-crash-at-once DIR [MAX_RECORDS MAX_MB]: starts a client (no destination, no
  // automatic breadcrumbs; the store limits when given), prints "start-ms X cpu-ms Y" (how long
  // start took on this thread, wall clock and the thread's CPU time) and dereferences null at once: one turn of a crash loop,
  // where no launch lives long enough for its background work.
  "client-crash-at-once": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    if arguments.count == 3, let records = Int(arguments[1]), let megabytes = Int(arguments[2]) {
      configuration.storeLimits = StoreLimits(maxRecordCount: records, maxDatabaseSize: megabytes)
    }
    let before = nanoseconds(CLOCK_MONOTONIC)
    let cpuBefore = nanoseconds(CLOCK_THREAD_CPUTIME_ID)
    do {
      _ = try CrumbsClient.start(configuration)
    } catch {
      print("error \(error)")
      return 1
    }
    let cpu = nanoseconds(CLOCK_THREAD_CPUTIME_ID) - cpuBefore
    print("start-ms \(Double(nanoseconds(CLOCK_MONOTONIC) - before) / 1e6) cpu-ms \(Double(cpu) / 1e6)")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },
]

/// A client with no destination and no automatic breadcrumbs, its start-up work done; nil (with
/// "error …" printed) when it cannot start.
private func quietClient(_ directory: String) -> CrumbsClient? {
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  do {
    let client = try CrumbsClient.start(configuration)
    client.waitForPreviousSessions(timeout: 60)
    return client
  } catch {
    print("error \(error)")
    fflush(nil)
    return nil
  }
}

private func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
  (try? Syscall.writeFileAtomically(path, bytes)) != nil
}
