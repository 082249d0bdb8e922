// ThreadWaits+LockOwners.swift — which lock a futex wait is on, and who holds it: the futex
// call's shape (command, expected value) says which layouts may fit, and the words around the
// address, read only through process_vm_readv (Syscall.readOwnMemory), must agree with that
// layout before anything is named (docs/platform-facts.md has each layout and its test):
//
//   FUTEX_LOCK_PI(2)         a priority-inheritance lock (Swift's Synchronization.Mutex, a
//                            PTHREAD_PRIO_INHERIT mutex): the word is the owner's tid | flags
//   WAIT for 2               glibc pthread_mutex_t (owner at byte 8), or a writer of a
//                            pthread_rwlock_t waiting for its readers (no owner: readers)
//   WAIT for 3               a pthread_rwlock_t's reader (on __wrphase_futex) or queued writer
//                            (on __writers_futex): the writer holding it is __cur_writer
//   WAIT_BITSET for 0        a condition variable's __g_signals, or a semaphore: no owner
//
// An owner is named only when the tid read is a thread of this process; every other case says
// why none is ("owner unknown"). Not signal-safe (allocates strings).

import CrumbsPlatform

extension ThreadWaits {
  /// A futex wait: its address, the lock it belongs to and its owner, where a layout fits.
  /// `memory` copies bytes at an address (this process's memory now; a crash record's copy of
  /// the bytes at the futex address, ThreadWaits+Crash.swift).
  static func readFutex(
    _ wait: inout ThreadWait, arguments: [UInt64], live: Set<UInt32>,
    memory: @escaping (UInt64, UnsafeMutableRawBufferPointer) -> Bool = {
      (try? Syscall.readOwnMemory(at: $0, into: $1)) != nil
    }
  ) {
    guard arguments.count >= 3 else { return }
    let address = arguments[0]
    wait.lockAddress = address
    // FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256) aside.
    let command = arguments[1] & 0x7f
    let call = FutexCall(address: address, isPrivate: arguments[1] & 128 != 0, live: live, memory: memory)
    guard address % 4 == 0, address <= UInt64.max - 64 else {
      wait.ownerUnknown = "misaligned address"
      return
    }
    let isWait = command == 0 || command == 9
    switch (command, arguments[2]) {
    case (6, _), (13, _):
      call.priorityInheritance(&wait)
    case (_, 2) where isWait:
      // A writer waiting for readers has 2 at its __wrphase_futex; a mutex's pads rule that
      // layout out (its owner sits where the rwlock keeps a zero), and the other way round.
      if !call.rwlock(&wait, base: address &- 8, role: .writerAwaitingReaders) { call.mutex(&wait) }
    case (_, 3) where isWait:
      var reader = wait
      var writer = wait
      let asReader = call.rwlock(&reader, base: address &- 8, role: .reader)
      let asWriter = address >= 12 && call.rwlock(&writer, base: address &- 12, role: .queuedWriter)
      if asReader != asWriter {
        wait = asReader ? reader : writer
      } else {
        wait.ownerUnknown =
          asReader ? "two rwlock layouts fit: none believed" : "no lock layout known for futex value 3"
      }
    case (9, 0):
      if !call.ownerless(&wait) {
        wait.ownerUnknown =
          "not a mutex lock wait (futex op \(arguments[1]), value 0); no condition variable or semaphore fits"
      }
    default:
      wait.ownerUnknown = "not a mutex lock wait (futex op \(arguments[1]), value \(arguments[2]))"
    }
  }
}

/// One futex wait's address and how it was called, and the layouts it is checked against.
struct FutexCall {
  var address: UInt64
  /// FUTEX_PRIVATE_FLAG was set: a process-private lock (glibc's `__shared` 0).
  var isPrivate: Bool
  /// The threads of this process: an owner is only ever one of them.
  var live: Set<UInt32>
  /// Copies bytes at an address: process_vm_readv on this process, or a crash record's copy.
  var memory: (UInt64, UnsafeMutableRawBufferPointer) -> Bool

