// PostMortemProcessor+HeldHangs.swift — the `hang` reports a session stored while it lived, still
// held from delivery for their hangs to end, when the session ended during them (a liveness
// probe's SIGKILL, a supervisor's SIGABRT, the OOM killer, a crash): none will end now.
//
// Entry point: finishHeldHangs(of:header:), from `process` once the ring's header is read and
// says a hang was going on. Each pending `hang` report of that session still marked
// `crumbs.hang.ongoing` "true" is updated as the watchdog updates one whose hang ended — its
// duration to the watchdog's last look (the header's `seen`), ongoing "false", its message
// saying the process ended during it — and released to delivery at once, instead of going out
// when its hold runs out with the duration it had when it began. Idempotent: an updated report
// is no longer "ongoing", so a second run (the collector racing the next launch) changes
// nothing. Not signal-safe.

import CrumbsRecorder

extension PostMortemProcessor {
  /// Finishes the held `hang` reports of session `sessionID`, whose ring `header` says a hang
  /// was going on when it ended; returns how many were updated.
  @discardableResult
  func finishHeldHangs(of sessionID: SessionID, header: RingHeaderInfo) -> Int {
    guard let hang = header.ongoingHang else { return 0 }
    var finished = 0
    for stored in store.list(.pending).reports
    where stored.report.kind == .hang && stored.report.sessionID == sessionID.description
      && stored.report.attributes[HangFacts.ongoingKey]?.text == "true"
    {
      var report = stored.report
      let since = report.attributes[HangFacts.sinceKey].flatMap { ISO8601.nanoseconds($0.text) }
      let lasted = since.map { hang.seenWallNanoseconds > $0 ? hang.seenWallNanoseconds - $0 : 0 }
      if let lasted { report.attributes[HangFacts.durationKey] = .string(HangFacts.milliseconds(lasted)) }
      report.attributes[HangFacts.ongoingKey] = "false"
      report.exceptionMessage +=
        "; the process ended during it"
        + (lasted.map { ", still hung after \(HangFacts.text($0)) at the watchdog's last look" } ?? "")
      do {
        try stored.replaceReport(report)
        finished += 1
      } catch {
        // Delivery took it meanwhile: it went out as it was.
      }
    }
    return finished
  }
}
