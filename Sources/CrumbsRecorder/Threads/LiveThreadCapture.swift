// LiveThreadCapture.swift — every thread's stack while the process lives on, for hang reports
// and thread dumps: the crash handler's own thread capture (crumbs_live_capture.h), taken from
// an ordinary thread. A thread blocked in a system call is walked where it blocks and never
// signalled; a thread under a seccomp filter is never signalled; every other thread is parked
// only while its stack is walked, then released.
//
// Entry point: LiveThreadCapture.capture()
//   → crumbs_capture_threads_live, under the crash handler's lock (CrashHandler.whileInstalled),
//     into a buffer of our own (never the crash record)
//   → the table read by the crash record's decoder (ThreadTableImage)
//   → the live module list the frames are relative to (CurrentProcessModules)
//   → what each thread waits on, and who holds the mutex it waits for (ThreadWaits)
// Not signal-safe (allocates, lists modules with dl_iterate_phdr); never call it from a signal
// handler. Nothing allocates while a thread is parked: that is all inside the C call.

import CrumbsPlatform
import CrumbsSignalPath

/// Every thread of the running process at one moment, as a live capture took it.
package struct ThreadSnapshot: Sendable, Equatable, Codable {
  /// The calling thread first (`.requesting`: its own frames, every one a return address), then
  /// every other thread as the crash handler lists them: `.captured` with registers and frames
  /// (frames[0] the exact PC where it was stopped, then return addresses and async resume
  /// points, marked), `.noAnswer` or `.notAsked` without, `.alsoCrashed` for a thread found in
  /// the crash handler. Each captured thread's `pausedNanoseconds` is how long it was parked.
  package var table: CrashRecord.ThreadTable
  /// The calling thread's kernel id.
  package var callerID: UInt32
  /// When it was taken (CLOCK_REALTIME nanoseconds since the Unix epoch).
  package var wallNanoseconds: UInt64
  /// The longest any thread stayed parked (from entering the capture handler to its release).
  package var longestPauseNanoseconds: UInt64
  /// The live process's modules at capture time: what the frames' addresses are relative to,
  /// so another process can symbolicate them.
  package var modules: [LoadedModule]
  /// Signals the capture sent (one per thread that was running, or left its blocking call
  /// while being read); nil in a snapshot written before it was counted.
  package var signalsSent: UInt32? = nil
  /// Threads walked where they block in a system call, never signalled.
  package var readWithoutSignal: UInt32? = nil
  /// What each thread waited on just after the capture (its system call, a mutex's owner) and
  /// the wait-for graph's verdict; nil in a snapshot written before it was read.
  package var waits: ThreadWaits? = nil

  package init(
    table: CrashRecord.ThreadTable, callerID: UInt32, wallNanoseconds: UInt64,
    longestPauseNanoseconds: UInt64,
    modules: [LoadedModule], signalsSent: UInt32? = nil, readWithoutSignal: UInt32? = nil,
    waits: ThreadWaits? = nil
  ) {
    self.table = table
    self.callerID = callerID
    self.wallNanoseconds = wallNanoseconds
    self.longestPauseNanoseconds = longestPauseNanoseconds
    self.modules = modules
    self.signalsSent = signalsSent
    self.readWithoutSignal = readWithoutSignal
    self.waits = waits
  }
}

/// Why a live capture could not be taken.
package enum LiveThreadCaptureError: Error, Equatable, CustomStringConvertible {
  /// The crash handler is not installed: the capture uses its signal and its module table.
  case notInstalled
  /// A crash is being recorded: its capture holds the threads.
  case busy
  /// /proc/self/task could not be read, so the threads could not be listed.
  case listingFailed
  /// The capture answered what this reader does not know (a C status, or a table it left
  /// inconsistent).
  case unexpected(String)

  package var description: String {
    switch self {
    case .notInstalled: "cannot capture threads: the crash handler is not installed"
    case .busy: "cannot capture threads: a crash is being recorded"
    case .listingFailed: "cannot capture threads: /proc/self/task could not be read"
    case .unexpected(let reason): "cannot capture threads: \(reason)"
    }
  }
}

/// Captures every thread of this process while it runs on.
package enum LiveThreadCapture {
  /// Every thread's stack now. A thread blocked in a system call (sleep, read, poll, a lock
  /// wait) is walked from where it blocks, without a signal: its call returns what it would
  /// have without the capture. A thread under a seccomp filter is never signalled (listed
  /// `.notAsked` with `.seccomp`, or walked where it blocks). Every other thread is asked with a
  /// signal and stays parked only while its own stack is walked (a few threads are asked at a
  /// time): a blocking call it enters just as the signal arrives can fail with EINTR. None is
  /// ended. Captures are serialized with each other
  /// and with the crash handler's install, refresh and uninstall: a second caller waits for the
  /// first.
  package static func capture() throws(LiveThreadCaptureError) -> ThreadSnapshot {
    let table = UnsafeMutablePointer<crumbs_crash_thread_table>.allocate(capacity: 1)
    defer { table.deallocate() }
    let result: (status: Int32, stats: crumbs_live_capture_stats)? = CrashHandler.whileInstalled {
      var stats = crumbs_live_capture_stats()
      let status = crumbs_capture_threads_live(table, nil, &stats)
      return (status, stats)
    }
    guard let (status, stats) = result else { throw .notInstalled }
    switch Int(status) {
    case Int(CRUMBS_LIVE_CAPTURE_OK): break
    case Int(CRUMBS_LIVE_CAPTURE_NOT_INSTALLED): throw .notInstalled
    case Int(CRUMBS_LIVE_CAPTURE_BUSY): throw .busy
    case Int(CRUMBS_LIVE_CAPTURE_LISTING_FAILED): throw .listingFailed
    default: throw .unexpected("status \(status)")
    }
    let image = ThreadTableImage(
      image: UnsafeRawBufferPointer(start: table, count: MemoryLayout<crumbs_crash_thread_table>.size),
      base: 0)
    if let problem = image.problem() { throw .unexpected(problem) }
    let names = CrashRecord.architecture(CrashRecord.runningArchitecture).registerNames
    guard let threads = image.decode(crashing: nil, registerNames: names) else {
      throw .unexpected("no thread listed")
    }
    let callerID = threads.threads.first?.id ?? CurrentThread.id
    // Read after every thread was released: a thread still blocked now blocked during the
    // capture too, and a wait that ended meanwhile is simply not seen.
    let waits = ThreadWaits.read(threads: threads.threads.map(\.id), skipping: callerID)
    return ThreadSnapshot(
      table: threads, callerID: callerID,
      wallNanoseconds: stats.started_wall_ns, longestPauseNanoseconds: stats.longest_pause_ns,
      modules: CurrentProcessModules.list(), signalsSent: stats.signalled,
      readWithoutSignal: stats.read_blocked, waits: waits)
  }
}
