import Crumbs
import CrumbsPlatform
import CrumbsSignalPath
import CrumbsSignalPathTesting
import CrumbsTestChildC
import CrumbsTestSupportC
import Dispatch

// Crash scenarios: each sets up Crumbs (ring + crash handler) in the directory given as the
// first argument, appends a few breadcrumbs (the last one "about to crash: NAME"), prints what
// the test checks, one fact a line, flushes, then crashes in one way:
//   ring PATH / record PATH       the files to read back
//   thread TID                    the thread that will crash
//   function NAME 0xADDRESS       start of the function whose code faults (C helpers)
//   last-breadcrumb MESSAGE       the last breadcrumb appended before the fault
//   crashing                      printed last, right before the fault
// Environment: CRUMBS_TEST_FAULT_IN_HANDLER=1 makes the handler fault inside itself (test hook);
// CRUMBS_TEST_SLOTS=N sizes the ring; CRUMBS_TEST_POOL=N the pool of alternate stacks;
// CRUMBS_TEST_NO_NEW_THREAD_STACKS=1 turns off alternate stacks for threads created later;
// CRUMBS_TEST_CAPTURE_DEADLINE_MS=N gives the thread capture N ms instead of 50; an
// LD_PRELOAD malloc guard, when present, is armed right before the crash (see CrashCaptureTests'
// allocation test).
#if canImport(Glibc)
  import Glibc
#endif

