import Crumbs
import CrumbsPlatform

// Unclean-end scenarios (issue 24, "every unclean end explained"): a shutdown the test kills
// before it finishes, a CPU time limit, a file size limit. Each prints "ring PATH" and a line the
// test waits on; the test (UncleanEndTests) ends it and reads what the next launch reports.
#if canImport(Glibc)
  import Glibc
#endif

/// Set by the app's own SIGTERM handler, read by the main loop.
nonisolated(unsafe) private var stopRequested: sig_atomic_t = 0
nonisolated(unsafe) private var uncleanEndRing: BreadcrumbRing?

let uncleanEndScenarios: [String: @Sendable ([String]) -> Int32] = [
  // shutdown-stalls DIR: the app handles SIGTERM itself (a flag), with signal breadcrumbs in
  // front; prints "ring PATH", "ready". After SIGTERM: a "draining connections" breadcrumb,
  // prints "stopping", keeps draining for 1 s ("still draining" breadcrumbs), appends "waiting
  // for the last request", prints "drained 1 s" and never exits: the test SIGKILLs it, as an
  // orchestrator does when the grace period ends.
  "shutdown-stalls": { arguments in
    guard arguments.count == 1, let ring = makeUncleanEndRing(arguments[0]) else { return 64 }
    signal(SIGTERM) { _ in stopRequested = 1 }
    guard installSignalBreadcrumbs() else { return 1 }
    addBreadcrumb("serving", level: .info, type: .system)
    print("ring \(ring.path)")
    print("ready")
    fflush(nil)
    while stopRequested == 0 { usleep(5_000) }
    addBreadcrumb("draining connections", level: .info, type: .system)
    print("stopping")
    fflush(nil)
    // The shutdown the grace period will not let finish: alive for 1 s after the request.
    let start = SystemClock.monotonicNanoseconds()
    while SystemClock.monotonicNanoseconds() - start < 1_000_000_000 {
      addBreadcrumb("still draining", level: .debug, type: .system)
      usleep(50_000)
    }
    addBreadcrumb("waiting for the last request", level: .info, type: .system)
    print("drained 1 s")
    fflush(nil)
    while true { pause() }
  },

  // cpu-limit DIR ends|outlives: sets RLIMIT_CPU to a soft limit of 1 s (hard 2 s) before its
  // ring is made, then signal breadcrumbs (SIGXCPU among the defaults), prints "ring PATH" and
  // "spinning", and spins. `ends`: SIGXCPU's default action ends it at 1 s. `outlives`: the app
  // ignores SIGXCPU, so the kernel's SIGKILL at the hard limit (2 s) ends it.
  "cpu-limit": { arguments in
    guard arguments.count == 2, ["ends", "outlives"].contains(arguments[1]) else { return 64 }
    var limit = rlimit(rlim_cur: 1, rlim_max: 2)
    guard setrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &limit) == 0 else {
      print("error setrlimit \(errno)")
      return 1
    }
    if arguments[1] == "outlives" { signal(SIGXCPU, SIG_IGN) }
    guard let ring = makeUncleanEndRing(arguments[0]), installSignalBreadcrumbs() else { return 1 }
    addBreadcrumb("computing", level: .info, type: .system)
    print("ring \(ring.path)")
    print("spinning")
    fflush(nil)
    var value: UInt64 = 1
    while true {
      value = value &* 6_364_136_223_846_793_005 &+ 1
      if value == 0 { print("zero") }
    }
  },

  // file-limit DIR FILE: sets RLIMIT_FSIZE to 2 MiB (its 1 MiB ring fits) before its ring is
  // made, then signal breadcrumbs (SIGXFSZ among the defaults), prints "ring PATH" and
  // "writing", and writes FILE past 2 MiB: SIGXFSZ's default action ends it.
  "file-limit": { arguments in
    guard arguments.count == 2 else { return 64 }
    var limit = rlimit(rlim_cur: 2 << 20, rlim_max: 2 << 20)
    guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0 else {
      print("error setrlimit \(errno)")
      return 1
    }
    guard let ring = makeUncleanEndRing(arguments[0]), installSignalBreadcrumbs() else { return 1 }
    addBreadcrumb("writing the export", level: .info, type: .system)
    print("ring \(ring.path)")
    print("writing")
    fflush(nil)
    let fd = open(arguments[1], O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else {
      print("error open \(errno)")
      return 1
    }
    let chunk = [UInt8](repeating: 0x41, count: 64 << 10)
    for _ in 0..<64 {
      _ = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
    print("error not stopped: errno \(errno)")
    return 1
  },
]

/// A ring in `directory`, installed for the life of the process, or nil after printing why.
private func makeUncleanEndRing(_ directory: String) -> BreadcrumbRing? {
  var none = sigset_t()
  sigemptyset(&none)
  pthread_sigmask(SIG_SETMASK, &none, nil)
  do {
    let ring = try RingDirectory(path: directory).createRing(options: RingOptions())
    ring.install()
    uncleanEndRing = ring
    return ring
  } catch {
    print("error \(error)")
    return nil
  }
}

private func installSignalBreadcrumbs() -> Bool {
  do {
    try SignalBreadcrumbs.install()
    return true
  } catch {
    print("error \(error)")
    return false
  }
}
