// CrashReportBuilder+Hang.swift — what a report says when its session ended during a hang that
// the session's watchdog had recorded in the ring header (RingHeaderInfo.ongoingHang).
//
// Entry points, used by CrashReportBuilder once the report is otherwise made:
//   hangSentence(hang, endSignal:)   "killed during a hang of 31 s of W in F" (no crash record,
//                                    ring left running), or "killed by SIGTERM during …" (a
//                                    terminating signal the app did not outlive: a liveness
//                                    probe's grace period): the abnormal-termination message
//                                    leads with it
//   hangEvidence(header, ended:)     the same, with the times, as evidence; "crashed during …"
//                                    for a crash
//   addHangFacts(header, to:)        `crumbs.hang.*` attributes (HangFacts) for backends, and
//                                    damaged hang fields named in `damage`
// Not signal-safe.

import CrumbsRecorder

extension CrashReportBuilder {
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
    report.attributes[HangFacts.watchKey] = .string(hang.watch)
    report.attributes[HangFacts.durationKey] = .string(HangFacts.milliseconds(hang.durationNanoseconds))
    report.attributes[HangFacts.sinceKey] = .string(ISO8601.string(nanoseconds: hang.sinceWallNanoseconds))
    if !hang.frames.isEmpty { report.attributes[HangFacts.framesKey] = .string(hang.frames) }
  }
}
