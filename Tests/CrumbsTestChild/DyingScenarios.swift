import Crumbs
import CrumbsSignalPathTesting
import CrumbsTestChildC

// Dying scenarios: what a server's default client sees while a crash kills the process with
// handlers chained after Crumbs' (the Swift runtime's backtracer, on by default on Linux).
#if canImport(Glibc)
  import Glibc
#endif

let dyingScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-dying DIR: a client with the default configuration (automatic breadcrumbs: signal
  // breadcrumbs, the memory monitor, here sampling every 100 ms and checking the crash handler
  // after each pass); the thread capture has 10 s to be answered. Waits for the previous
  // sessions, prints "session ID", then "crashing", and dereferences null.
  "client-dying": { arguments in dying(arguments, lateWorker: false) },
  // client-dying-late-worker DIR: the same, but first (before the client installs its crash
  // handler) starts "late-worker" and chains a SIGSEGV handler that, like the backtracer, sets
  // SIG_DFL for the crash signals and takes 1 s, asking the worker to serve from inside
  // the crash meanwhile (crumbs_test_after_crash.h): it prints "after-crash
  // served" or "after-crash not-served"; a worker that serves prints "served".
  "client-dying-late-worker": { arguments in dying(arguments, lateWorker: true) },
]

private func dying(_ arguments: [String], lateWorker: Bool) -> Int32 {
  guard let directory = arguments.first else { return 64 }
  if lateWorker {
    guard crumbs_test_start_late_worker(1000) == 0 else { return 1 }
  }
  crumbs_crash_testing_capture_deadline_ms(10_000)
  var configuration = CrumbsConfiguration(directory: directory)
  var memory = MemoryPressureConfiguration()
  memory.samplingIntervalMilliseconds = 100
  configuration.automaticBreadcrumbs?.memoryPressure = memory
  guard let client = startClient(configuration) else { return 1 }
  client.waitForPreviousSessions()
  return crashThroughNull(client)
}
