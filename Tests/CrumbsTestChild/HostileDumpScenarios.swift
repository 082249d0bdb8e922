import Crumbs
import CrumbsPlatform
import CrumbsTestChildC

#if canImport(Glibc)
  import Glibc
#endif

// A process that `crumbs threads` asks, turned against the CLI (which often runs as root): it
// knows each request's cookie, so it can put something else at the answer's name; and a referee
// that makes the asked process's pid be reused at one exact moment of the CLI's work.
let hostileDumpScenarios: [String: @Sendable ([String]) -> Int32] = [
  // dump-hostile DIR MODE [TARGET]: starts a CrumbsClient in DIR (no crash handler), then takes
  // the thread-dump signal itself; prints "dump-signal N", "ring PATH", "ready". For each
  // request, at the answer's name (made beside it, then renamed into place as an answer is):
  // MODE symlink puts a symbolic link to TARGET, fifo a FIFO; prints "planted PATH". Runs until
  // killed.
  "dump-hostile": { arguments in
    guard arguments.count >= 2 else { return 64 }
    let (directory, mode) = (arguments[0], arguments[1])
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    configuration.installsCrashHandler = false
    let client: CrumbsClient
    do {
      client = try CrumbsClient.start(configuration, shared: false)
    } catch {
      print("error \(error)")
      return 1
    }
    let rings = directory + "/rings"
    guard let ring = ((try? Syscall.directoryEntries(rings)) ?? []).first(where: { $0.hasSuffix(".ring") })
    else {
      print("error no ring in \(rings)")
      return 1
    }
    let signal = ThreadDumpRequests.installedSignal
    let requests = crumbs_test_catch_requests(signal)
    guard requests >= 0 else {
      print("error cannot take signal \(signal)")
      return 1
    }
    print("dump-signal \(signal)")
    print("ring \(rings)/\(ring)")
    print("ready")
    fflush(nil)
    while case let cookie = crumbs_test_next_request(requests), cookie >= 0 {
      let answer = RingDirectory.threadDumpPath(forRing: rings + "/" + ring, cookie: UInt32(cookie))
      // Made under another name, then renamed into place, as an answer is.
      let staged = answer + ".staged"
      let made =
        mode == "fifo" ? mkfifo(staged, 0o644) : symlink(arguments.count > 2 ? arguments[2] : "/", staged)
      let planted = made == 0 ? rename(staged, answer) : made
      print(planted == 0 ? "planted \(answer)" : "plant-failed \(errno)")
      fflush(nil)
    }
    withExtendedLifetime(client) {}
    return 0
  },
  // pid-reuse DIR GATE (root): starts a dump-target child (a client answering dumps) in
  // DIR/crumbs and watches every open of its ring (fanotify permission events); prints
  // "target PID", "watching". The first open by another process (the CLI reading the ring,
  // after it found it in the target's maps and before it signals) is held while the target is
  // killed and reaped and a new process takes its pid (clone3 set_tid), whose default action
  // for the request signal ends it; prints "impostor PID" (or "impostor-failed ERRNO"), then lets
  // the open go on. At GATE (opened once the CLI is done) it prints "impostor-alive" or
  // "impostor-ended STATUS", ends the impostor, and prints "done". (It prints "ready" when it
  // reaches GATE.)
  "pid-reuse": { arguments in
    guard arguments.count >= 2 else { return 64 }
    let (directory, gate) = (arguments[0], arguments[1])
    let targetGate = directory + "/target-gate"
    // Held open for reading and writing (which does not block) and never closed: the target
    // waits at its gate until it is killed.
    guard mkfifo(targetGate, 0o600) == 0, (try? Syscall.open(targetGate, O_RDWR)) != nil,
      let target = try? Subprocess(
        "/proc/self/exe", ["dump-target", directory + "/crumbs", targetGate, "client"],
        environment: ["CRUMBS_TEST_NO_CRASH_HANDLER": "1"])
    else {
      print("error cannot start the target")
      return 1
    }
    var signal: Int32 = 0
    while let line = target.readLine(timeoutMilliseconds: 120_000) {
      if line.hasPrefix("dump-signal ") { signal = Int32(line.dropFirst(12)) ?? 0 }
      if line == "ready" { break }
    }
    let rings = directory + "/crumbs/rings"
    guard signal > 0,
      let ring = ((try? Syscall.directoryEntries(rings)) ?? []).first(where: { $0.hasSuffix(".ring") })
    else {
      print("error the target has no ring answering dumps")
      target.signal(SIGKILL)
      target.wait(timeoutMilliseconds: nil)
      return 1
    }
    let watch = crumbs_test_watch_opens(rings + "/" + ring)
    guard watch >= 0 else {
      print("no-fanotify \(errno)")
      target.signal(SIGKILL)
      target.wait(timeoutMilliseconds: nil)
      return 1
    }
    print("target \(target.pid)")
    print("watching")
    fflush(nil)
    var opener: Int32 = 0
    var event: Int32 = -1
    guard crumbs_test_next_open(watch, target.pid, 120_000, &opener, &event) == 1 else {
      print("error no open of the ring")
      target.signal(SIGKILL)
      target.wait(timeoutMilliseconds: nil)
      return 1
    }
    print("intercepted \(opener)")
    target.signal(SIGKILL)
    target.wait(timeoutMilliseconds: nil)
    let impostor = crumbs_test_spawn_with_pid(target.pid, signal)
    print(impostor > 0 ? "impostor \(impostor)" : "impostor-failed \(errno)")
    fflush(nil)
    _ = crumbs_test_allow_open(watch, event)
    close(watch)  // later opens go on unwatched
    guard crumbs_test_wait_at_gate(gate) == 0 else { return 1 }
    if impostor > 0 {
      let ended = crumbs_test_reap_if_ended(impostor)
      print(ended == -1 ? "impostor-alive" : "impostor-ended \(ended)")
      kill(impostor, SIGKILL)
      var status: Int32 = 0
      waitpid(impostor, &status, 0)
    }
    print("done")
    fflush(nil)
    return 0
  },
]