/// Scenarios that crash the process in each way the crash handler must catch.
let crashScenarios: [String: @Sendable ([String]) -> Int32] = [
  "null-deref": crashing { _ in
    printStackMapping()
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    crumbs_test_null_deref()
  },
  // Every thread at crash time: CRUMBS_TEST_THREADS (default 100) threads "blocker-NN", each
  // blocked in crumbs_test_blocked_NN, one "masked" with every signal blocked (it cannot
  // answer) and one "like-dispatch" blocking what Dispatch's workers block (SIGPROF asks it);
  // the main thread crashes once all of them are blocked. Prints "threads N".
  // CRUMBS_TEST_BLOCK=cond blocks them in pthread_cond_wait instead of read; CRUMBS_TEST_NO_MASKED=1
  // leaves the two out; CRUMBS_TEST_ASK_BLOCKED=1 makes the handler ask the masked one anyway
  // (it then waits for it until the deadline).
  // CRUMBS_TEST_GROUPS=N puts the process in N supplementary groups first (root only; prints
  // "groups-set 0" or "groups-set -1"); CRUMBS_TEST_CORE=1 turns core dumps on, written to DIR
  // when core_pattern is relative (prints "core-dumps 0" or "core-dumps -1"); CRUMBS_TEST_TRACER=1
  // attaches a tracer to the main thread (crumbs_test_attach_tracer; prints "tracer 0").
  // CRUMBS_TEST_LIVE_FIRST=1 takes a live capture first (LiveCaptureScenarios.swift).
  "all-threads": crashing { arguments in
    if let groups = getenv("CRUMBS_TEST_GROUPS").flatMap({ Int32(String(cString: $0)) }) {
      print("groups-set \(crumbs_test_set_many_groups(groups))")
    }
    if getenv("CRUMBS_TEST_CORE") != nil {
      print("core-dumps \(crumbs_test_enable_core_dumps(arguments[0]))")
    }
    let count = getenv("CRUMBS_TEST_THREADS").flatMap { Int32(String(cString: $0)) } ?? 100
    print(
      "threads \(crumbs_test_start_blocked_threads(count, getenv("CRUMBS_TEST_NO_MASKED") == nil ? 1 : 0))")
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    if getenv("CRUMBS_TEST_HANDLER_IN_FRONT") != nil { crumbs_test_install_chaining_handler_in_front() }
    if getenv("CRUMBS_TEST_TRACER") != nil { print("tracer \(crumbs_test_attach_tracer())") }
    takeLiveCaptureFirst()
    armAndFlush()
    crumbs_test_null_deref()
  },
  "altstack-guard": crashing { _ in
    // A store into the guard page below an alternate stack of the pool.
    let index = getenv("CRUMBS_TEST_GUARD_INDEX").flatMap { UInt32(String(cString: $0)) } ?? 3
    let guardPage = crumbs_crash_testing_altstack_guard(index)!
    print("guard \(UInt(bitPattern: guardPage))")
    armAndFlush()
    guardPage.storeBytes(of: 1, as: UInt8.self)
  },
  "call-null": crashing { _ in
    printFunction("crumbs_test_call_null", crumbs_test_address_of_call_null())
    armAndFlush()
    crumbs_test_call_null()
  },
  "fatal-error": crashing { _ in
    printSymbol("crumbs_child_fatal_error", crashByFatalError)
    armAndFlush()
    crashByFatalError()
  },
  "precondition": crashing { _ in
    printSymbol("crumbs_child_precondition", crashByPrecondition)
    armAndFlush()
    crashByPrecondition(Int(getpid()))
  },
  "force-unwrap": crashing { _ in
    printSymbol("crumbs_child_force_unwrap", crashByForceUnwrap)
    armAndFlush()
    crashByForceUnwrap(getenv("CRUMBS_NO_SUCH_VARIABLE_EVER"))
  },
  "bounds": crashing { _ in
    printSymbol("crumbs_child_bounds", crashByBounds)
    armAndFlush()
    crashByBounds(Int(getpid()) + 3)
  },
  "overflow": crashing { _ in
    printSymbol("crumbs_child_overflow", crashByOverflow)
    armAndFlush()
    crashByOverflow(Int.max - Int(getpid() % 2))
  },
  "divide-by-zero": crashing { _ in
    printSymbol("crumbs_child_divide_by_zero", crashByDivideByZero)
    armAndFlush()
    crashByDivideByZero(Int(getpid() % 1))
  },
  // What is said before the signal: the Swift runtime's message set by hand (so the malloc
  // guard can be armed after it: the runtime allocates its own), then a null store.
  // CRUMBS_TEST_MESSAGE=long ("x" and 2500 "é": 5001 bytes) | unterminated (100 bytes, then an
  // unreadable page).
  "fatal-message-segv": crashing { _ in
    let text: UnsafePointer<CChar>?
    switch getenv("CRUMBS_TEST_MESSAGE").map({ String(cString: $0) }) {
    case "long": text = UnsafePointer(strdup("x" + String(repeating: "é", count: 2500)))
    case "unterminated": text = crumbs_test_unterminated_text(100)
    default: text = UnsafePointer(strdup("Crumbs/Scenario.swift:12: Fatal error: set by the test child\n"))
    }
    guard crumbs_test_set_fatal_message(text) == 0 else { return }
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    crumbs_test_null_deref()
  },
  // An uncaught C++ exception: CRUMBS_TEST_CXX_KIND=1 throws an int, else a crumbs_test::Failure.
  "cxx-exception": crashing { _ in
    let kind = getenv("CRUMBS_TEST_CXX_KIND").flatMap { Int32(String(cString: $0)) } ?? 0
    print("crashing")
    fflush(nil)
    crumbs_test_cxx_throw(kind, "crash scenario: C++ exception")
  },
  // The same under the malloc guard: a terminate handler installed before the crash handler
  // aborts at once (libstdc++'s own would allocate to demangle), and one installed after it
  // arms the guard, then chains to the crash handler's. From the arming on, nothing allocates:
  // not the crash handler's terminate handler, not its signal handler.
  "cxx-exception-guarded": { arguments in
    crumbs_test_cxx_terminate_plainly()
    guard setUp(arguments) else { return 70 }
    crumbs_test_cxx_arm_guard_in_terminate()
    print("crashing")
    fflush(nil)
    crumbs_test_cxx_throw(0, "crash scenario: C++ exception")
    return 71
  },
  "abort": crashing { _ in
    armAndFlush()
    abort()
  },
  // glibc's heap check aborts inside free(), called from C called from Swift (issue 12 item 5).
  "heap-corruption": crashing { _ in
    armAndFlush()
    LibcAbortWorkload.releaseBuffer()
  },
  // C reads the clock, then calls abort(): clock_gettime's return address is left in dead stack.
  "clock-abort": crashing { _ in
    armAndFlush()
    LibcAbortWorkload.stampAndGiveUp()
  },
  // A Task runs outer() → middle(), which suspends (Task.yield), is resumed by the executor,
  // then faults in C: the async callers are only in the task's async context chain.
  "async-crash": crashing { _ in
    armAndFlush()
    Task.detached { await AsyncWorkload.outer(Int(getpid())) }
    while true { pause() }
  },
  // A fault in code without CFI or a frame pointer: its caller is found by the stack scan.
  "no-unwind-info": crashing { _ in
    armAndFlush()
    LibcAbortWorkload.runUnwindableCode()
  },
  // A fault inside a signal handler: the backtrace crosses the signal frame (x86_64).
  "fault-in-signal-handler": crashing { _ in
    armAndFlush()
    LibcAbortWorkload.interruptedBySignal()
  },
  "c-assert": crashing { _ in
    armAndFlush()
    crumbs_test_c_assert(1)
  },
  "bus-error": crashing { arguments in
    armAndFlush()
    crumbs_test_bus_error(arguments[0] + "/truncated-mapping")
  },
  "sigfpe": crashing { _ in
    printFunction("crumbs_test_int_divide", crumbs_test_address_of_int_divide())
    armAndFlush()
    print(crumbs_test_int_divide(7, Int32(getpid() % 1)))
  },
  "sigtrap": crashing { _ in
    printFunction("crumbs_test_breakpoint", crumbs_test_address_of_breakpoint())
    armAndFlush()
    crumbs_test_breakpoint()
  },
  "sigsys": crashing { _ in
    printFunction("crumbs_test_seccomp_trap", crumbs_test_address_of_seccomp_trap())
    armAndFlush()
    _ = crumbs_test_seccomp_trap()
  },
  // SIGQUIT is caught only when asked for (CRUMBS_TEST_CATCH_QUIT=1, set by the test).
  "sigquit": crashing { _ in
    armAndFlush()
    raise(SIGQUIT)
  },
  "stack-overflow-main": crashing { _ in
    printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
    armAndFlush()
    _ = crumbs_test_overflow_stack(0)
  },
  "stack-overflow-thread": crashing { _ in overflowOnNewThread() },
  // Stack overflows on threads that never append and never call prepareCurrentThread: each got
  // its alternate stack when it was created, after install (Crumbs' pthread_create).
  // A Dispatch worker (libdispatch creates it: a library's thread). Prints "covers-new-threads
  // BOOL" (CrashHandler.coversNewThreads).
  "stack-overflow-dispatch": crashing { _ in
    print("covers-new-threads \(CrashHandler.coversNewThreads)")
    printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
    print("crashing")
    fflush(nil)
    DispatchQueue.global().async { _ = crumbs_test_overflow_stack(0) }
    while true { pause() }
  },
  // Inside a Task (Swift concurrency's pool, Dispatch's threads on Linux).
  "stack-overflow-task": crashing { _ in
    printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
    print("crashing")
    fflush(nil)
    Task.detached { _ = crumbs_test_overflow_stack(0) }
    while true { pause() }
  },
  // A plain pthread.
  "stack-overflow-pthread": crashing { _ in
    printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
    print("crashing")
    fflush(nil)
    runOnThread(name: "overflower") { _ = crumbs_test_overflow_stack(0) }
  },
  // The 71st thread: 70 threads hold alternate stacks (the pool's 64, then stacks mapped for
  // them), then one more overflows. Prints "holders N distinct D": how many holders had an
  // alternate stack of the configured size, and how many different ones.
  "stack-overflow-71st": crashing { _ in
    printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
    let holders = 70
    let started = StartedThreads()
    let stacks = StackList(count: holders)
    for index in 0..<holders {
      spawnThread {
        stacks.set(index, crumbs_test_alternate_stack(UInt32(CrashHandlerOptions().alternateStackSize)))
        started.arrive()
        while true { pause() }
      }
    }
    started.wait(for: holders)
    let held = stacks.values.filter { $0 != 0 }
    print("holders \(held.count) distinct \(Set(held).count)")
    print("crashing")
    fflush(nil)
    runOnThread(name: "overflower") { _ = crumbs_test_overflow_stack(0) }
  },
  // Run with CRUMBS_TEST_POOL=1: a first thread takes the only pool stack and exits, so the
  // overflower's first breadcrumb must get the stack that thread gave back.
  "stack-overflow-recycled": crashing { _ in
    var first = [crumbs_test_altstack_report](repeating: .init(), count: 1)
    guard crumbs_test_append_on_threads(1, &first) == 0 else { return }
    overflowOnNewThread()
  },
  // Run with a small CRUMBS_TEST_POOL: as many threads as the pool holds each take a stack at
  // once, then exit; then a thread makes its first append under a seccomp filter that kills the
  // process on any system call but the few a first append may make. Prints each holder's
  // alternate stack and the watched thread's ("holder|watched SP SIZE FLAGS"), then "done".
  "first-append-seccomp": { arguments in
    guard setUp(arguments) else { return 70 }
    var holders = [crumbs_test_altstack_report](
      repeating: .init(), count: handlerOptions().alternateStackPoolCount)
    guard crumbs_test_append_on_threads(UInt32(holders.count), &holders) == 0 else { return 72 }
    for holder in holders { print("holder \(holder.stack) \(holder.size) \(holder.flags)") }
    fflush(nil)
    var watched = crumbs_test_altstack_report()
    guard crumbs_test_first_append_under_seccomp(&watched) == 0 else {
      print("no-seccomp \(watched.error)")
      return 73
    }
    print("watched \(watched.stack) \(watched.size) \(watched.flags)")
    print("done")
    fflush(nil)
    return 0
  },
  "thread-segv": crashing { _ in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    let appending = StartedThreads()
    for index in 0..<3 {
      spawnThread {
        var count = 0
        while true {
          addBreadcrumb("background \(index) n=\(count)", level: .debug)
          if count == 0 { appending.arrive() }
          count += 1
        }
      }
    }
    // Crash only once every background thread has appended: they keep appending meanwhile.
    appending.wait(for: 3)
    runOnThread(name: "crasher") {
      // A warning: it goes to the important lanes, which the three debug floods cannot lap
      // before the crash (an info one could be overwritten on a busy machine).
      addBreadcrumb("crasher started", level: .warning)
      print("thread \(crumbs_test_gettid())")
      armAndFlush()
      crumbs_test_null_deref()
    }
  },
  // The crashing thread's last traced breadcrumb names the report's span (CrashReport.trace):
  // not the crasher's later untraced one, nor another thread's later span.
  "traced-crash": crashing { _ in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    addBreadcrumb(
      "handling request", level: .info,
      attributes: [
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "trace_flags": "1",
      ])
    addBreadcrumb("untraced step", level: .info)
    let other = StartedThreads()
    spawnThread {
      addBreadcrumb(
        "other request", level: .info,
        attributes: [
          "trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "trace_flags": "0",
        ])
      other.arrive()
      while true { pause() }
    }
    other.wait(for: 1)
    print("thread \(crumbs_test_gettid())")
    armAndFlush()
    crumbs_test_null_deref()
  },
  "two-threads": crashing { _ in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    let start = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
    pthread_barrier_init(start, nil, 2)
    let barrier = BarrierBox(start)
    for name in ["crasher-a", "crasher-b"] {
      spawnThread {
        crumbs_test_set_thread_name(name)
        addBreadcrumb("\(name) ready", level: .info)
        pthread_barrier_wait(barrier.pointer)
        crumbs_test_null_deref()
      }
    }
    while true { pause() }
  },
  // Another thread appends "appended after the crash" while the handler Crumbs chains to runs
  // (a test handler, installed before Crumbs, that waits for it), then the process dies by
  // abort(): a signal that is not a fault, so it is recorded before the chained handler runs
  // (a fault would go to that handler first: see "runtime-recovers"). The thread blocks every
  // signal, so the crash cannot park it: the one kind of thread that still runs after a crash.
  "append-after-crash": { arguments in
    guard crumbs_test_install_waking_handler(SIGABRT) == 0, setUp(arguments) else { return 70 }
    let blocked = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
    pthread_barrier_init(blocked, nil, 2)
    let barrier = BarrierBox(blocked)
    spawnThread {
      var every = sigset_t()
      sigfillset(&every)
      pthread_sigmask(SIG_BLOCK, &every, nil)
      pthread_barrier_wait(barrier.pointer)
      guard crumbs_test_wait_for_wake() == 0 else { return }
      addBreadcrumb("appended after the crash", level: .warning)
      crumbs_test_signal_done()
    }
    pthread_barrier_wait(blocked)
    print("crashing")
    fflush(nil)
    abort()
  },
  "wait-for-signal": crashing { _ in
    armAndFlush()
    while true { pause() }
  },
  "handler-replaced": crashing { _ in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    crumbs_test_install_foreign_handler(SIGSEGV)
    print("replaced \(CrashHandler.replacedSignals().map(String.init).joined(separator: ","))")
    armAndFlush()
    crumbs_test_null_deref()
  },
  "handler-reasserted": crashing { arguments in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    crumbs_test_install_foreign_handler(SIGSEGV)
    print("replaced \(CrashHandler.replacedSignals().map(String.init).joined(separator: ","))")
    guard let ring = installedRing.value else { exit(70) }
    _ = try? CrashHandler.install(ring: ring, options: handlerOptions())
    print("after-reinstall \(CrashHandler.replacedSignals().map(String.init).joined(separator: ","))")
    armAndFlush()
    crumbs_test_null_deref()
  },
  // A runtime that owns SIGSEGV (installed before Crumbs, or after it and kept by a re-install)
  // fixes three faults (CRUMBS_TEST_FAULTS) on its own page and returns — given the first chance
  // only when declared (CRUMBS_TEST_DECLARE=runtime) —; prints "recovered N"; then, unless
  // CRUMBS_TEST_THEN=exit (exits 0), a null store it does not own, on which it gives up as
  // CRUMBS_TEST_GIVE_UP says: return (its saved action back, then return), raise (its saved action
  // back, then raise) or, installed after Crumbs, chain (calls its saved action: Crumbs').
  "runtime-recovers": { arguments in
    let giveUp = getenv("CRUMBS_TEST_GIVE_UP").map { String(cString: $0) } ?? "return"
    let mode: Int32 =
      switch giveUp {
      case "raise": Int32(CRUMBS_TEST_GIVE_UP_RESTORE_AND_RAISE)
      case "chain": Int32(CRUMBS_TEST_GIVE_UP_CHAIN)
      default: Int32(CRUMBS_TEST_GIVE_UP_RESTORE_AND_RETURN)
      }
    if mode != Int32(CRUMBS_TEST_GIVE_UP_CHAIN) {
      guard crumbs_test_install_runtime_handler(SIGSEGV, mode) == 0 else { return 70 }
    }
    guard setUp(arguments) else { return 70 }
    if mode == Int32(CRUMBS_TEST_GIVE_UP_CHAIN) {
      // A library that takes SIGSEGV after Crumbs; then Crumbs takes it back.
      guard crumbs_test_install_runtime_handler(SIGSEGV, mode) == 0, let ring = installedRing.value,
        (try? CrashHandler.install(ring: ring, options: handlerOptions())) != nil
      else { return 70 }
    }
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    let faults = getenv("CRUMBS_TEST_FAULTS").flatMap { Int32(String(cString: $0)) } ?? 3
    fflush(nil)  // a handler nobody declared is called after the record: the process may die here
    for value in 1...max(1, faults) { crumbs_test_runtime_fault(value) }
    print("recovered \(crumbs_test_runtime_recovered())")
    if getenv("CRUMBS_TEST_THEN").map({ String(cString: $0) }) == "exit" {
      fflush(nil)
      return 0
    }
    armAndFlush()
    crumbs_test_null_deref()
    return 71
  },
  // A vfork() child crashes before it execs (sharing this process's memory); prints
  // "vfork-child SIGNAL", then this process crashes on the same thread.
  "vfork-child-crashes": crashing { _ in
    print("vfork-child \(crumbs_test_vfork_child_crashes())")
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    crumbs_test_null_deref()
  },
  "uninstalled": crashing { _ in
    CrashHandler.uninstall()
    armAndFlush()
    crumbs_test_null_deref()
  },
  // The crash handler's ring closed before the crash: one the handler still holds while another
  // ring is the process-wide one (its mapping must outlive the close), or the process-wide ring.
  "closed-handler-ring": crashing { arguments in
    guard let ring = installedRing.value,
      let other = try? RingDirectory(path: arguments[0]).createRing()
    else { exit(70) }
    other.install()
    ring.close(clean: true)
    withExtendedLifetime(other) {
      armAndFlush()
      crumbs_test_null_deref()
    }
  },
  "closed-installed-ring": crashing { _ in
    installedRing.value?.close(clean: true)
    armAndFlush()
    crumbs_test_null_deref()
  },
  "clean-exit": { arguments in
    guard setUp(arguments) else { return 70 }
    print("exiting")
    fflush(nil)
    return 0
  },
  // dlopen-crash DIR: loads CRUMBS_TEST_PLUGIN (a library the test built) after the crash handler
  // took its module table, prints `function crumbs_plugin_store ADDRESS`, then calls its
  // crumbs_plugin_crash, which stores to null inside the library.
  "dlopen-crash": crashing { _ in
    guard let path = getenv("CRUMBS_TEST_PLUGIN"), let library = dlopen(path, RTLD_NOW),
      let store = dlsym(library, "crumbs_plugin_store"), let crash = dlsym(library, "crumbs_plugin_crash")
    else {
      print("error cannot load CRUMBS_TEST_PLUGIN: \(dlerror().map { String(cString: $0) } ?? "unset")")
      return
    }
    printFunction("crumbs_plugin_store", UInt(bitPattern: store))
    armAndFlush()
    _ = unsafeBitCast(crash, to: (@convention(c) () -> Int32).self)()
  },
  // recurse-64 DIR: a 1 MiB ring (4096 slots of 256 bytes), 64 C frames, then a null store:
  // the handler-time benchmark figure (read back from the record).
  "recurse-64": crashing { _ in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    _ = crumbs_test_recurse_then(64, crumbs_test_null_deref)
  },
]

