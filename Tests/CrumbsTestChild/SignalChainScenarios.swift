import CrumbsRecorder
import CrumbsTestChildC

// Signal chain scenarios: Crumbs' sigaction and signal stand in front of the next definition
// (crumbs_signal_watch.c). Each sets Crumbs up as the crash scenarios do (ring + crash handler,
// `setUp`) in the directory given as the first argument, then exits 0 after its last line.
// CRUMBS_TEST_SIGNAL_LIBRARY names a library the test built (SignalChainTests' signalUserSource):
// loaded with dlopen, it sets actions with its own calls, as any library of the app would; with
// CRUMBS_TEST_DEEPBIND=1 it is loaded with RTLD_DEEPBIND, so its calls go to its own
// dependencies' definitions (libc's) before the executable's.
#if canImport(Glibc)
  import Glibc
#endif

let signalChainScenarios: [String: @Sendable ([String]) -> Int32] = [
  // signal-chain DIR, with an LD_PRELOAD interposer (SignalChainTests' interposerSource) that
  // logs every call it sees and claims signals the way libjsig does for a JVM. After install:
  // the app's sigaction(SIGUSR2) and signal(SIGWINCH), the library's sigaction(SIGURG); then the
  // interposer claims SIGUSR1 ("the JVM installs its handler"), the library sets its own handler
  // for SIGUSR1, and SIGUSR1 is raised: prints "claimed-ran N" (the interposer's handler ran) and
  // "library-ran N" (the library's ran, chained by it). Last, the app's signal(SIGBUS): prints
  // "replaced LIST", the record's replaced signals. Prints "done".
  "signal-chain": { arguments in
    guard setUp(arguments), let library = signalUserLibrary(),
      let claim = cFunction("crumbs_interposer_claim", in: nil, as: (@convention(c) (Int32) -> Int32).self),
      let claimedRan = cFunction(
        "crumbs_interposer_claimed_ran", in: nil, as: (@convention(c) () -> Int32).self)
    else { return 70 }
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in }
    sigemptyset(&action.sa_mask)
    print("app-sigaction \(sigaction(SIGUSR2, &action, nil))")
    print("app-signal \(setFailed(signal(SIGWINCH, { _ in })) ? -1 : 0)")
    print("library-sigaction \(library.sigaction(SIGURG))")
    print("claim \(claim(SIGUSR1))")
    print("library-sigaction \(library.sigaction(SIGUSR1))")
    raise(SIGUSR1)
    print("claimed-ran \(claimedRan())")
    print("library-ran \(library.ran())")
    _ = signal(SIGBUS, { _ in })
    print("replaced \(CrashHandler.replacedSignals().map(String.init).joined(separator: ","))")
    print("done")
    fflush(nil)
    return 0
  },
  // claimed-crash DIR, with the LD_PRELOAD interposer: it claims SIGSEGV before Crumbs is set
  // up (a JVM created first, through libjsig), so Crumbs' install only becomes the action the
  // interposer's handler chains to. Prints "kernel-handler interposer" when the kernel still runs
  // the interposer's handler after install ("other" when something replaced it), then stores to
  // address 0: the interposer's handler calls Crumbs', which records the crash.
  "claimed-crash": { arguments in
    guard
      let claim = cFunction("crumbs_interposer_claim", in: nil, as: (@convention(c) (Int32) -> Int32).self),
      let handler = cFunction("crumbs_interposer_handler", in: nil, as: (@convention(c) () -> UInt).self),
      claim(SIGSEGV) == 0, setUp(arguments)
    else { return 70 }
    print("kernel-handler \(crumbs_test_kernel_handler(SIGSEGV) == handler() ? "interposer" : "other")")
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    armAndFlush()
    crumbs_test_null_deref()
    return 71
  },
  // interrupting-alarm DIR: SIGALRM made interrupting by siginterrupt(SIGALRM, 1), then given a
  // handler by signal(), each by the app or by the library as CRUMBS_TEST_INTERRUPT_BY says
  // ("app": the app's siginterrupt, the library's signal; "library": the other way round). Prints
  // "restart 0|1" (SA_RESTART in the action the kernel now has) and "reading"; then alarm(1)
  // (each handler arms it again, so one that fired before the read blocked is followed by
  // another) and a read on a pipe nobody writes: prints "read RESULT errno N" once it returns,
  // never if it restarts for ever.
  "interrupting-alarm": { arguments in
    guard setUp(arguments), let library = signalUserLibrary() else { return 70 }
    let appInterrupts = getenv("CRUMBS_TEST_INTERRUPT_BY").map { String(cString: $0) } != "library"
    if appInterrupts {
      guard crumbs_test_siginterrupt(SIGALRM, 1) == 0, library.signal(SIGALRM) == 0 else { return 71 }
    } else {
      guard library.siginterrupt(SIGALRM, 1) == 0, !setFailed(signal(SIGALRM, { _ in alarm(1) })) else {
        return 71
      }
    }
    var current = sigaction()
    guard sigaction(SIGALRM, nil, &current) == 0 else { return 72 }
    print("restart \(current.sa_flags & SA_RESTART != 0 ? 1 : 0)")
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return 73 }
    print("reading")
    fflush(nil)
    alarm(1)
    var byte: UInt8 = 0
    let result = read(ends[0], &byte, 1)
    let error = errno
    alarm(0)
    print("read \(result) errno \(error)")
    fflush(nil)
    return 0
  },
]

