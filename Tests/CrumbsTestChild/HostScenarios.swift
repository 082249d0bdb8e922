import Crumbs
import CrumbsPlatform
import CrumbsTestChildC

// Unusual hosts (issue 21): the crash handler must record a complete crash where the process
// did something most do not. Same protocol as the crash scenarios (CrashScenarios.swift).
#if canImport(Glibc)
  import Glibc
#endif

let hostScenarios: [String: @Sendable ([String]) -> Int32] = [
  // dlclose-stale DIR: loads CRUMBS_TEST_PLUGIN, refreshes the module table (so it has the
  // plugin's row), takes a pointer to crumbs_plugin_crash, unloads the plugin with dlclose, and
  // calls the stale pointer from crumbs_test_call_pointer. Prints `function
  // crumbs_test_call_pointer ADDRESS` and `stale ADDRESS`; "unloaded" when dlclose unmapped it.
  "dlclose-stale": crashing { _ in
    guard let path = getenv("CRUMBS_TEST_PLUGIN"), let library = dlopen(path, RTLD_NOW),
      let crash = dlsym(library, "crumbs_plugin_crash")
    else {
      print("error cannot load CRUMBS_TEST_PLUGIN: \(dlerror().map { String(cString: $0) } ?? "unset")")
      return
    }
    print("modules \(CrashHandler.refreshModules())")
    dlclose(library)
    let stale = UInt(bitPattern: crash)
    print("stale 0x\(String(stale, radix: 16))")
    // Still mapped (a library marked NODELETE, or held by another reference)? Then the test
    // proves nothing: it says so.
    let mapped = (try? Syscall.readFile("/proc/self/maps", limit: 1 << 22)).map {
      String(decoding: $0, as: UTF8.self).contains("/libcrumbs_plugin.so")
    }
    print(mapped == false ? "unloaded" : "still-mapped")
    printFunction("crumbs_test_call_pointer", crumbs_test_address_of_call_pointer())
    armAndFlush()
    _ = crumbs_test_call_pointer(unsafeBitCast(crash, to: (@convention(c) () -> Int32).self))
  },
  // dlclose-reload DIR: loads CRUMBS_TEST_PLUGIN, refreshes the module table, unloads it, loads
  // CRUMBS_TEST_OTHER_PLUGIN (same size) and crashes inside it (crumbs_plugix_crash). Prints
  // "same-address yes" when the second was mapped where the first was, and `function
  // crumbs_plugix_store ADDRESS`.
  "dlclose-reload": crashing { _ in
    guard let first = getenv("CRUMBS_TEST_PLUGIN"), let second = getenv("CRUMBS_TEST_OTHER_PLUGIN"),
      let library = dlopen(first, RTLD_NOW), let old = dlsym(library, "crumbs_plugin_crash")
    else {
      print("error cannot load CRUMBS_TEST_PLUGIN: \(dlerror().map { String(cString: $0) } ?? "unset")")
      return
    }
    let oldAddress = UInt(bitPattern: old)
    print("modules \(CrashHandler.refreshModules())")
    dlclose(library)
    guard let other = dlopen(second, RTLD_NOW), let crash = dlsym(other, "crumbs_plugix_crash"),
      let store = dlsym(other, "crumbs_plugix_store")
    else {
      print("error cannot load CRUMBS_TEST_OTHER_PLUGIN")
      return
    }
    // Same shape, so the same offsets: the same address means the same load address.
    print("same-address \(oldAddress == UInt(bitPattern: crash) ? "yes" : "no")")
    printFunction("crumbs_plugix_store", UInt(bitPattern: store))
    armAndFlush()
    _ = unsafeBitCast(crash, to: (@convention(c) () -> Int32).self)()
  },
  // overflow-guarded DIR: a thread whose stack is guarded with MADV_GUARD_INSTALL overflows it.
  // Prints "guard-regions unsupported" (and exits 72) on kernels before 6.13, else
  // `function crumbs_test_overflow_stack ADDRESS`, `stack-low N`, `guard-low N` (decimal).
  "overflow-guarded": { arguments in
    guard crumbs_test_guard_regions_supported() != 0 else {
      print("guard-regions unsupported")
      print("crashing")
      fflush(nil)
      return 72
    }
    guard setUp(arguments) else { return 70 }
    printFunction("crumbs_test_overflow_stack", crumbs_test_address_of_overflow_stack())
    var stackLow: UInt = 0
    var guardLow: UInt = 0
    _ = crumbs_test_overflow_on_guarded_stack(&stackLow, &guardLow)  // prints them, then "crashing"
    print("error \(errno)")
    return 71
  },
  // main-exited DIR: 4 blocked threads, then the main thread calls pthread_exit and another
  // thread crashes once it has (crumbs_test_crash_after_main_exits).
  "main-exited": crashing { _ in
    printFunction("crumbs_test_null_deref", crumbs_test_address_of_null_deref())
    crumbs_test_crash_after_main_exits(4)
  },
]