// MARK: - Set-up shared by the scenarios

/// Wraps a scenario: set up Crumbs in arguments[0], append, run `body` (which must crash).
/// Prints `stack-mapping START END`: the calling thread's stack as /proc/self/maps lists it.
func printStackMapping() {
  var marker = 0
  let address = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
  guard let bytes = try? Syscall.readFile("/proc/self/maps", limit: 1 << 22) else { return }
  for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
    let range = line.split(separator: " ").first?.split(separator: "-") ?? []
    guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
      address >= start, address < end
    else { continue }
    print("stack-mapping \(start) \(end)")
  }
}

func crashing(_ body: @escaping @Sendable ([String]) -> Void) -> @Sendable ([String]) -> Int32 {
  { arguments in
    guard setUp(arguments) else { return 70 }
    body(arguments)
    print("did not crash")
    fflush(nil)
    return 71
  }
}

final class RingBox: @unchecked Sendable {
  var value: BreadcrumbRing?
}
let installedRing = RingBox()

final class BarrierBox: @unchecked Sendable {
  let pointer: UnsafeMutablePointer<pthread_barrier_t>
  init(_ pointer: UnsafeMutablePointer<pthread_barrier_t>) { self.pointer = pointer }
}

func handlerOptions() -> CrashHandlerOptions {
  var options = CrashHandlerOptions()
  crumbs_crash_testing_fault_inside_handler(getenv("CRUMBS_TEST_FAULT_IN_HANDLER") != nil)
  crumbs_crash_testing_ask_blocked_threads(getenv("CRUMBS_TEST_ASK_BLOCKED") != nil)
  crumbs_crash_testing_capture_deadline_ms(
    getenv("CRUMBS_TEST_CAPTURE_DEADLINE_MS").flatMap { UInt32(String(cString: $0)) } ?? 0)
  options.catchesQuit = getenv("CRUMBS_TEST_CATCH_QUIT") != nil
  if let pool = getenv("CRUMBS_TEST_POOL").flatMap({ Int(String(cString: $0)) }) {
    options.alternateStackPoolCount = pool
  }
  options.alternateStacksForNewThreads = getenv("CRUMBS_TEST_NO_NEW_THREAD_STACKS") == nil
  options.firstChanceHandlers = declaredFirstChanceHandlers()
  return options
}

