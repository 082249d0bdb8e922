@_spi(Testing) import Crumbs
import CrumbsSignalPath
import CrumbsTestChildC

// Fork scenarios: what a process that forks helpers leaves behind. Each sets up Crumbs like the
// crash scenarios (ring, crash handler, the facts they print) and prints `pid PID` too.
// CRUMBS_TEST_RAW_FORK=1 makes them fork without the fork handlers (glibc's _Fork), as clone()
// or a library's own fork would.
//   fork-child-crash DIR   the exit hook on; a forked child prints its ring and record
//                          (`child-ring`, `child-record`, as its BreadcrumbRing and CrashHandler
//                          name them) and crashes (null store); the parent reaps it, prints
//                          `child-pid`, `child-thread`, `child-status`, `done`, and exits 0
//   fork-child-exit DIR    the exit hook on; a forked child calls exit(0), the parent reaps it,
//                          prints `child-pid`, `child-status`, `crashing`, then waits to be killed
//   fork-worker DIR        forks a worker that stays alive and never execs (stdout and stderr on
//                          /dev/null), prints `worker PID` once the worker runs and `fork-ns`
//                          (from fork() until then), then crashes (null store)
//   fork-exec-loop DIR N   a forked child crashes (null store), a forked worker stays alive
//                          (stdout and stderr on /dev/null), then N children fork and exec
//                          /bin/true, each reaped; prints `crashed-child PID`, `worker PID`,
//                          `looped` (once the reaper thread, started after the first fork as a
//                          background pass starts it, has caught up) and waits to be killed, so
//                          the files its children left can be counted while it runs
//   fork-in-signal-handler DIR N   raises SIGUSR1 N times; its handler forks a child that
//                          _exits at once (crumbs_test_fork_signals.c); prints `allocations` (made
//                          inside fork() in the parent, fork handlers included), then starts the
//                          reaper as a background pass would, prints `reaped` once it caught up
//                          (or `reaped-timeout`), and waits to be killed
#if canImport(Glibc)
  import Glibc
#endif

let forkScenarios: [String: @Sendable ([String]) -> Int32] = [
  "fork-child-crash": { arguments in
    guard let child = setUpAndFork(arguments) else { return 70 }
    if child == 0 {
      addBreadcrumb("child about to crash", level: .warning)
      print("child-ring \(installedRing.value?.path ?? "")")
      print("child-record \(CrashHandler.recordPath ?? "")")
      print("child-thread \(crumbs_test_gettid())")
      fflush(nil)
      crumbs_test_null_deref()
      _exit(71)
    }
    let status = reap(child)
    addBreadcrumb("parent carries on", level: .info)
    print("child-pid \(child)")
    print("child-status \(status)")
    print("done")
    fflush(nil)
    return 0
  },
  "fork-child-exit": { arguments in
    guard let child = setUpAndFork(arguments) else { return 70 }
    if child == 0 {
      addBreadcrumb("child exiting", level: .info)
      exit(0)
    }
    let status = reap(child)
    print("child-pid \(child)")
    print("child-status \(status)")
    print("crashing")
    fflush(nil)
    while true { pause() }
  },
  "fork-exec-loop": { arguments in
    guard arguments.count >= 2, let count = Int(arguments[1]), let crashed = setUpAndFork(arguments) else {
      return 70
    }
    if crashed == 0 {
      crumbs_test_null_deref()
      _exit(71)
    }
    _ = reap(crashed)
    ForkedSessionReaper.startIfForked()  // as a background pass (the client's) does
    print("crashed-child \(crashed)")
    fflush(nil)
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return 73 }
    let worker = fork()
    if worker == 0 {
      let null = open("/dev/null", O_RDWR)
      dup2(null, 1)
      dup2(null, 2)
      var byte: UInt8 = 1
      _ = write(ends[1], &byte, 1)
      while true { pause() }
    }
    var byte: UInt8 = 0
    _ = read(ends[0], &byte, 1)  // the worker runs, its ring made
    print("worker \(worker)")
    // Made before the forks: a child only execs.
    let program = strdup("/bin/true")
    let argv: [UnsafeMutablePointer<CChar>?] = [program, nil]
    for _ in 0..<count {
      let child = fork()
      if child == 0 {
        execv(program!, argv)
        _exit(127)
      }
      guard child > 0, reap(child) == 0 else {
        print("error fork or /bin/true failed")
        return 72
      }
    }
    guard waitForReaper() else {
      print("error the reaper thread did not catch up")
      return 74
    }
    print("looped")
    fflush(nil)
    while true { pause() }
  },
  "fork-in-signal-handler": { arguments in
    guard arguments.count >= 2, let count = Int32(arguments[1]), setUp(arguments) else { return 70 }
    _ = crumbs_exit_hook_install(true)
    print("pid \(getpid())")
    let allocations = crumbs_test_fork_from_signal_handler(count)
    print("allocations \(allocations)")
    fflush(nil)
    ForkedSessionReaper.startIfForked()  // as a background pass (the client's) does
    print(waitForReaper() ? "reaped" : "reaped-timeout")
    fflush(nil)
    while true { pause() }
  },
  "fork-worker": crashing { _ in
    print("pid \(getpid())")
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return }
    fflush(nil)
    let started = nanoseconds(CLOCK_MONOTONIC)
    let worker = forkAsAsked()
    if worker == 0 {
      let null = open("/dev/null", O_RDWR)
      dup2(null, 1)
      dup2(null, 2)
      var byte: UInt8 = 1
      _ = write(ends[1], &byte, 1)
      while true { pause() }
    }
    var byte: UInt8 = 0
    _ = read(ends[0], &byte, 1)
    print("worker \(worker)")
    print("fork-ns \(nanoseconds(CLOCK_MONOTONIC) - started)")  // fork() until the worker runs
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    crumbs_test_null_deref()
  },
]

/// Sets up like the crash scenarios, turns the exit hook on, prints `pid`, then forks as asked:
/// the fork's result, or nil when the set-up failed.
func setUpAndFork(_ arguments: [String]) -> pid_t? {
  guard setUp(arguments) else { return nil }
  _ = crumbs_exit_hook_install(true)
  print("pid \(getpid())")
  fflush(nil)
  return forkAsAsked()
}

/// fork(), or with CRUMBS_TEST_RAW_FORK set, a fork that runs no fork handlers.
func forkAsAsked() -> pid_t {
  getenv("CRUMBS_TEST_RAW_FORK") != nil ? crumbs_test_fork_without_handlers() : fork()
}

/// Waits (at most 300 s) until the reaper thread's last round began fewer than `interval` forks
/// ago and that round finished.
func waitForReaper() -> Bool {
  // A wide margin: on a loaded 2-core machine (a CI build beside the tests) a round of the
  // reaper thread waited its turn for over a minute once.
  let deadline = nanoseconds(CLOCK_MONOTONIC) + 300_000_000_000
  while ForkedSessionReaper.forksSinceRound >= ForkedSessionReaper.interval {
    if nanoseconds(CLOCK_MONOTONIC) > deadline { return false }
    var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
    nanosleep(&pause, nil)
  }
  return true
}

/// Waits for `child` and returns its raw wait status (-1 when waitpid failed).
func reap(_ child: pid_t) -> Int32 {
  var status: Int32 = 0
  while waitpid(child, &status, 0) < 0 {
    if errno != EINTR { return -1 }
  }
  return status
}
