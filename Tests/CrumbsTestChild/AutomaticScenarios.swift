import Crumbs

// Automatic-breadcrumb scenarios: signals with the app's own handling, SIGTERM without a handler,
// a memory hog in a small cgroup.
#if canImport(Glibc)
  import Glibc
#endif

/// Set by the app's own SIGTERM handler (plain), read by the main loop.
nonisolated(unsafe) private var appQuitRequested: sig_atomic_t = 0

/// Scenarios for Tests/CrumbsTests/AutomaticBreadcrumbsTests.swift.
let automaticScenarios: [String: @Sendable ([String]) -> Int32] = [
  // signals-app DIR: the app handles SIGUSR1 (SA_SIGINFO: writes "app SIGUSR1 from PID") and
  // SIGTERM (plain: sets a flag, main returns 0), ignores SIGHUP and SIGPIPE; then signal
  // breadcrumbs, the exit hook and a start breadcrumb. Prints "ring PATH", "ready"; on "fork"
  // (SIGUSR2 from the test) it forks a grandchild that exits 7 and reaps it with waitpid:
  // prints "reaped 7". Returns 0 after SIGTERM, printing "exiting".
  "signals-app": { arguments in
    guard arguments.count == 1 else { return 64 }
    guard let ring = makeInstalledRing(arguments[0]) else { return 1 }
    var usr1 = sigaction()
    usr1.__sigaction_handler.sa_sigaction = { _, info, _ in
      // Async-signal-safe: digits by hand into a stack tuple, one write(2).
      var line: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
      withUnsafeMutableBytes(of: &line) { buffer in
        let prefix: StaticString = "app SIGUSR1 from "
        var used = 0
        for index in 0..<prefix.utf8CodeUnitCount {
          buffer[used] = prefix.utf8Start[index]
          used += 1
        }
        var pid = UInt32(clamping: info?.pointee._sifields._kill.si_pid ?? 0)
        var digits = 0
        var scratch = pid
        repeat {
          digits += 1
          scratch /= 10
        } while scratch > 0
        for position in stride(from: used + digits - 1, through: used, by: -1) {
          buffer[position] = UInt8(ascii: "0") + UInt8(pid % 10)
          pid /= 10
        }
        used += digits
        buffer[used] = UInt8(ascii: "\n")
        _ = write(1, buffer.baseAddress, used + 1)
      }
    }
    usr1.sa_flags = SA_SIGINFO | SA_RESTART
    sigaction(SIGUSR1, &usr1, nil)
    signal(SIGTERM) { _ in appQuitRequested = 1 }
    signal(SIGHUP, SIG_IGN)
    signal(SIGPIPE, SIG_IGN)
    // SIGUSR2 is how the test asks for a grandchild: the app's handler only sets a flag.
    signal(SIGUSR2) { _ in forkRequested = 1 }
    do {
      try SignalBreadcrumbs.install()
    } catch {
      print("error \(error)")
      return 1
    }
    Lifecycle.markCleanExitOnExit()
    Lifecycle.recordStart(version: "9.8.7")
    Lifecycle.record(.configReload, attributes: [("config.file", "/etc/app.toml")])
    print("ring \(ring.path)")
    print("ready")
    fflush(nil)
    while appQuitRequested == 0 {
      if forkRequested != 0 {
        forkRequested = 0
        let child = fork()
        if child == 0 { _exit(7) }
        var status: Int32 = 0
        let reaped = waitpid(child, &status, 0)
        print(reaped == child ? "reaped \((status >> 8) & 0xff)" : "waitpid failed \(errno)")
        fflush(nil)
      }
      usleep(5_000)
    }
    print("exiting")
    fflush(nil)
    return 0
  },

  // signals-default DIR: no app handler for anything; signal breadcrumbs, exit hook; prints
  // "ring PATH", "ready", then waits to be killed (SIGTERM from the test ends it by default).
  "signals-default": { arguments in
    guard arguments.count == 1, let ring = makeInstalledRing(arguments[0]) else { return 64 }
    do {
      try SignalBreadcrumbs.install()
    } catch {
      print("error \(error)")
      return 1
    }
    Lifecycle.markCleanExitOnExit()
    print("ring \(ring.path)")
    print("ready")
    fflush(nil)
    while true { pause() }
  },

  // memory-hog DIR CGROUP_DIR LIMIT_BYTES: joins the cgroup (writes its pid to cgroup.procs),
  // makes its ring there, starts the automatic breadcrumbs (monitor sampling every 200 ms),
  // prints "mode ...", "ring PATH", "ready"; touches memory up to 85% of the limit, waits (bounded)
  // for its own memory-pressure breadcrumb and prints "warned"; then touches memory until the
  // OOM killer ends it.
  "memory-hog": { arguments in
    guard arguments.count == 3, let limit = Int(arguments[2]) else { return 64 }
    let procs = arguments[1] + "/cgroup.procs"
    let pid = Array("\(getpid())\n".utf8)
    let fd = open(procs, O_WRONLY)
    guard fd >= 0, pid.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == pid.count else {
      print("error cannot join \(procs): errno \(errno)")
      return 1
    }
    close(fd)
    guard let ring = makeInstalledRing(arguments[0]) else { return 1 }
    var options = AutomaticBreadcrumbsOptions()
    options.signals = nil
    var memory = MemoryPressureConfiguration()
    memory.samplingIntervalMilliseconds = 200
    options.memoryPressure = memory
    let automatic = AutomaticBreadcrumbs.start(options)
    print("mode \(automatic.memoryMode)")
    print("sources \(automatic.memoryMonitor?.sourceDescription ?? "none")")
    print("ring \(ring.path)")
    print("ready")
    fflush(nil)
    let step = 1 << 20
    var blocks: [UnsafeMutableRawPointer] = []
    func touchOneMore() {
      let block = malloc(step)!
      memset(block, 0x5A, step)
      blocks.append(block)
    }
    while blocks.count * step < limit * 85 / 100 { touchOneMore() }
    var warned = false
    for _ in 0..<500 where !warned {
      warned = ring.snapshot().breadcrumbs.contains {
        $0.type == .system && $0.attributes.contains { $0.key == "memory.pressure" }
      }
      if !warned { usleep(10_000) }
    }
    print(warned ? "warned" : "not warned")
    fflush(nil)
    while true { touchOneMore() }
  },
]

nonisolated(unsafe) private var forkRequested: sig_atomic_t = 0
nonisolated(unsafe) private var processRing: BreadcrumbRing?

/// Test runners spawn children from threads that block most signals, and a spawned child
/// inherits that mask: an app starts with none blocked, so the scenarios do too.
private func unblockAllSignals() {
  var none = sigset_t()
  sigemptyset(&none)
  pthread_sigmask(SIG_SETMASK, &none, nil)
}

/// Creates a ring in `directory`, installs it, or prints the error and returns nil.
private func makeInstalledRing(_ directory: String) -> BreadcrumbRing? {
  unblockAllSignals()
  do {
    let ring = try RingDirectory(path: directory).createRing(options: RingOptions())
    ring.install()
    // Kept for the life of the process, as an app keeps its ring: a ring released before exit()
    // closes itself, and the exit hook then has no ring to mark.
    processRing = ring
    return ring
  } catch {
    print("error \(error)")
    return nil
  }
}
