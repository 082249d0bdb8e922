import Crumbs
import CrumbsTestChildC

// First chance: handlers of SIGSEGV that were there before Crumbs and do not recover. Each
// installs its handler, then Crumbs (CrashScenarios.swift's setUp), prints
// `function crumbs_test_null_deref ADDRESS` and "crashing", then stores to null.
//   handler-exits          the handler writes "exiting-handler 11" and _exit(70)s
//   handler-returns        the handler writes "returning-handler N" and returns, fixing nothing
//                          (after 10,000 calls: "looped", _exit(99))
//   library-handler-raises a library the test built (CRUMBS_TEST_LIBRARY) installs a handler
//                          that puts SIG_DFL back behind Crumbs' back (libc's signal(), or
//                          with CRUMBS_TEST_RAW=1 a raw rt_sigaction) and raises
//   handler-longjmps       the handler (declare it: jumping) leaves by siglongjmp; the thread
//                          appends "after the first chance", prints "jumped 1", then the
//                          process SIGKILLs itself
//   library-runtime-recovers  a library the test built (CRUMBS_TEST_LIBRARY) installs a handler
//                          that fixes faults on its own page; CRUMBS_TEST_FAULTS (1000) such
//                          faults, then "recovered N" and exit 0 (no null store)
// CRUMBS_TEST_DECLARE (any scenario, read by handlerOptions): handlers declared to recover,
// comma-separated: runtime, exiting, returning, jumping (the test child's C handlers), module:NAME.
#if canImport(Glibc)
  import Glibc
#endif

let firstChanceScenarios: [String: @Sendable ([String]) -> Int32] = [
  "handler-exits": { arguments in
    guard crumbs_test_install_exiting_handler(SIGSEGV) == 0 else { return 72 }
    return crashing { _ in nullStore() }(arguments)
  },
  "handler-returns": { arguments in
    guard crumbs_test_install_returning_handler(SIGSEGV) == 0 else { return 72 }
    return crashing { _ in nullStore() }(arguments)
  },
  "library-handler-raises": { arguments in
    guard let path = getenv("CRUMBS_TEST_LIBRARY"), let library = dlopen(path, RTLD_NOW),
      let install = dlsym(library, "crumbs_library_install")
    else {
      print("error cannot load CRUMBS_TEST_LIBRARY: \(dlerror().map { String(cString: $0) } ?? "unset")")
      return 72
    }
    let mode: Int32 = getenv("CRUMBS_TEST_RAW") != nil ? 1 : 0
    guard unsafeBitCast(install, to: (@convention(c) (Int32, Int32) -> Int32).self)(SIGSEGV, mode) == 0
    else { return 72 }
    return crashing { _ in nullStore() }(arguments)
  },
  "handler-longjmps": { arguments in
    guard crumbs_test_install_jumping_handler(SIGSEGV) == 0, setUp(arguments) else { return 72 }
    armAndFlush()
    let jumped = crumbs_test_null_store_jumped()
    addBreadcrumb("after the first chance", level: .info)
    print("jumped \(jumped)")
    fflush(nil)
    kill(getpid(), SIGKILL)
    return 73
  },
  "library-runtime-recovers": { arguments in
    guard let path = getenv("CRUMBS_TEST_LIBRARY"), let library = dlopen(path, RTLD_NOW),
      let install = dlsym(library, "crumbs_runtime_install"),
      let fault = dlsym(library, "crumbs_runtime_fault"),
      let recovered = dlsym(library, "crumbs_runtime_recovered"),
      let page = dlsym(library, "crumbs_runtime_page_address")
    else {
      print("error cannot load CRUMBS_TEST_LIBRARY: \(dlerror().map { String(cString: $0) } ?? "unset")")
      return 72
    }
    guard unsafeBitCast(install, to: (@convention(c) (Int32) -> Int32).self)(SIGSEGV) == 0, setUp(arguments)
    else { return 72 }
    print("page 0x\(String(unsafeBitCast(page, to: (@convention(c) () -> UInt).self)(), radix: 16))")
    armAndFlush()
    let faults = getenv("CRUMBS_TEST_FAULTS").flatMap { Int32(String(cString: $0)) } ?? 1000
    for value in 1...max(1, faults) { unsafeBitCast(fault, to: (@convention(c) (Int32) -> Void).self)(value) }
    print("recovered \(unsafeBitCast(recovered, to: (@convention(c) () -> Int32).self)())")
    fflush(nil)
    return 0
  },
]

/// CRUMBS_TEST_DECLARE as CrashHandlerOptions.firstChanceHandlers.
func declaredFirstChanceHandlers() -> [FirstChanceHandler] {
  guard let text = getenv("CRUMBS_TEST_DECLARE").map({ String(cString: $0) }) else { return [] }
  return text.split(separator: ",").compactMap { word -> FirstChanceHandler? in
    switch word {
    case "runtime": .function(at: UnsafeRawPointer(bitPattern: crumbs_test_runtime_handler_address())!)
    case "exiting": .function(at: UnsafeRawPointer(bitPattern: crumbs_test_exiting_handler_address())!)
    case "returning": .function(at: UnsafeRawPointer(bitPattern: crumbs_test_returning_handler_address())!)
    case "jumping": .function(at: UnsafeRawPointer(bitPattern: crumbs_test_jumping_handler_address())!)
    default: word.hasPrefix("module:") ? .module(String(word.dropFirst("module:".count))) : nil
    }
  }
}

private func nullStore() {
  printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
  armAndFlush()
  crumbs_test_null_deref()
}
