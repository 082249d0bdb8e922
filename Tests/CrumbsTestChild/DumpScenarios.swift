import Crumbs
import CrumbsPlatform
import CrumbsTestChildC

// Thread-dump scenarios: a running process with threads parked in known functions
// (crumbs_test_parked.h: "parked-reader" in crumbs_test_parked_reader, "parked-waiter" in
// crumbs_test_parked_waiter), dumped from outside (`crumbs threads PID`) or from inside
// (`CrumbsClient.captureThreads`).
#if canImport(Glibc)
  import Glibc
#endif

let dumpScenarios: [String: @Sendable ([String]) -> Int32] = [
  // dump-target DIR GATE [GATE2] [client|recorder|none]: starts a CrumbsClient in DIR (client,
  // the default), only a recorder's ring (recorder: no thread dumps), or nothing (none); starts
  // the parked threads, and a task whose thread ("parked-task") blocks in a read inside
  // DumpWorkload.parkedAfterSuspending, awaited by DumpWorkload.awaitingCaller (the client
  // without its crash handler when CRUMBS_TEST_NO_CRASH_HANDLER is set); prints "dump-signal N" (the signal the ring header names, 0 without a
  // client) and waits at GATE (prints "ready"). Released, it prints "alive", closes the client
  // and prints "closed"; with GATE2 it then waits there too (a request sent after the close must
  // not kill it). Returns 0.
  "dump-target": { arguments in
    guard arguments.count >= 2 else { return 64 }
    let mode = ["client", "recorder", "none"].contains(arguments.last!) ? arguments.last! : "client"
    let gates = arguments.dropFirst().filter { $0 != mode }
    var client: CrumbsClient?
    var ring: BreadcrumbRing?
    do {
      switch mode {
      case "client":
        var configuration = CrumbsConfiguration(directory: arguments[0])
        configuration.automaticBreadcrumbs = nil
        configuration.installsCrashHandler = getenv("CRUMBS_TEST_NO_CRASH_HANDLER") == nil
        client = try CrumbsClient.start(configuration, shared: false)
      case "recorder":
        ring = try RingDirectory(path: arguments[0]).createRing()
        ring?.install()
      default: break
      }
    } catch {
      print("error \(error)")
      return 1
    }
    // Two threads parked in C, and a task parked in a blocking read under an async caller.
    Task.detached { await DumpWorkload.awaitingCaller() }
    guard crumbs_test_start_parked_threads() == 0, crumbs_test_wait_for_parked(1) == 0 else {
      print("error parked threads")
      return 1
    }
    // CRUMBS_TEST_SECCOMP_THREADS: "sc-strict", "sc-filter" and "hc-spin" as well
    // (crumbs_test_start_host_calls); once the gate opens, their own results.
    let hostCalls = getenv("CRUMBS_TEST_SECCOMP_THREADS") != nil ? crumbs_test_start_host_calls(1) : 0
    guard hostCalls >= 0 else {
      print("error seccomp threads")
      return 1
    }
    // An operation open on this thread while it waits at the gate: the dump lists it.
    let operation = client?.beginOperation(
      "GET /v1/dump/:id",
      trace: TraceContext(traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b7ad6b7169203331"))
    print("operation-thread \(CurrentThread.id)")
    print("dump-signal \(ThreadDumpRequests.installedSignal)")
    for problem in client?.problems ?? [] { print("problem \(problem)") }
    fflush(nil)
    guard crumbs_test_wait_at_gate(gates.first!) == 0 else { return 1 }
    if hostCalls > 0 { print("results \(crumbs_test_finish_host_calls(hostCalls))") }
    print("alive")
    operation?.end()
    client?.close()
    ring?.close()
    print("closed")
    fflush(nil)
    if gates.count > 1 {
      guard crumbs_test_wait_at_gate(gates[gates.startIndex + 1]) == 0 else { return 1 }
      print("still alive")
    }
    return 0
  },

  // dump-capture DIR: starts a CrumbsClient and the parked threads, calls captureThreads() and
  // prints "thread TID NAME STATE F1|F2|…" (each frame's function, "?" for an unnamed one) per
  // thread, then "pause NS" and "done"; or "error DESCRIPTION". Returns 0. An operation
  // "orders.export" is open during the capture: "open TID AGE-NS KIND NAME" per open operation
  // the dump lists, and "capturing-thread TID".
  "dump-capture": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    do {
      let client = try CrumbsClient.start(configuration, shared: false)
      guard crumbs_test_start_parked_threads() == 0 else {
        print("error parked threads")
        return 1
      }
      let operation = client.beginOperation("orders.export", kind: .job)
      let dump = try client.captureThreads()
      operation.end()
      for open in dump.openOperations?.operations ?? [] {
        print("open \(open.threadID) \(open.ageNanoseconds) \(open.kind) \(open.name)")
      }
      print("capturing-thread \(CurrentThread.id)")
      for thread in dump.threads {
        let functions = thread.frames.map { $0.function ?? "?" }.joined(separator: "|")
        print("thread \(thread.id) \(thread.name ?? "-") \(thread.state.rawValue) \(functions)")
      }
      print("pause \(dump.longestPauseNanoseconds)")
      print("done")
      client.close()
      return 0
    } catch {
      print("error \(error)")
      return 1
    }
  },

  // dump-flood DIR: installs the request signal on a ring (no responder), then on the main
  // thread (where a signal it sends itself is handled before sigqueue returns) sends it 20000
  // requests with cookies 1…20000, and one tgkill; prints "queued N" (sigqueue calls that
  // succeeded), "taken N first F" (the first take), "left N" (a second take) and "tkill N" (a take
  // after the tgkill).
  "dump-flood": { arguments in
    guard let directory = arguments.first else { return 64 }
    do {
      let ring = try RingDirectory(path: directory).createRing()
      let requests = try ThreadDumpRequests.install(ring: ring)
      var queued = 0
      for cookie in Int32(1)...20_000
      where (try? Syscall.queueSignal(requests.signal, value: cookie, to: getpid())) != nil {
        queued += 1
      }
      print("queued \(queued)")
      let taken = requests.take(limit: 16)
      print("taken \(taken.count) first \(taken.first ?? 0)")
      print("left \(requests.take().count)")
      pthread_kill(pthread_self(), requests.signal)
      print("tkill \(requests.take().count)")
      requests.uninstall()
      ring.close()
      return 0
    } catch {
      print("error \(error)")
      return 1
    }
  },
]

/// An async caller, then a function that suspends once (so its caller is only in the task's
/// async context chain) and then blocks its thread in a read: a pool thread held by a task.
enum DumpWorkload {
  @inline(never) static func awaitingCaller() async {
    let value = await parkedAfterSuspending()
    print("unreachable: awaitingCaller \(value)")
  }

  @inline(never) static func parkedAfterSuspending() async -> Int {
    await Task.yield()
    crumbs_test_park_in_read("parked-task")
    return 1
  }
}
