import CrumbsTestSupport
import CrumbsTestSupportC
import Foundation
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct RingConcurrencyTests {
  @Test func manyThreadsAppendWhileALiveReaderChecksInvariants() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    let writers = 4
    let perWriter = 40_000
    let done = ManagedAtomicFlag()
    let snapshots = ManagedCounter()
    let group = DispatchGroup()
    group.enter()
    Thread.detachNewThread {
      while !done.isSet {
        checkStressInvariants(ring.snapshot().breadcrumbs)
        snapshots.increment()
      }
      group.leave()
    }
    onThreads(writers) { thread in
      for counter in 0..<perWriter {
        ring.append("t=\(thread) n=\(counter)", attributes: ["t": String(thread), "n": String(counter)])
      }
    }
    done.set()
    group.wait()
    let final = ring.snapshot()
    checkStressInvariants(final.breadcrumbs)
    // Under oversubscription (4 writers, 2 CPUs) a writer preempted mid-append can be lapped:
    // the lapping writer skips its slot instead of tearing it, so nothing is torn, and every
    // append is either in the ring, overwritten by a newer one, or (rarely) given up.
    #expect(final.counts.torn == 0)
    #expect(final.counts.valid + final.counts.overwritten + final.counts.dropped == writers * perWriter)
    // Which lane each append took depends on the CPU it ran on; whatever the split, every slot
    // is accounted for and important lanes (nothing above info here) stay empty.
    let importantSlots = ring.lanesForTesting.filter(\.important).map(\.slotCount).reduce(0, +)
    #expect(final.counts.valid + final.counts.empty == ring.slotCount)
    #expect(final.counts.empty >= importantSlots)
    #expect(final.header.appendsClaimed >= UInt64(writers * perWriter))
    #expect(snapshots.value > 0)
  }

  @Test func appendsFromASignalHandlerInterleaveSafelyWithThreadAppends() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var options = RingOptions()
      options.slotCount = 1 << 16
      let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
      ring.install()
      defer { ring.close() }
      #expect(crumbs_test_install_appending_handler(SIGUSR1) == 0)
      let before = crumbs_test_signal_appends()
      let writers = 3
      let perWriter = 6_000
      let threadIDs = ThreadTable(count: writers)
      let started = ManagedCounter()
      let group = DispatchGroup()
      group.enter()
      Thread.detachNewThread {
        // Wait for the writers to exist, then interrupt them while they append.
        while started.value < writers { sched_yield() }
        for round in 0..<3_000 {
          threadIDs.signal(round % writers, SIGUSR1)
        }
        group.leave()
      }
      onThreads(writers) { thread in
        // The test runner's threads start with SIGUSR1 blocked.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGUSR1)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        threadIDs.register(thread)
        started.increment()
        for counter in 0..<perWriter {
          addBreadcrumb("t=\(thread) n=\(counter)", attributes: ["t": String(thread), "n": String(counter)])
        }
        // Stay alive until every signal aimed at this thread is delivered.
        group.wait()
      }
      let fromHandler = Int(crumbs_test_signal_appends() - before)
      let contents = ring.snapshot()
      checkStressInvariants(contents.breadcrumbs)
      #expect(fromHandler > 0)
      #expect(contents.counts.torn == 0)
      #expect(contents.counts.overwritten == 0)
      #expect(contents.counts.valid == writers * perWriter + fromHandler)
      let signalCrumbs = contents.breadcrumbs.filter(\.fromSignalHandler)
      #expect(signalCrumbs.count == fromHandler)
      #expect(
        signalCrumbs.allSatisfy {
          $0.message == "from signal handler" && $0.attributes == [.init(key: "origin", value: "signal")]
        })
    }
  }

  @Test func aDebugFloodDoesNotEvictImportantBreadcrumbs() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    ring.append("disk almost full", level: .warning, type: .system)
    ring.append("payment failed", level: .error, type: .http)
    ring.append("about to give up", level: .fatal)
    onThreads(2) { thread in
      for counter in 0..<(4 * ring.slotCount) {
        ring.append("noise \(thread) \(counter)", level: .debug)
      }
    }
    let contents = ring.snapshot()
    let important = contents.breadcrumbs.filter { $0.level >= .warning }.map(\.message)
    #expect(important == ["disk almost full", "payment failed", "about to give up"])
    #expect(contents.counts.overwritten > 0)
    // The important breadcrumbs are older than every surviving debug one, yet still there.
    #expect(contents.breadcrumbs.first?.message == "disk almost full")
  }
}

/// pthread ids of test threads, so another thread can signal them.
final class ThreadTable: @unchecked Sendable {
  private var threads: [pthread_t]
  private let lock = NSLock()
  init(count: Int) { threads = Array(repeating: pthread_t(), count: count) }
  func register(_ index: Int) {
    lock.withLock { threads[index] = pthread_self() }
  }
  func signal(_ index: Int, _ signalNumber: Int32) {
    let thread = lock.withLock { threads[index] }
    pthread_kill(thread, signalNumber)
  }
}

final class ManagedCounter: @unchecked Sendable {
  private var count = 0
  private let lock = NSLock()
  func increment() { lock.withLock { count += 1 } }
  var value: Int { lock.withLock { count } }
}

final class ManagedAtomicFlag: @unchecked Sendable {
  private var flag = false
  private let lock = NSLock()
  func set() { lock.withLock { flag = true } }
  var isSet: Bool { lock.withLock { flag } }
}
