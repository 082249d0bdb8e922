// ThreadWaits+Crash.swift — each thread's wait at crash time, read back from the crash record
// (crumbs_crash_wait_table: the syscall line the handler read before asking the thread, and the
// 16 bytes it read at a futex's address) with the live capture's own rules: the line through
// ProcText, the owner through ThreadWaits.readFutex over the recorded bytes instead of memory
// (16 bytes at the futex address: a PI lock's word, as Synchronization.Mutex's, and glibc's
// mutex fit; a layout read elsewhere, as an rwlock's, is "could not be read": owner unknown).
//
// Entry point: ThreadWaits.crashWait (CrashRecord+Waits.swift calls it for each entry). Not
// signal-safe.

import CrumbsPlatform

extension ThreadWaits {
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
    return wait
  }
}
