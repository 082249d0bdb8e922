// ThreadWaitsTests.swift — the parts of the wait reading that need no second thread: the
// kernel's per-thread text parsed (and refused when damaged), the lock layouts on this machine
// (glibc's pthread_mutex_t: the owner's tid at byte 8; pthread_rwlock_t: the writer at byte 24;
// Swift's Synchronization.Mutex: the owner's tid in its first word), the checked read of a lock
// at a foreign, unmapped or damaged address for every layout, and the verdict over a hand-made
// graph. The real waits of real
// threads are ThreadWaitTests (CrumbsTests), with a child process.

import CrumbsPlatform
import Synchronization
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
    // A wait with an owner and no kind read (none of these) counts as a glibc mutex's.
    #expect(
      waits.verdict()
        == WaitVerdict(
          kind: .deadlock, threads: [10, 20], locks: [0xa0, 0xb0], lockKinds: [.mutex, .mutex]))
    #expect(
      waits.verdict(from: 20)
        == WaitVerdict(
          kind: .deadlock, threads: [20, 10], locks: [0xb0, 0xa0], lockKinds: [.mutex, .mutex]))
    #expect(
      waits.verdict(from: 5)
        == WaitVerdict(
          kind: .chain, threads: [5, 30], locks: [0x50], end: "sleeping in clock_nanosleep",
          lockKinds: [.mutex]))
    // From a thread that waits for nobody named: the graph's own verdict.
    #expect(waits.verdict(from: 40)?.kind == .deadlock)
    #expect(
      ThreadWaits.describe(waits.verdict()!, names: [10: "a", 20: "b"])
        == "deadlock: a (tid 10) → b (tid 20) → a (tid 10) (mutexes 0xa0, 0xb0)")
    // No edge at all: no verdict.
    #expect(ThreadWaits(threads: [sleeper, waiting(40, for: nil, lock: 0xc0)]).verdict() == nil)
  }

  @Test func glibcKeepsTheRwlockWriterAtByte24AndItsFutexWordsAt8And12() throws {
    // docs/platform-facts.md: the rwlock layout the writer is read with, checked on this glibc.
    let rwlock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
    defer { rwlock.deallocate() }
    pthread_rwlock_init(rwlock, nil)
    defer { pthread_rwlock_destroy(rwlock) }
    let raw = UnsafeRawPointer(rwlock)
    let base = UInt64(UInt(bitPattern: raw))
    #expect(MemoryLayout<pthread_rwlock_t>.size == 56)
    #expect(pthread_rwlock_wrlock(rwlock) == 0)
    // __readers: WRPHASE | WRLOCKED; __wrphase_futex 1, __writers_futex 1; __cur_writer.
    #expect(raw.load(fromByteOffset: 0, as: UInt32.self) == 3)
    #expect(raw.load(fromByteOffset: 8, as: UInt32.self) == 1)
    #expect(raw.load(fromByteOffset: 12, as: UInt32.self) == 1)
    #expect(raw.load(fromByteOffset: 24, as: UInt32.self) == CurrentThread.id)
    // A reader waits on byte 8 for 3, a second writer on byte 12 for 3 (ThreadWaitTests shows
    // both in a child): read the way their waits are read, through process_vm_readv.
    var reader = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&reader, arguments: [base + 8, 0x189, 3], live: [CurrentThread.id])
    #expect(reader.owner == CurrentThread.id && reader.lockKind == .rwlock && reader.lockObject == base)
    #expect(reader.wantsToWrite == false)
    var writer = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&writer, arguments: [base + 12, 0x189, 3], live: [CurrentThread.id])
    #expect(writer.owner == CurrentThread.id && writer.lockObject == base && writer.wantsToWrite == true)
    #expect(
      writer.activity
        == "waiting to write rwlock 0x\(String(base, radix: 16)) held for writing by tid \(CurrentThread.id)")
    // A writer that is no thread of ours is not believed; a call flagged shared is not this lock.
    var stranger = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&stranger, arguments: [base + 8, 0x189, 3], live: [1])
    #expect(stranger.owner == nil && stranger.ownerUnknown?.hasPrefix("no thread of this process") == true)
    var shared = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&shared, arguments: [base + 8, 0x109, 3], live: [CurrentThread.id])
    #expect(shared.owner == nil && shared.lockKind == nil)
    #expect(pthread_rwlock_unlock(rwlock) == 0)
    // Held for reading: readers, and no writer recorded.
    #expect(pthread_rwlock_rdlock(rwlock) == 0)
    #expect(raw.load(fromByteOffset: 0, as: UInt32.self) == 8)
    #expect(raw.load(fromByteOffset: 24, as: UInt32.self) == 0)
    #expect(pthread_rwlock_unlock(rwlock) == 0)
  }

  @Test func aSynchronizationMutexHoldsItsOwnersTidInItsFirstWord() throws {
    // docs/platform-facts.md: Swift 6.3's Mutex on Linux is a PI futex word at its start.
    let mutex = UnsafeMutablePointer<Mutex<Int>>.allocate(capacity: 1)
    mutex.initialize(to: Mutex(0))
    defer { mutex.deinitialize(count: 1).deallocate() }
    let address = UInt64(UInt(bitPattern: mutex))
    #expect(UnsafeRawPointer(mutex).load(as: UInt32.self) == 0)
    let inside = mutex.pointee.withLock { _ -> (word: UInt32, wait: ThreadWait) in
      var wait = ThreadWait(threadID: 1)
      // FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG, as a waiter shows it in /proc.
      ThreadWaits.readFutex(&wait, arguments: [address, 134, 0], live: [CurrentThread.id])
      return (UnsafeRawPointer(mutex).load(as: UInt32.self), wait)
    }
    #expect(inside.word == CurrentThread.id)
    #expect(inside.wait.owner == CurrentThread.id && inside.wait.lockKind == .priorityInheritance)
    #expect(
      inside.wait.activity
        == "waiting for PI mutex 0x\(String(address, radix: 16)) held by tid \(CurrentThread.id)")
    var released = ThreadWait(threadID: 1)
    ThreadWaits.readFutex(&released, arguments: [address, 134, 0], live: [CurrentThread.id])
    #expect(released.owner == nil && released.ownerUnknown == "the lock was released")
  }

  @Test func damagedOrForeignBytesNeverGiveAnOwnerForAnyLayout() throws {
    let me = CurrentThread.id
    let page = try #require(
      mmap(nil, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).flatMap {
        $0 == MAP_FAILED ? nil : $0
      })
    let base = UInt64(UInt(bitPattern: page))
    func words(_ values: [UInt32], at offset: Int = 256) {
      for (index, value) in values.enumerated() {
        page.storeBytes(of: value, toByteOffset: offset + index * 4, as: UInt32.self)
      }
    }
    func read(_ offset: Int, op: UInt64, value: UInt64, live: Set<UInt32> = [me]) -> ThreadWait {
      var wait = ThreadWait(threadID: 1)
      ThreadWaits.readFutex(&wait, arguments: [base + UInt64(offset), op, value], live: live)
      return wait
    }
    // A well-formed rwlock image held for writing by us: the reader's wait names us …
    let rwlock: [UInt32] = [11, 0, 3, 1, 0, 0, me, 0, 0, 0, 0, 0, 0, 0]
    words(rwlock)
    #expect(read(264, op: 0x189, value: 3).owner == me)
    // … a damaged pad, an unknown kind, a futex word past its three states: no layout, no owner.
    for (index, value) in [(4, UInt32(7)), (12, 9), (2, 77), (7, 5)] {
      var damaged = rwlock
      damaged[index] = value
      words(damaged)
      let wait = read(264, op: 0x189, value: 3)
      #expect(wait.owner == nil && wait.lockKind == nil, "word \(index) = \(value): \(wait)")
    }
    // A writer waiting for readers: held by readers, no owner.
    words([10, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    let awaiting = read(264, op: 0x189, value: 2)
    #expect(awaiting.lockKind == .rwlock && awaiting.readers == 1 && awaiting.owner == nil)
    #expect(awaiting.activity.hasSuffix("; held by 1 reader; readers have no owner"), "\(awaiting.activity)")
    // A PI word whose tid is no thread of ours; one with only flags.
    words([0x8000_0000 | 4_000_000])
    #expect(read(256, op: 134, value: 0).owner == nil)
    words([0x8000_0000])
    #expect(read(256, op: 134, value: 0).ownerUnknown == "the lock was released")
    // A condition variable's and a semaphore's images: named, no owner.
    words([2, 0, 0, 0, 2, 0, 0, 0, 0, 8, 0, 0])
    let condition = read(256 + 40, op: 0x189, value: 0)
    #expect(
      condition.lockKind == .conditionVariable && condition.lockObject == base + 256 && condition.owner == nil
    )
    #expect(
      condition.activity == "waiting on a condition variable 0x\(String(base + 256, radix: 16)); no owner")
    words(Array(repeating: 0, count: 16))
    words([0, 1, 0], at: 1024)
    let semaphore = read(1024, op: 0x189, value: 0)
    #expect(semaphore.lockKind == .semaphore && semaphore.owner == nil)
    // Random words, none of them a tid of ours, at every offset and shape: never an owner.
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<20 {
      let noise = (0..<1024).map { _ in UInt32.random(in: 0...UInt32.max, using: &generator) | 0x10 }
      words(noise.map { $0 & 0x3fff_ffff == me ? $0 ^ 0x100 : $0 }, at: 4096)
      for offset in stride(from: 4096 + 64, to: 8192 - 64, by: 4) {
        for (op, value) in [(UInt64(0x189), UInt64(2)), (0x189, 3), (0x189, 0), (134, 0), (128, 2)] {
          let wait = read(offset, op: op, value: value, live: [me, 1, 2])
          #expect(wait.owner == nil, "offset \(offset) op \(op) value \(value): \(wait)")
        }
      }
    }
    // Locks whose words run into, or lie in, a page given back: not read, no owner.
    munmap(page + 4096, 4096)
    words(Array(rwlock.prefix(7)), at: 4096 - 28)
    #expect(read(4096 - 20, op: 0x189, value: 3).owner == nil)
    #expect(read(4096 + 8, op: 0x189, value: 3).owner == nil)
    #expect(read(4096 + 8, op: 134, value: 0).ownerUnknown == "the lock could not be read")
    munmap(page, 4096)
    #expect(read(264, op: 0x189, value: 3).owner == nil)
  }

  @Test func theVerdictNamesEachLocksKindAndTheChainsEndFrame() {
    var reader = ThreadWait(threadID: 1)
    reader.lockAddress = 0x108
    reader.lockObject = 0x100
    reader.lockKind = .rwlock
    reader.owner = 2
    var waiter = ThreadWait(threadID: 2)
    waiter.lockAddress = 0x200
    waiter.lockObject = 0x200
    waiter.lockKind = .priorityInheritance
    waiter.owner = 3
    var sleeper = ThreadWait(threadID: 3)
    sleeper.systemCall = 230
    sleeper.systemCallName = "clock_nanosleep"
    var found = ThreadWaits(threads: [reader, waiter, sleeper]).verdict(from: 1)
    #expect(found?.locks == [0x100, 0x200] && found?.lockKinds == [.rwlock, .priorityInheritance])
    found?.endFrame = "Worker.backoff()"
    #expect(
      found.map { ThreadWaits.describe($0, names: [1: "r", 3: "w"]) }
        == "wait chain: r (tid 1) → tid 2 → w (tid 3) (rwlock 0x100, PI mutex 0x200); the last is "
        + "sleeping in clock_nanosleep under Worker.backoff()")
  }
}
