// ReportDraft.swift — a report as `willSend` sees it before it is encoded: the report, and its
// breadcrumb trail as values the app may remove or edit. Returning nil from
// `willSend(_: ReportDraft)` drops the report (ReportUploader: moved to dropped/ with
// `ReportDraft.droppedReason`, never retried).
//
// Entry points, in call order (ReportUploader.deliver, once per report and pass, before the
// first destination is tried):
//   ReportDraft(stored:)          the report and its trail read back (trailBreadcrumbs)
//   delegate.willSend(_:)         the app edits it or drops it
//   outgoing(from:stored:)        what the destinations are given: the report, and — only when
//                                 the trail was changed — the stored report with the edited
//                                 trail in place of its attachment (StoredReport.trailOverride),
//                                 which every destination reads through trailAttachment()
// Nothing is written back to the store: the edit holds for what leaves, the report on disk
// stays as it was made. Not signal-safe.

import CrumbsRecorder
import CrumbsReports

/// A report about to be sent, as `willSend` may change it.
public struct ReportDraft: Sendable {
  /// The report as it will be encoded (attributes, messages, …).
  public var report: CrashReport
  /// Its breadcrumb trail, oldest first: remove or edit entries and the destinations send what
  /// is left (the trail attachment is re-encoded from them). Empty when the report has none, or
  /// when its trail is damaged (then left out and named as before, unless this is changed).
  public var breadcrumbs: [Breadcrumb]

  public init(report: CrashReport, breadcrumbs: [Breadcrumb]) {
    self.report = report
    self.breadcrumbs = breadcrumbs
  }

  /// The reason a report dropped by `willSend` is stored with in dropped/ (and said in its
  /// DeliveryResult): `dropped by the app (willSend)`.
  public static let droppedReason = "dropped by the app (willSend)"

  /// The stored report and its trail as read back.
  init(stored: StoredReport) {
    self.init(report: stored.report, breadcrumbs: (try? stored.trailBreadcrumbs()) ?? [])
  }

  /// What destinations are given for this draft of `stored` (whose trail read back as
  /// `original`): the report, and the stored report carrying the edited trail when it changed.
  func outgoing(from stored: StoredReport, original: [Breadcrumb]) -> (CrashReport, StoredReport) {
    guard breadcrumbs != original else { return (report, stored) }
    var view = stored
    var report = report
    // Encoded by the trail's one writer; an LZ4 failure leaves the trail out rather than
    // sending the unedited one.
    view.trailOverride = breadcrumbs.isEmpty ? [] : (try? TrailAttachment.make(breadcrumbs))?.bytes ?? []
    // The counts and the last message follow the edited trail, unless the app set them itself;
    // a removed breadcrumb's message must not leave as the last one.
    if report.breadcrumbs == stored.report.breadcrumbs {
      report.breadcrumbs.count = breadcrumbs.count
      report.breadcrumbs.valid = breadcrumbs.count
      if let last = report.breadcrumbs.lastMessage, !breadcrumbs.contains(where: { $0.message == last }) {
        report.breadcrumbs.lastMessage = breadcrumbs.last { !$0.fromSignalHandler }?.message
      }
    }
    return (report, view)
  }
}
