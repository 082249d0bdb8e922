import Crumbs
import CrumbsTestChildC
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// Two `Synchronization.Mutex` taken in opposite order by two threads: on Linux the Mutex locks
// through a priority-inheritance futex, the kernel refuses the second waiter of the cycle
// (EDEADLK), and the runtime traps with "Recursive call to lock Mutex" (SIGILL).
//   mutex-cycle DIR  ring + crash handler; threads "mx-a" (takes `first`, then `second`) and
//                    "mx-b" (`second`, then `first`) meet at a barrier holding their first lock,
//                    then each asks for its second. Prints "role NAME TID 0xFIRST 0xSECOND"
//                    for each (the lock words' addresses), then "crashing"; one of the two
//                    crashes, the other stays blocked in FUTEX_LOCK_PI.
let mutexCycleScenarios: [String: @Sendable ([String]) -> Int32] = [
  "mutex-cycle": crashing { _ in
    let locks = MutexPair()
    let barrier = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
    pthread_barrier_init(barrier, nil, 3)
    let box = BarrierBox(barrier)
    for (name, forward) in [("mx-a", true), ("mx-b", false)] {
      spawnThread {
        crumbs_test_set_thread_name(name)
        locks.take(forward: forward, name: name, barrier: box)
      }
    }
    // Both hold their first lock and have printed their role.
    pthread_barrier_wait(barrier)
    armAndFlush()
    while true { pause() }
  }
]

final class MutexPair: Sendable {
  let first = Mutex<Int>(0)
  let second = Mutex<Int>(0)

  /// Takes one lock, meets the others at `barrier`, then asks for the other lock: in the
  /// cycle, `lockedSecond` never runs for one of the two threads, and traps for the other.
  func take(forward: Bool, name: String, barrier: BarrierBox) {
    if forward {
      cycle(first, then: second, name: name, barrier: barrier)
    } else {
      cycle(second, then: first, name: name, barrier: barrier)
    }
  }

  private func cycle(
    _ outer: borrowing Mutex<Int>, then inner: borrowing Mutex<Int>, name: String, barrier: BarrierBox
  ) {
    let where_ = "\(address(of: outer)) \(address(of: inner))"
    outer.withLock { _ in
      print("role \(name) \(crumbs_test_gettid()) \(where_)")
      fflush(nil)
      pthread_barrier_wait(barrier.pointer)
      inner.withLock { $0 += 1 }
    }
  }

  /// Where a Mutex's lock word is (its first bytes: `_MutexHandle`'s storage).
  private func address(of mutex: borrowing Mutex<Int>) -> String {
    withUnsafePointer(to: mutex) { "0x" + String(UInt(bitPattern: $0), radix: 16) }
  }
}
