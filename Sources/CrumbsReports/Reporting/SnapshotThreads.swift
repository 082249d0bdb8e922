// SnapshotThreads.swift — a live thread capture (ThreadSnapshot: a hang, a thread dump) as a
// report's threads: named against the modules the capture listed, each thread converted exactly
// as a crash report's other threads are (CrashReportBuilder.thread), so frame marks and async
// callers read the same. Not signal-safe.

import CrumbsRecorder

extension CrashReportBuilder {
  /// The snapshot's threads, in its order (the thread that took it first, `.requesting`), every
  /// backtrace named in one batch: a captured thread's first frame is the exact PC where it
  /// was stopped, the requesting thread's a return address like the rest; async resume points
  /// are looked up at their own address.
  package static func threads(of snapshot: ThreadSnapshot, symbolicator: Symbolicator) -> [CrashReport.Thread]
  {
    let threads = snapshot.table.threads
    let named = symbolicator.symbolicate(
      backtraces: threads.map(\.frames),
      exact: threads.map { asyncIndices($0.frameMarks.map(FrameMarks.init(rawValue:))) },
      firstIsExactPC: threads.map { $0.state != .requesting })
    return zip(threads, named).map { thread($0, frames: $1) }
  }

  /// The same, named by the live process's symbolicator (the snapshot is this process's).
  package static func threads(of snapshot: ThreadSnapshot, symbolicator: LiveSymbolicator) -> [CrashReport
    .Thread]
  {
    symbolicator.with(modules: snapshot.modules) { threads(of: snapshot, symbolicator: $0) }
  }
}