  /// `count` 32-bit words at `at`, through `memory`; nil when any byte is unreadable.
  func words(at: UInt64, count: Int) -> [UInt32]? {
    guard at >= 4096, at <= UInt64.max - UInt64(count * 4) else { return nil }
    var words = [UInt32](repeating: 0, count: count)
    let read = words.withUnsafeMutableBytes { bytes in memory(at, bytes) }
    return read ? words : nil
  }

  /// glibc's pthread_mutex_t (64-bit Linux): `__lock` at 0 (the futex), `__count` at 4,
  /// `__owner` at 8.
  func mutex(_ wait: inout ThreadWait) {
    wait.lockKind = .mutex
    wait.lockObject = address
    guard let words = words(at: address, count: 3) else {
      wait.ownerUnknown = "the lock could not be read"
      return
    }
    guard words[0] != 0 else {
      wait.ownerUnknown = "the lock was released"
      return
    }
    guard words[2] != 0, live.contains(words[2]) else {
      wait.ownerUnknown = "no thread of this process in the owner field (\(words[2]))"
      return
    }
    wait.owner = words[2]
  }

  /// A priority-inheritance futex (FUTEX_LOCK_PI): the kernel's own format, the owner's tid in
  /// the low 30 bits (FUTEX_TID_MASK), FUTEX_WAITERS and FUTEX_OWNER_DIED above. Swift's
  /// `Synchronization.Mutex` on Linux is such a word at the Mutex's start.
  func priorityInheritance(_ wait: inout ThreadWait) {
    wait.lockKind = .priorityInheritance
    wait.lockObject = address
    guard let words = words(at: address, count: 1) else {
      wait.ownerUnknown = "the lock could not be read"
      return
    }
    let owner = words[0] & 0x3fff_ffff
    guard owner != 0 else {
      wait.ownerUnknown = "the lock was released"
      return
    }
    guard live.contains(owner) else {
      wait.ownerUnknown = "no thread of this process in the lock word (\(owner))"
      return
    }
    wait.owner = owner
  }

  enum RwlockRole {
    /// rdlock in a write phase: on `__wrphase_futex` for 3.
    case reader
    /// wrlock behind the primary writer: on `__writers_futex` for 3.
    case queuedWriter
    /// The primary writer in a read phase, until the readers leave: on `__wrphase_futex` for 2.
    case writerAwaitingReaders
  }

  /// glibc's pthread_rwlock_t at `base` (56 bytes; offsets in `RwlockLayout`), when its words
  /// agree with `role` and with the call: true when it did (then `wait` says what was found,
  /// owner or not), false when the layout does not fit (then `wait` is untouched).
  func rwlock(_ wait: inout ThreadWait, base: UInt64, role: RwlockRole) -> Bool {
    let layout = RwlockLayout.current
    guard layout.known, base <= address, let words = words(at: base, count: 14) else { return false }
    let readers = words[0]
    let shared = layout.shared(words)
    // The pads are zero, the flags a known kind, the futex words three-state, the
    // process-shared flag what the call said.
    guard words[4] == 0, words[5] == 0, layout.flags(words) <= 2, words[2] <= 3, words[3] <= 3,
      shared <= 1, (shared == 0) == isPrivate
    else { return false }
    let writePhase = readers & 1 != 0
    let primaryWriter = readers & 2 != 0
    let readerCount = readers >> 3
    let writer = words[layout.currentWriterWord]
    switch role {
    case .reader:
      guard writePhase else { return false }
      wait.wantsToWrite = false
    case .queuedWriter:
      guard primaryWriter, words[3] & 1 == 1 else { return false }
      wait.wantsToWrite = true
    case .writerAwaitingReaders:
      guard primaryWriter, !writePhase, readerCount > 0 else { return false }
      wait.wantsToWrite = true
    }
    wait.lockKind = .rwlock
    wait.lockObject = base
    if writePhase, primaryWriter, writer != 0, live.contains(writer) {
      wait.owner = writer
    } else if !writePhase, readerCount > 0 {
      wait.readers = readerCount
      wait.ownerUnknown = "held by \(readerCount) reader\(readerCount == 1 ? "" : "s"); readers have no owner"
    } else {
      wait.ownerUnknown = "no thread of this process recorded as its writer (\(writer))"
    }
    return true
  }

