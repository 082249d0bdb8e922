// ReportUploaderDelegate.swift — the hooks into delivery, in the order a report meets them:
// shouldSend → willSend (a ReportDraft: edit the trail, or drop) → willSendRequest → serverDidRespond | serverDidFail → didSucceedSending
// | didFailSending (didReachLimit when the rate limit stops a pass). Queued events (session
// summaries, the session counts, closing spans: DeliveryOutbox) meet shouldSend(event:) →
// willSendRequest → serverDid… too.
// Not signal-safe.

import CrumbsReports

/// Hooks into delivery, for the client object (and for tests).
///
/// Requirements:
/// - Every method is called on the uploader's thread (the background thread, or the caller of
///   `deliverPendingNow()`), one at a time, never concurrently with another of them.
/// - They must return quickly and must not call back into the uploader's `deliverPendingNow()`
///   or `stop()` (that would deadlock); `wake()` is fine.
/// - Values handed to them are already redacted where they are text (errors, reasons, URLs in
///   failures); `willSendRequest` sees the real request (it may need the credentials, e.g. to
///   sign it) and must not log it.
/// - All have default implementations that do nothing (and return their input / `true`).
public protocol ReportUploaderDelegate: AnyObject, Sendable {
  /// Whether `report` may be sent now. `false` leaves it pending, untouched (consent).
  func shouldSend(_ report: CrashReport) -> Bool
  /// Whether an outbox event (a session summary, the session counts, or the spans a death left
  /// open: `event.traces`) may be sent now. `false` leaves it queued
  /// (consent: it leaves the machine too).
  func shouldSend(event: OutboxEvent) -> Bool
  /// The report as it will be encoded (e.g. with attributes added). Not written back to the store.
  /// Called by the default `willSend(_: ReportDraft)`; implement that one to edit the trail or
  /// drop the report.
  func willSend(_ report: CrashReport) -> CrashReport
  /// The report and its breadcrumb trail as they will be encoded: remove or edit breadcrumbs
  /// (`draft.breadcrumbs`) or the report; return nil to drop the report (moved to dropped/ with
  /// `ReportDraft.droppedReason`, never retried; its DeliveryResults say `.dropped` with that
  /// reason). Not written back to the store. Default: `willSend(draft.report)`, the trail as it is.
  func willSend(_ draft: ReportDraft) -> ReportDraft?
  /// The request as it will go out (e.g. with a signature header).
  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest
  /// A server answered (any status).
  func serverDidRespond(_ result: DeliveryResult)
  /// A request got no answer (timeout, refused, connection lost).
  func serverDidFail(_ failure: DeliveryFailure)
  /// `reportsPerMinute` was reached; the pass stopped and will resume when the window allows.
  func didReachLimit(_ result: DeliveryResult)
  /// The report was delivered and moved to sent/.
  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult])
  /// An attempt failed (`result.outcome` says whether it will be retried or was dropped).
  func didFailSending(_ report: CrashReport, result: DeliveryResult)
}

extension ReportUploaderDelegate {
  public func shouldSend(_ report: CrashReport) -> Bool { true }
  public func shouldSend(event: OutboxEvent) -> Bool { true }
  public func willSend(_ report: CrashReport) -> CrashReport { report }
  public func willSend(_ draft: ReportDraft) -> ReportDraft? {
    var draft = draft
    draft.report = willSend(draft.report)
    return draft
  }
  public func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest { request }
  public func serverDidRespond(_ result: DeliveryResult) {}
  public func serverDidFail(_ failure: DeliveryFailure) {}
  public func didReachLimit(_ result: DeliveryResult) {}
  public func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) {}
  public func didFailSending(_ report: CrashReport, result: DeliveryResult) {}
}