/// Creates the ring (CRUMBS_TEST_SLOTS slots, default 4096 × 256 B = 1 MiB) and installs the
/// handler; prints ring, record, thread, install time and the breadcrumbs appended.
func setUp(_ arguments: [String]) -> Bool {
  guard let directory = arguments.first else {
    print("usage: SCENARIO DIR")
    return false
  }
  do {
    var options = RingOptions()
    options.slotCount = getenv("CRUMBS_TEST_SLOTS").flatMap { Int(String(cString: $0)) } ?? 4096
    let ring = try RingDirectory(path: directory).createRing(options: options)
    ring.install()
    installedRing.value = ring
    let started = nanoseconds(CLOCK_MONOTONIC)
    let startedCPU = nanoseconds(CLOCK_THREAD_CPUTIME_ID)
    // CRUMBS_TEST_GUARDS_LATER=1: install as CrumbsClient does, the guard pages of most
    // alternate stacks set afterwards (CrashHandler.guardAlternateStacks, here at once).
    let later = getenv("CRUMBS_TEST_GUARDS_LATER") != nil
    let record = try CrashHandler.install(ring: ring, options: handlerOptions(), guardingStacksLater: later)
    if later { CrashHandler.guardAlternateStacks() }
    let installTime = nanoseconds(CLOCK_MONOTONIC) - started
    let installCPUTime = nanoseconds(CLOCK_THREAD_CPUTIME_ID) - startedCPU
    print("ring \(ring.path)")
    print("record \(record)")
    print("install-ns \(installTime)")  // wall clock: includes preemption on a loaded machine
    print("install-cpu-ns \(installCPUTime)")  // this thread's CPU time (user + system)
    print("thread \(crumbs_test_gettid())")
    addBreadcrumb("step 1", level: .info)
    addBreadcrumb("step 2", level: .debug, attributes: ["k": "v"])
    // Warning level: important lanes, which the debug/info floods of some scenarios (and the
    // time the backtracer takes before the process dies) cannot evict.
    let last = "about to crash: \(CommandLine.arguments.dropFirst().first ?? "?")"
    addBreadcrumb(last, level: .warning)
    print("last-breadcrumb \(last)")
    return true
  } catch {
    print("error \(error)")
    return false
  }
}

