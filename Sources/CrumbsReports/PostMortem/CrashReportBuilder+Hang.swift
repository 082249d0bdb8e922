// CrashReportBuilder+Hang.swift — what a report says when its session ended during a hang that
// the session's watchdog had recorded in the ring header (RingHeaderInfo.ongoingHang, issue 23).
//
// Entry points, used by CrashReportBuilder once the report is otherwise made:
//   hangSentence(hang, endSignal:)   "killed during a hang of 31 s of W in F" (no crash record,
//                                    ring left running), or "killed by SIGTERM during …" (a
//                                    terminating signal the app did not outlive: a liveness
//                                    probe's grace period): the abnormal-termination message
//                                    leads with it
//   hangEvidence(header, ended:)     the same, with the times, as evidence; "crashed during …"
//                                    for a crash
//   addHangFacts(header, to:)        `crumbs.hang.*` attributes for backends to filter on, and
//                                    damaged hang fields named in `damage`
// Not signal-safe.

import CrumbsRecorder

extension CrashReportBuilder {
  /// Report attributes of a session that ended during a hang: the watch's name, how long the
  /// hang had lasted at least (integer milliseconds, as `crumbs.process.uptime_ms`), when the
  /// watch last showed life (ISO 8601) and the stalled thread's top frames (when known).
  package static let hangWatchKey = "crumbs.hang.watch"
  package static let hangDurationKey = "crumbs.hang.duration_ms"
  package static let hangSinceKey = "crumbs.hang.since"
  package static let hangFramesKey = "crumbs.hang.frames"

  /// "killed during a hang of 31 s of W in F", or with the signal that ended the session
  /// ("killed by SIGTERM during …") when it was stopped by one.
  package static func hangSentence(_ hang: OngoingHang, endSignal: Int32?) -> String {
    "killed" + (endSignal.map { " by \(SignalNames.name($0))" } ?? "") + " during " + hang.summary
  }

  /// "<ended> during a hang of 31 s of W in F (silent since …, still stalled at …, the
  /// watchdog's last look)"; nil when the header recorded no hang going on.
  package static func hangEvidence(_ header: RingHeaderInfo, ended: String) -> String? {
    guard let hang = header.ongoingHang else { return nil }
    return "\(ended) during \(hang.summary) (silent since "
      + ISO8601.string(nanoseconds: hang.sinceWallNanoseconds) + ", still stalled at "
      + ISO8601.string(nanoseconds: hang.seenWallNanoseconds) + ", the watchdog's last look)"
  }

  /// The hang's attributes on `report`, and the hang fields' damage in its `damage`.
  package static func addHangFacts(_ header: RingHeaderInfo, to report: inout CrashReport) {
    if let damage = header.hangDamage {
      report.damage.append("the ring's record of a hang going on is damaged and was left out: " + damage)
    }
    guard let hang = header.ongoingHang else { return }
    report.attributes[hangWatchKey] = hang.watch
    report.attributes[hangDurationKey] = String(hang.durationNanoseconds / 1_000_000)
    report.attributes[hangSinceKey] = ISO8601.string(nanoseconds: hang.sinceWallNanoseconds)
    if !hang.frames.isEmpty { report.attributes[hangFramesKey] = hang.frames }
  }
}
