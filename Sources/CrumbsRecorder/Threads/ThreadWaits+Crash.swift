// ThreadWaits+Crash.swift — each thread's wait at crash time, read back from the crash record
// (crumbs_crash_wait_table: the syscall line the handler read before asking the thread, and the
// 16 bytes it read at a futex's address) with the live capture's own rules: the line through
// ProcText, the owner through ThreadWaits.readFutex over the recorded bytes instead of memory.
// One rule more, for priority-inheritance futexes (Synchronization.Mutex on Linux locks with
// FUTEX_LOCK_PI): the owner's tid is the lock word's low 30 bits (FUTEX_TID_MASK).
//
// Entry point: ThreadWaits.crashWait (CrashRecord+Waits.swift calls it for each entry). Not
// signal-safe.

import CrumbsPlatform

extension ThreadWaits {
  /// FUTEX_LOCK_PI and FUTEX_LOCK_PI2 (linux/futex.h), the private flag aside.
  static let lockPICommands: Set<UInt64> = [6, 13]
  /// A PI futex word's owner bits (linux/futex.h FUTEX_TID_MASK).
  static let futexTIDMask: UInt32 = 0x3fff_ffff

  /// The wait of thread `tid` as a crash record kept it: `line` its syscall line (nil when none
  /// was read), `lockBytes` what was read at its futex address (`lockAddress`). `live`: the
  /// threads of the record, the only owners believed.
  static func crashWait(
    tid: UInt32, line: ArraySlice<UInt8>?, lockAddress: UInt64?, lockBytes: [UInt8], live: Set<UInt32>
  ) -> ThreadWait {
    var wait = ThreadWait(threadID: tid)
    guard let line, let parsed = ProcText.systemCall(line) else { return wait }
    guard case .inCall(let number, let arguments) = parsed else {
      // "running" on a CPU; blocked outside a call ("-1 …"): no state letter was read.
      if parsed == .running { wait.state = "R" }
      return wait
    }
    wait.systemCall = number
    wait.systemCallName = SystemCallNames.name(number)
    wait.arguments = arguments
    guard number == SystemCallNames.futex else { return wait }
    // Only the bytes the handler read, at the address it read them: anything else "could not
    // be read", as unmapped memory is in a live capture.
    let recorded: (UInt64, UnsafeMutableRawBufferPointer) -> Bool = { address, buffer in
      guard address == lockAddress, buffer.count <= lockBytes.count else { return false }
      lockBytes.withUnsafeBytes {
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(buffer.count)))
      }
      return true
    }
    readFutex(&wait, arguments: arguments, live: live, memory: recorded)
    if wait.owner == nil { readPIOwner(&wait, arguments: arguments, live: live, memory: recorded) }
    return wait
  }

  /// A FUTEX_LOCK_PI wait: the owner is the word's low 30 bits, believed when it is a thread of
  /// `live`.
  static func readPIOwner(
    _ wait: inout ThreadWait, arguments: [UInt64], live: Set<UInt32>,
    memory: (UInt64, UnsafeMutableRawBufferPointer) -> Bool
  ) {
    guard arguments.count >= 2, lockPICommands.contains(arguments[1] & 0x7f) else { return }
    let address = arguments[0]
    var word: UInt32 = 0
    guard address % 4 == 0, withUnsafeMutableBytes(of: &word, { memory(address, $0) }) else {
      wait.ownerUnknown = "the lock could not be read"
      return
    }
    let owner = word & futexTIDMask
    guard owner != 0 else {
      wait.ownerUnknown = "the lock was released"
      return
    }
    guard live.contains(owner) else {
      wait.ownerUnknown = "no thread of this process in the lock word (\(owner))"
      return
    }
    wait.owner = owner
    wait.ownerUnknown = nil
  }
}
