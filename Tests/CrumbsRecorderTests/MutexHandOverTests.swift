// MutexHandOverTests.swift — a Synchronization.Mutex handed over under contention, again and
// again. Anywhere it checks mutual exclusion; under `make tsan` it also checks that the thread
// sanitizer sees those hand-overs (Tests/CrumbsTestSupportC/crumbs_test_tsan_mutex.c): without
// that, the contended lock is taken where the sanitizer cannot see it and this test alone gets
// the run reported, as every contended Mutex of the recorder and the uploader did at random.

import CrumbsTestSupport
import Synchronization
import Testing

/// Shared by the threads: a count behind a Mutex, and one more behind a Mutex<()> guarding
/// state outside it, the two ways the package uses Mutex.
private final class Counts: @unchecked Sendable {
  let inside = Mutex<Int>(0)
  let lock = Mutex(())
  var outside = 0  // only under `lock`
}

@Suite struct MutexHandOverTests {
  @Test func everyContendedHandOverIsOrdered() {
    let counts = Counts()
    let threads = 4
    let rounds = 50_000
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