/// Whether signal() answered SIG_ERR (function pointers are not Equatable in Swift).
func setFailed(_ previous: sighandler_t?) -> Bool { unsafeBitCast(previous, to: Int.self) == -1 }

/// The functions of the library named by CRUMBS_TEST_SIGNAL_LIBRARY (SignalChainTests'
/// signalUserSource), each making its own libc call.
struct SignalUserLibrary {
  /// sigaction() of the library's counting handler (SA_RESTART) for a signal: 0 or -1.
  var sigaction: @convention(c) (Int32) -> Int32
  /// signal() with the same handler: 0 or -1.
  var signal: @convention(c) (Int32) -> Int32
  /// siginterrupt(): its result.
  var siginterrupt: @convention(c) (Int32, Int32) -> Int32
  /// How many times the handler ran (for SIGALRM it also arms alarm(1) again).
  var ran: @convention(c) () -> Int32
}

/// Loads CRUMBS_TEST_SIGNAL_LIBRARY; prints an "error" line and returns nil when it cannot.
func signalUserLibrary() -> SignalUserLibrary? {
  let binding = getenv("CRUMBS_TEST_DEEPBIND") != nil ? RTLD_DEEPBIND : 0
  guard let path = getenv("CRUMBS_TEST_SIGNAL_LIBRARY"), let handle = dlopen(path, RTLD_NOW | binding),
    let setAction = cFunction(
      "crumbs_signal_user_sigaction", in: handle, as: (@convention(c) (Int32) -> Int32).self),
    let setSignal = cFunction(
      "crumbs_signal_user_signal", in: handle, as: (@convention(c) (Int32) -> Int32).self),
    let interrupt = cFunction(
      "crumbs_signal_user_siginterrupt", in: handle, as: (@convention(c) (Int32, Int32) -> Int32).self),
    let ran = cFunction("crumbs_signal_user_ran", in: handle, as: (@convention(c) () -> Int32).self)
  else {
    print("error cannot load CRUMBS_TEST_SIGNAL_LIBRARY: \(dlerror().map { String(cString: $0) } ?? "unset")")
    return nil
  }
  return SignalUserLibrary(sigaction: setAction, signal: setSignal, siginterrupt: interrupt, ran: ran)
}

/// `name` in `handle` (nil: every loaded module, RTLD_DEFAULT) as a C function of type `type`;
/// prints an "error" line and returns nil when there is none.
func cFunction<Function>(_ name: String, in handle: UnsafeMutableRawPointer?, as type: Function.Type)
  -> Function?
{
  guard let symbol = dlsym(handle, name) else {
    print("error no \(name)")
    return nil
  }
  return unsafeBitCast(symbol, to: type)
}
