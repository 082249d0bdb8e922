// MutexHandOverTests.swift — under `make tsan`, the thread sanitizer sees a Synchronization.Mutex
// handed over under contention (Tests/CrumbsTestSupportC/crumbs_test_tsan_mutex.c): without that,
// the contended lock is taken where the sanitizer cannot see it and this test alone gets the run
// reported, as every contended Mutex of the recorder and the uploader did, at random. Only under
// the sanitizer: elsewhere it would only test the standard library, and a contended Mutex is a
// convoy of kernel hand-overs that took a minute of the full suite's time on 2 busy CPUs.

import CrumbsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Whether the thread sanitizer's runtime is in this process (it exports `__tsan_init`).
private let underThreadSanitizer = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

/// Shared by the threads: a count inside a Mutex, and one outside a Mutex<()> that guards it,
/// the two ways the package uses Mutex.
private final class Counts: @unchecked Sendable {
  let inside = Mutex<Int>(0)
  let lock = Mutex(())
  var outside = 0  // only under `lock`
}

@Suite struct MutexHandOverTests {
  @Test(.enabled(if: underThreadSanitizer, "only the thread sanitizer can miss a hand-over"))
  func everyContendedHandOverIsSeen() {
    let counts = Counts()
    let threads = 4
    let rounds = 10_000
    onThreads(threads) { _ in
      for _ in 0..<rounds {
        counts.inside.withLock { $0 += 1 }
        counts.lock.withLock { _ in counts.outside += 1 }
      }
    }
    #expect(counts.inside.withLock { $0 } == threads * rounds)
    #expect(counts.lock.withLock { _ in counts.outside } == threads * rounds)
  }
}