func printFunction(_ name: String, _ address: UInt) {
  print("function \(name) 0x\(String(address, radix: 16))")
}

/// Prints "crashing", flushes stdout, and arms the LD_PRELOAD malloc guard when present: from
/// here on the process must not allocate until it is dead.
func armAndFlush() {
  print("crashing")
  fflush(nil)
  if crumbs_test_arm_malloc_guard() != 0 {
    // Nothing may allocate after this line, so nothing is printed.
  }
}

func nanoseconds(_ clock: clockid_t) -> UInt64 {
  var now = timespec()
  clock_gettime(clock, &now)
  return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Overflows the stack of a new thread named "overflower", whose first breadcrumb gives it an
/// alternate signal stack (the ring's first-append hook).
func overflowOnNewThread() -> Never {
  printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
  runOnThread(name: "overflower") {
    addBreadcrumb("overflower started", level: .info)
    print("thread \(crumbs_test_gettid())")
    armAndFlush()
    _ = crumbs_test_overflow_stack(0)
  }
}

/// Runs `body` on a new named thread and parks the calling thread forever.
func runOnThread(name: String, _ body: @escaping @Sendable () -> Void) -> Never {
  spawnThread {
    crumbs_test_set_thread_name(name)
    body()
  }
  while true { pause() }
}

// The Swift traps: each in its own never-inlined function with a C name, so the child can print
// its address (dlsym) and the test can find a frame in it. The @_cdecl entry is a thunk around
// the Swift body (in debug builds the body is a separate function the thunk calls; in release
// it is usually inlined into the thunk): either way a frame lies in the thunk.
@inline(never) @_cdecl("crumbs_child_fatal_error") public func crashByFatalError() {
  fatalError("crash scenario: fatalError")
}
@inline(never) @_cdecl("crumbs_child_precondition") public func crashByPrecondition(_ value: Int) {
  precondition(value < 0, "crash scenario")
}
@inline(never) @_cdecl("crumbs_child_force_unwrap")
public func crashByForceUnwrap(_ value: UnsafeMutablePointer<CChar>?) {
  print(value!)
}
@inline(never) @_cdecl("crumbs_child_bounds") public func crashByBounds(_ index: Int) {
  let array = [1, 2, 3]
  print(array[index])
}
@inline(never) @_cdecl("crumbs_child_overflow") public func crashByOverflow(_ value: Int) {
  print(value + 1 + Int(getpid() % 2))
}
@inline(never) @_cdecl("crumbs_child_divide_by_zero") public func crashByDivideByZero(_ divisor: Int) {
  print(42 / divisor)
}

/// Prints "function NAME 0xADDRESS" for a @_cdecl function: converting it to a C function
/// pointer yields its C entry point (the same address as the symbol NAME; checked with nm).
func printSymbol(_ name: String, _ function: @convention(c) () -> Void) {
  printFunction(name, UInt(bitPattern: unsafeBitCast(function, to: Int.self)))
}
func printSymbol(_ name: String, _ function: @convention(c) (Int) -> Void) {
  printFunction(name, UInt(bitPattern: unsafeBitCast(function, to: Int.self)))
}
func printSymbol(_ name: String, _ function: @convention(c) (UnsafeMutablePointer<CChar>?) -> Void) {
  printFunction(name, UInt(bitPattern: unsafeBitCast(function, to: Int.self)))
}

/// One value per thread, written by each and read after they all arrived.
final class StackList: @unchecked Sendable {
  private var storage: [UInt]
  private var mutex = pthread_mutex_t()
  init(count: Int) {
    storage = Array(repeating: 0, count: count)
    pthread_mutex_init(&mutex, nil)
  }
  func set(_ index: Int, _ value: UInt) {
    pthread_mutex_lock(&mutex)
    storage[index] = value
    pthread_mutex_unlock(&mutex)
  }
  var values: [UInt] {
    pthread_mutex_lock(&mutex)
    defer { pthread_mutex_unlock(&mutex) }
    return storage
  }
}

/// Counts threads that reached a point; another thread waits for a number of them.
final class StartedThreads: @unchecked Sendable {
  private var count = 0
  private var mutex = pthread_mutex_t()
  private var condition = pthread_cond_t()

  init() {
    pthread_mutex_init(&mutex, nil)
    pthread_cond_init(&condition, nil)
  }

  func arrive() {
    pthread_mutex_lock(&mutex)
    count += 1
    pthread_cond_broadcast(&condition)
    pthread_mutex_unlock(&mutex)
  }

  func wait(for expected: Int) {
    pthread_mutex_lock(&mutex)
    while count < expected { pthread_cond_wait(&condition, &mutex) }
    pthread_mutex_unlock(&mutex)
  }
}

/// Swift callers of the C functions that make glibc abort: named, never inlined, allocating
/// nothing (the malloc guard may be armed).
enum LibcAbortWorkload {
  @inline(never) static func releaseBuffer() {
    crumbs_test_corrupt_heap_then_free()
    print("unreachable: releaseBuffer")
  }

  @inline(never) static func runUnwindableCode() {
    let status = crumbs_test_crash_without_unwind_info()
    print("error \(status)")
  }

  @inline(never) static func interruptedBySignal() {
    // Shaped unlike runUnwindableCode, so a release build cannot merge the two.
    if crumbs_test_fault_in_signal_handler() != 0 { print("error: no SIGUSR1 handler") }
    print("unreachable: interruptedBySignal")
  }

  @inline(never) static func stampAndGiveUp() {
    crumbs_test_clock_then_abort()
    print("unreachable: stampAndGiveUp")
  }
}

/// An async call chain whose innermost function suspends before it crashes.
enum AsyncWorkload {
  @inline(never) static func outer(_ seed: Int) async {
    let value = await middle(seed &+ 1)
    print("unreachable: outer \(value)")
  }

  @inline(never) static func middle(_ seed: Int) async -> Int {
    await Task.yield()  // a real suspension: what follows runs when the executor resumes us
    if seed != 0 { crumbs_test_null_deref() }
    return seed
  }
}
