// MutexHandOverTests.swift — under `make tsan`, the thread sanitizer sees a Synchronization.Mutex
// handed over by the kernel (Tests/CrumbsTestSupportC/crumbs_test_tsan_mutex.c): without that,
// the waiter takes the lock where the sanitizer cannot see it, and this test alone gets the run
// reported, as contended Mutexes of the recorder and the uploader did, at random. Each hand-over
// is made certain, not hoped for: the holder lets go only once the waiter sleeps in
// FUTEX_LOCK_PI (its /proc/self/task/TID/syscall says so). Only under the sanitizer: elsewhere it
// would test nothing of ours.

import CrumbsPlatform
import CrumbsRecorder
import CrumbsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Whether the thread sanitizer's runtime is in this process (it exports `__tsan_init`).
private let underThreadSanitizer = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

/// What the holder (the test's first thread) and the waiter (its second) share: a count inside a
/// Mutex and one outside a Mutex<()> that guards it, the two ways the package uses Mutex; and
/// two pipes for their turns (blocking reads: spinning for a turn, each starved the other of
/// the CPU on a busy machine).
private final class HandOvers: @unchecked Sendable {
  let inside = Mutex<Int>(0)
  let lock = Mutex(())
  var outside = 0  // only under `lock`
  /// The waiter's thread id, once it runs.
  let waiter = Atomic<Int32>(0)
  /// Holder → waiter: "take your turn", written while holding the lock and before the holder's
  /// own access, so that access is ordered before the waiter's by the lock alone.
  let asked: [Int32]
  /// Waiter → holder: "my turn is done".
  let done: [Int32]
  /// Turns where the waiter was not seen asleep in the lock within the deadline.
  let missed = Atomic<Int>(0)

  init() {
    var asked: [Int32] = [-1, -1]
    var done: [Int32] = [-1, -1]
    precondition(pipe(&asked) == 0 && pipe(&done) == 0)
    for end in asked + done { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }  // no child of another test
    self.asked = asked
    self.done = done
  }

  deinit { for descriptor in asked + done { close(descriptor) } }

  /// Writes one byte to the pipe `ends`.
  func signal(_ ends: [Int32]) {
    var byte: UInt8 = 1
    while write(ends[1], &byte, 1) < 0 && errno == EINTR {}
  }

  /// Reads one byte from the pipe `ends` (blocks until there is one).
  func wait(_ ends: [Int32]) {
    var byte: UInt8 = 0
    while read(ends[0], &byte, 1) < 0 && errno == EINTR {}
  }
}

#if arch(x86_64)
  private let futexCall = "202"
#else
  private let futexCall = "98"  // aarch64
#endif

/// Waits until thread `thread` of this process sleeps in FUTEX_LOCK_PI (at most 60 s): the lock
/// it asked for is held, so its release goes through the kernel.
private func sleepsInLock(_ thread: Int32) -> Bool {
  let deadline = ChildProcess.now() + 60
  while ChildProcess.now() < deadline {
    if let bytes = try? Syscall.readFile("/proc/self/task/\(thread)/syscall", limit: 512) {
      let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ")
      // futex(2), FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG.
      if fields.count > 2, fields[0] == futexCall, fields[2] == "0x86" { return true }
    }
    sched_yield()
  }
  return false
}

@Suite struct MutexHandOverTests {
  @Test(.enabled(if: underThreadSanitizer, "only the thread sanitizer can miss a hand-over"))
  func everyHandOverThroughTheKernelIsSeen() {
    let state = HandOvers()
    let rounds = 3  // hand-overs per Mutex (one would do)
    onThreads(2) { index in
      if index == 1 {
        state.waiter.store(Int32(CurrentThread.id), ordering: .releasing)
        for turn in 1...2 * rounds {
          state.wait(state.asked)
          if turn <= rounds {
            state.inside.withLock { $0 += 1 }
          } else {
            state.lock.withLock { _ in state.outside += 1 }
          }
          state.signal(state.done)
        }
        return
      }
      var waiter: Int32 = 0
      while waiter == 0 {
        waiter = state.waiter.load(ordering: .acquiring)
        sched_yield()
      }
      for turn in 1...2 * rounds {
        if turn <= rounds {
          state.inside.withLock { count in
            state.signal(state.asked)
            if !sleepsInLock(waiter) { state.missed.add(1, ordering: .relaxed) }
            count += 1
          }
        } else {
          state.lock.withLock { _ in
            state.signal(state.asked)
            if !sleepsInLock(waiter) { state.missed.add(1, ordering: .relaxed) }
            state.outside += 1
          }
        }
        state.wait(state.done)
      }
    }
    #expect(state.missed.load(ordering: .relaxed) == 0)
    #expect(state.inside.withLock { $0 } == 2 * rounds)
    #expect(state.lock.withLock { _ in state.outside } == 2 * rounds)
  }
}
