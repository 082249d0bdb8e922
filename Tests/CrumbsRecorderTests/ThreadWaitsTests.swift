// ThreadWaitsTests.swift — the parts of the wait reading that need no second thread: the
// kernel's per-thread text parsed (and refused when damaged), glibc's pthread_mutex_t layout on
// this machine (the owner's tid at byte 8, the lock word at 0), the checked read of a lock at a
// foreign or unmapped address, and the verdict over a hand-made graph. The real waits of real
// threads are ThreadWaitTests (CrumbsTests), with a child process.

import CrumbsPlatform
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ThreadWaitsTests {
  @Test func theSyscallLineIsParsedAndDamagedLinesAreRefused() {
    func parse(_ text: String) -> ProcText.SystemCallLine? {
      ProcText.systemCall(ArraySlice(Array(text.utf8)))
    }
    #expect(parse("running\n") == .running)
    #expect(parse("-1 0x7ffd1234 0x55aa\n") == .outside)
    #expect(
      parse("202 0x55d0c0 0x80 0x2 0x0 0x0 0x0 0x7ffd10 0x7f00aa\n")
        == .inCall(number: 202, arguments: [0x55d0c0, 0x80, 2, 0, 0, 0]))
    // Overflowing, truncated, non-hex, too-long and empty lines: nil, never a trap.
    #expect(parse("202 0x11111111111111111 0x80 0x2 0x0 0x0 0x0 0x7ffd10 0x7f00aa") == nil)
    #expect(parse("202 0x55d0c0 0x80") == nil)
    #expect(parse("202 0xZZ 0x80 0x2 0x0 0x0 0x0 0x7ffd10 0x7f00aa") == nil)
    #expect(parse("99999999999999999999 0x1 0x1 0x1 0x1 0x1 0x1 0x1 0x1") == nil)
    #expect(parse("") == nil)
    #expect(parse(String(repeating: "9", count: 4096)) == nil)
  }

  @Test func theStateLetterFollowsTheLastParenthesis() {
    func state(_ text: String) -> String? { ProcText.stateLetter(ArraySlice(Array(text.utf8))) }
    #expect(state("1234 (worker) S 1 2 3") == "S")
    #expect(state("1234 (a) b) R 1 2 3") == "R")
    #expect(state("1234 (worker") == nil)
    #expect(state("1234 (w) ") == nil)
  }

  @Test func glibcKeepsTheMutexOwnerAtByteEightAndTheLockWordAtZero() throws {
    // docs/platform-facts.md: the layout the owner is read with, checked on this glibc.
    let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    defer { mutex.deallocate() }
    pthread_mutex_init(mutex, nil)
    defer { pthread_mutex_destroy(mutex) }
    #expect(pthread_mutex_lock(mutex) == 0)
    let raw = UnsafeRawPointer(mutex)
    #expect(raw.load(fromByteOffset: 0, as: UInt32.self) == 1)  // __lock: locked, no waiters
    #expect(raw.load(fromByteOffset: 8, as: UInt32.self) == CurrentThread.id)  // __owner
    // Read the way a waiter's futex address is read: through process_vm_readv.
    let address = UInt64(UInt(bitPattern: raw))
    var wait = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&wait, arguments: [address, 128, 2], live: [CurrentThread.id])
    #expect(wait.owner == CurrentThread.id && wait.lockAddress == address)
    // An owner that is no thread of this process is not believed.
    var stranger = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&stranger, arguments: [address, 128, 2], live: [1])
    #expect(stranger.owner == nil && stranger.ownerUnknown?.contains("owner field") == true)
    #expect(pthread_mutex_unlock(mutex) == 0)
    // Released: the lock word is 0, no owner.
    var released = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&released, arguments: [address, 128, 2], live: [CurrentThread.id])
    #expect(released.owner == nil && released.ownerUnknown == "the lock was released")
  }

  @Test func aFutexAtAnUnmappedAddressOrOfAnotherShapeHasNoOwner() {
    // An address nothing maps: the checked read fails, the reader does not trap.
    var unmapped = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&unmapped, arguments: [0x10, 128, 2], live: [1])
    #expect(unmapped.owner == nil && unmapped.ownerUnknown == "the lock could not be read")
    // A lock in memory given back (a freed mapping): the same, never a stale owner.
    let page = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    #expect(page != MAP_FAILED)
    if let page, page != MAP_FAILED {
      page.storeBytes(of: 2, toByteOffset: 0, as: UInt32.self)
      page.storeBytes(of: CurrentThread.id, toByteOffset: 8, as: UInt32.self)
      let address = UInt64(UInt(bitPattern: page))
      var mapped = ThreadWait(threadID: 1)
      ThreadWaits.readFutex(&mapped, arguments: [address, 128, 2], live: [CurrentThread.id])
      #expect(mapped.owner == CurrentThread.id)
      munmap(page, 4096)
      var freed = ThreadWait(threadID: 1)
      ThreadWaits.readFutex(&freed, arguments: [address, 128, 2], live: [CurrentThread.id])
      #expect(freed.owner == nil && freed.ownerUnknown == "the lock could not be read")
    }
    // A lock whose 12 bytes run into an unmapped page: refused whole (a short read).
    let pages = mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if let pages, pages != MAP_FAILED {
      munmap(pages + 4096, 4096)
      let address = UInt64(UInt(bitPattern: pages)) + 4096 - 4
      var straddling = ThreadWait(threadID: 1)
      ThreadWaits.readFutex(&straddling, arguments: [address, 128, 2], live: [CurrentThread.id])
      #expect(straddling.owner == nil && straddling.ownerUnknown == "the lock could not be read")
      munmap(pages, 4096)
    }
    // A wait for 0 (a semaphore's, a condition variable's) is no mutex lock: not even read.
    var semaphore = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&semaphore, arguments: [0x10, 137, 0], live: [1])
    #expect(semaphore.owner == nil && semaphore.ownerUnknown?.hasPrefix("not a mutex lock wait") == true)
    var misaligned = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&misaligned, arguments: [0x11, 128, 2], live: [1])
    #expect(misaligned.ownerUnknown == "misaligned address")
  }

  @Test func aCycleIsADeadlockAndAChainEndsWhereNobodyIsWaitedFor() {
    func waiting(_ tid: UInt32, for owner: UInt32?, lock: UInt64, call: String = "futex") -> ThreadWait {
      var wait = ThreadWait(threadID: tid)
      wait.state = "S"
      wait.systemCall = 202
      wait.systemCallName = call
      wait.lockAddress = call == "futex" ? lock : nil
      wait.owner = owner
      if owner == nil, call == "futex" { wait.ownerUnknown = "x" }
      return wait
    }
    var sleeper = ThreadWait(threadID: 30)
    sleeper.systemCall = 230
    sleeper.systemCallName = "clock_nanosleep"
    let waits = ThreadWaits(threads: [
      waiting(5, for: 30, lock: 0x50), waiting(10, for: 20, lock: 0xa0), waiting(20, for: 10, lock: 0xb0),
      sleeper, waiting(40, for: nil, lock: 0xc0),
    ])
    #expect(waits.verdict() == WaitVerdict(kind: .deadlock, threads: [10, 20], locks: [0xa0, 0xb0]))
    #expect(waits.verdict(from: 20) == WaitVerdict(kind: .deadlock, threads: [20, 10], locks: [0xb0, 0xa0]))
    #expect(
      waits.verdict(from: 5)
        == WaitVerdict(kind: .chain, threads: [5, 30], locks: [0x50], end: "in clock_nanosleep"))
    // From a thread that waits for nobody named: the graph's own verdict.
    #expect(waits.verdict(from: 40)?.kind == .deadlock)
    #expect(
      ThreadWaits.describe(waits.verdict()!, names: [10: "a", 20: "b"])
        == "deadlock: a (tid 10) → b (tid 20) → a (tid 10) (mutexes 0xa0, 0xb0)")
    // No edge at all: no verdict.
    #expect(ThreadWaits(threads: [sleeper, waiting(40, for: nil, lock: 0xc0)]).verdict() == nil)
  }
}
