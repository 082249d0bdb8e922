import Crumbs
import CrumbsSignalPath
import CrumbsSignalPathTesting
import CrumbsTestChildC

#if canImport(Glibc)
  import Glibc
#endif

// Alternate stacks at scale: what they cost in mappings, and that the pool's growth keeps its
// guards (crumbs_altstack.c). Each takes the directory as its first argument.
// CRUMBS_TEST_NO_GUARD_REGIONS=1: madvise(MADV_GUARD_INSTALL) fails with EINVAL, as on a
// kernel before 6.13 (crumbs_test_refuse_guard_regions), from before install on.
let altstackScenarios: [String: @Sendable ([String]) -> Int32] = [
  // CRUMBS_TEST_THREADS (default 2000) threads held alive at once, twice (the second group after
  // the first was joined). Prints per group "groupN STARTED ERROR WITH-ONE DISTINCT REUSED DELTA":
  // threads started, pthread_create's error, threads with an alternate stack of the configured
  // size, how many different ones, how many the first group had, and the mappings the group
  // added (/proc/self/maps lines). CRUMBS_TEST_NO_CRUMBS=1: Crumbs is not installed at all (the
  // baseline); the usual crash scenario environment otherwise (CRUMBS_TEST_POOL,
  // CRUMBS_TEST_NO_NEW_THREAD_STACKS).
  "altstack-mappings": { arguments in
    guard refuseGuardRegionsWhenAsked() else { return 69 }
    if getenv("CRUMBS_TEST_NO_CRUMBS") == nil {
      guard setUp(arguments) else { return 70 }
    }
    let count = getenv("CRUMBS_TEST_THREADS").flatMap { UInt32(String(cString: $0)) } ?? 2000
    let size = UInt64(CrashHandlerOptions().alternateStackSize)
    for group in 1...2 {
      let before = crumbs_test_count_mappings()
      var held = crumbs_test_held_stacks()
      crumbs_test_hold_threads(count, size, &held)
      let after = crumbs_test_count_mappings()
      print(
        "group\(group) \(held.started) \(held.error) \(held.with_one) \(held.distinct) \(held.reused) \(after - before)"
      )
      fflush(nil)
      crumbs_test_release_threads()
    }
    print("done")
    fflush(nil)
    return 0
  },
  // Run with CRUMBS_TEST_POOL=1: a few threads are held, so some get a stack of a chunk the pool
  // grew by; a store into the guard page below such a stack must fault (guard regions do not
  // show in /proc/self/maps). Prints "guard ADDRESS".
  // Run with CRUMBS_TEST_POOL=1: 100 threads hold stacks (the pool grew by chunks), then the
  // main thread forks; in the child (where only the forking thread lives, and every other stack
  // is free again) 200 threads are held. The child prints "child STARTED WITH-ONE DISTINCT
  // MINE" (MINE: how many have the forking thread's own stack), the parent "child-exit STATUS"
  // and "done".
  "altstack-fork": { arguments in
    guard setUp(arguments) else { return 70 }
    let size = UInt64(CrashHandlerOptions().alternateStackSize)
    var held = crumbs_test_held_stacks()
    crumbs_test_hold_threads(100, size, &held)
    print("parent \(held.started) \(held.with_one) \(held.distinct)")
    fflush(nil)
    let child = fork()
    if child == 0 {
      crumbs_test_forget_held_threads()
      var own = stack_t()
      sigaltstack(nil, &own)
      var inChild = crumbs_test_held_stacks()
      crumbs_test_hold_threads(200, size, &inChild)
      let mine = crumbs_test_held_count_of(UInt64(UInt(bitPattern: own.ss_sp)))
      print("child \(inChild.started) \(inChild.with_one) \(inChild.distinct) \(mine)")
      fflush(nil)
      _exit(0)
    }
    var status: Int32 = 0
    waitpid(child, &status, 0)
    print("child-exit \(status)")
    print("done")
    fflush(nil)
    return 0
  },
  "altstack-guard-grown": { arguments in
    guard refuseGuardRegionsWhenAsked() else { return 69 }
    return guardOfGrownStack(arguments)
  },
]

/// With CRUMBS_TEST_NO_GUARD_REGIONS set, makes guard regions fail as an older kernel does;
/// false (after printing why) when that could not be set up.
func refuseGuardRegionsWhenAsked() -> Bool {
  guard getenv("CRUMBS_TEST_NO_GUARD_REGIONS") != nil else { return true }
  guard crumbs_test_refuse_guard_regions() == 0 else {
    print("no-seccomp \(errno)")
    return false
  }
  return true
}

let guardOfGrownStack = crashing { _ in
  let options = handlerOptions()
  var held = crumbs_test_held_stacks()
  crumbs_test_hold_threads(4, UInt64(options.alternateStackSize), &held)
  // The first pool: from the guard of its first stack to the end of the installing thread's.
  let low = UInt64(UInt(bitPattern: crumbs_crash_testing_altstack_guard(0)))
  let last = crumbs_crash_testing_altstack_guard(UInt32(options.alternateStackPoolCount))
  let high = UInt64(UInt(bitPattern: last)) + 4096 + UInt64(options.alternateStackSize)
  let guardAddress = crumbs_test_held_guard_outside(low, high)
  guard let guardPage = UnsafeMutableRawPointer(bitPattern: UInt(guardAddress)) else {
    print("no grown stack: \(held.started) threads, \(held.with_one) with a stack")
    return
  }
  print("guard \(guardAddress)")
  armAndFlush()
  guardPage.storeBytes(of: 1, as: UInt8.self)
}