  /// A FUTEX_WAIT_BITSET for 0: a condition variable's `__g_signals[g]` or a semaphore's
  /// value, neither with an owner. Told apart by the words around it; when both or neither
  /// fit, none is named (false: `wait` untouched).
  func ownerless(_ wait: inout ThreadWait) -> Bool {
    let condition = [UInt64(40), 44].compactMap { offset -> UInt64? in
      address >= offset && conditionVariable(at: address &- offset, group: offset == 40 ? 0 : 1)
        ? address &- offset : nil
    }
    let semaphore = self.semaphore()
    switch (condition.count, semaphore) {
    case (1, false):
      wait.lockKind = .conditionVariable
      wait.lockObject = condition[0]
    case (2, false):
      wait.lockKind = .conditionVariable
    case (0, true):
      wait.lockKind = .semaphore
      wait.lockObject = address
    default:
      return false
    }
    wait.ownerUnknown = "no owner"
    return true
  }

  /// glibc's pthread_cond_t (48 bytes): `__wseq` (u64) at 0, `__g1_start` (u64) at 8,
  /// `__g_refs[2]` at 16, `__g_size[2]` at 24, `__g1_orig_size` at 32, `__wrefs` at 36 (waiters
  /// × 8 | flags, bit 0 process-shared), `__g_signals[2]` at 40 (the futex). A waiter of group
  /// `g` holds a reference in `__g_refs[g]` (2 each) while it sleeps.
  func conditionVariable(at base: UInt64, group: Int) -> Bool {
    guard let words = words(at: base, count: 12) else { return false }
    let sequence = UInt64(words[0]) | UInt64(words[1]) << 32
    let firstStart = UInt64(words[2]) | UInt64(words[3]) << 32
    let references = words[4 + group]
    let waiters = words[9] >> 3
    return waiters >= 1 && waiters <= 1 << 22 && references >= 2 && references >> 1 <= waiters
      && sequence >> 1 >= UInt64(waiters) && firstStart >> 1 <= sequence >> 1
      && (words[9] & 1 == 0) == isPrivate
  }

  /// glibc's sem_t (64-bit): the value (the futex) at 0, the number of waiters at 4, `private`
  /// at 8 (0 for a process-private semaphore: glibc's FUTEX_PRIVATE, 128 when shared).
  func semaphore() -> Bool {
    guard let words = words(at: address, count: 3) else { return false }
    return words[1] >= 1 && words[1] <= 1 << 22 && (words[2] == 0 || words[2] == 128)
      && (words[2] == 0) == isPrivate
  }
}

/// Where glibc keeps a pthread_rwlock_t's fields past the four words every architecture shares
/// (`__readers`, `__writers`, `__wrphase_futex`, `__writers_futex`, then two pads).
struct RwlockLayout {
  var known: Bool
  var currentWriterWord: Int
  var sharedWord: Int
  var sharedShift: UInt32
  var flagsWord: Int
  var flagsShift: UInt32

  #if arch(x86_64)
    /// `__cur_writer` at 24, `__shared` at 28, `__flags` at 48 (bits/struct_rwlock.h).
    static let current = RwlockLayout(
      known: true, currentWriterWord: 6, sharedWord: 7, sharedShift: 0, flagsWord: 12, flagsShift: 0)
  #elseif arch(arm64)
    /// The generic layout: `__flags` (byte) at 24, `__shared` (byte) at 25, `__cur_writer` at
    /// 28. Not checked on a machine (docs/platform-facts.md).
    static let current = RwlockLayout(
      known: true, currentWriterWord: 7, sharedWord: 6, sharedShift: 8, flagsWord: 6, flagsShift: 0)
  #else
    static let current = RwlockLayout(
      known: false, currentWriterWord: 0, sharedWord: 0, sharedShift: 0, flagsWord: 0, flagsShift: 0)
  #endif

  func shared(_ words: [UInt32]) -> UInt32 {
    flagsWord == sharedWord ? (words[sharedWord] >> sharedShift) & 0xff : words[sharedWord]
  }
  func flags(_ words: [UInt32]) -> UInt32 {
    flagsWord == sharedWord ? (words[flagsWord] >> flagsShift) & 0xff : words[flagsWord]
  }
}
