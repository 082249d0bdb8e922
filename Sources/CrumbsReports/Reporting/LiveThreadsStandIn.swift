// LiveThreadsStandIn.swift — TEMPORARY: the snapshot → report threads conversion that branch
// i23-capture builds, declared here only until it is merged (then its own is used).

import CrumbsRecorder

package enum LiveThreads {
  /// The snapshot's threads, named by `symbolicator` (one batch), states as a report says them.
  package static func reportThreads(_ snapshot: ThreadSnapshot, symbolicator: Symbolicator)
    -> [CrashReport.Thread]
  {
    let threads = snapshot.table.threads
    let marks = threads.map { $0.frameMarks.map(FrameMarks.init(rawValue:)) }
    let named = symbolicator.symbolicate(
      backtraces: threads.map(\.frames), exact: marks.map(CrashReportBuilder.asyncIndices))
    return zip(threads, zip(named, marks)).map { thread, frames in
      let state: CrashReport.Thread.State =
        switch thread.state {
        case .captured, .crashing: .captured
        case .noAnswer: .noAnswer
        case .notAsked: .notAsked
        case .alsoCrashed: .alsoCrashed
        case .unknown: .unknown
        }
      return CrashReport.Thread(
        id: Int(thread.id), name: thread.name.isEmpty ? nil : thread.name, state: state, crashed: false,
        frames: CrashReportBuilder.frames(frames.0, marks: frames.1))
    }
  }
}
