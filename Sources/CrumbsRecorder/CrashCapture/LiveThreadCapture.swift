// LiveThreadCapture.swift — every thread's stack while the process lives on, for hang reports
// and thread dumps: the crash handler's own thread capture (crumbs_live_capture.h), taken from
// an ordinary thread; each thread is parked only while its stack is walked, then released.
//
// Entry point: LiveThreadCapture.capture()
//   → crumbs_capture_threads_live, under the crash handler's lock (CrashHandler.whileInstalled),
//     into a buffer of our own (never the crash record)
//   → the table read by the crash record's decoder (ThreadTableImage)
//   → the live module list the frames are relative to (CurrentProcessModules)
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

  package init(
    table: CrashRecord.ThreadTable, callerID: UInt32, wallNanoseconds: UInt64,
    longestPauseNanoseconds: UInt64,
    modules: [LoadedModule]
  ) {
    self.table = table
    self.callerID = callerID
    self.wallNanoseconds = wallNanoseconds
    self.longestPauseNanoseconds = longestPauseNanoseconds
    self.modules = modules
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
  /// Every thread's stack now. Each thread stays parked only while its own stack is walked (a
  /// few threads are asked at a time); none is ended. Captures are serialized with each other
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
    return ThreadSnapshot(
      table: threads, callerID: threads.threads.first?.id ?? CurrentThread.id,
      wallNanoseconds: stats.started_wall_ns, longestPauseNanoseconds: stats.longest_pause_ns,
      modules: CurrentProcessModules.list())
  }
}
