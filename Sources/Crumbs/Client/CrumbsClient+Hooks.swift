// CrumbsClient+Hooks.swift — the app's hooks: its delegate (which reports are processed, and
// every uploader hook), and its consent to sending crash reports. The uploader reaches both
// through UploaderBridge, which also tells the client's observers of deliveries
// (CrumbsClient+Observers.swift).
//
// Both may be given in CrumbsConfiguration (`delegate`, `consent`): the client's initializer puts
// them in place before `start` begins any work on the previous sessions (processBacklog on the
// caller's thread, then the background thread), so `shouldProcess` sees the previous session's
// crash and nothing leaves before the handler answered. The setters below change them later.
// A configured or set handler is recorded in the directory (CrumbsDirectory+Consent), for
// `crumbs collect`. Whether anything may leave at all — reports and session summaries alike —
// is the directory's one answer, the collector's too (CrumbsDirectory.delivery).

import CrumbsPlatform
import Synchronization

/// A user's answer to "send these crash reports?".
public enum ConsentAnswer: String, Sendable, Codable {
  /// Send the reports asked about, ask again next time.
  case send
  /// Do not send them (they are moved to `dropped` with the reason), ask again next time.
  case dontSend
  /// Send them and every later report without asking (persisted).
  case always
}

/// Asked before anything leaves the machine, with the reports about to be sent.
public typealias ConsentHandler = @Sendable ([CrashReport]) -> ConsentAnswer

/// The app's hooks. Requirements, as for `ReportUploaderDelegate` (whose hooks it inherits:
/// `willSend`, `willSendRequest`, `serverDidRespond`, `serverDidFail`, `didReachLimit`,
/// `didSucceedSending`, `didFailSending`): called on Crumbs' background thread, one at a time;
/// return quickly; never call `close()` from them.
public protocol CrumbsClientDelegate: ReportUploaderDelegate {
  /// Whether a report of the previous session (or a non-fatal one) is stored at all.
  func shouldProcess(_ report: CrashReport) -> Bool
}

extension CrumbsClientDelegate {
  public func shouldProcess(_ report: CrashReport) -> Bool { true }
}

extension CrumbsClient {
  /// The app's hooks; held weakly (the one in `configuration.delegate` is held by the
  /// configuration, and is in place from `start` on).
  public var delegate: (any CrumbsClientDelegate)? {
    get { state.withLock { $0.delegate } }
    set { state.withLock { $0.delegate = newValue } }
  }

  /// With a handler set, nothing leaves the machine without consent: before sending, the
  /// handler receives the pending reports and answers. `.always` is persisted. To be sure nothing
  /// leaves before the handler exists, configure it (`CrumbsConfiguration.consent`); this
  /// changes it later.
  public func setConsentHandler(_ handler: ConsentHandler?) {
    state.withLock { $0.consentHandler = handler }
    if handler != nil { noteConsentRequired() }
    uploader?.wake()
  }

  /// Records in the directory that consent is required (for `crumbs collect`).
  func noteConsentRequired() {
    do {
      try crumbsDirectory.markConsentRequired()
    } catch {
      state.withLock { $0.problems.append("cannot record that consent is required: \(error)") }
    }
  }

  /// Whether the user answered `.always` (persisted).
  public var hasStandingConsent: Bool { crumbsDirectory.consent == .granted }

  /// Whether `report` may leave: the directory's answer (CrumbsDirectory.delivery: not when
  /// Crumbs is turned off there), and while consent is awaited, the consent handler's answer
  /// about it; called on the uploader's thread.
  func consentToSend(_ report: CrashReport) -> Bool {
    guard isEnabled else { return false }
    let handler = state.withLock { $0.consentHandler }
    switch crumbsDirectory.delivery(consentHandlerSet: handler != nil) {
    case .allowed: return true
    case .turnedOff: return false
    case .awaitingConsent: break
    }
    guard let handler else { return true }
    switch handler([report]) {
    case .send:
      return true
    case .always:
      try? crumbsDirectory.grantConsent()
      return true
    case .dontSend:
      _ = try? store.drop(id: report.id, reason: "the user declined to send it")
      return false
    }
  }
}

/// Forwards the uploader's hooks to the client's delegate, and asks for consent.
final class UploaderBridge: ReportUploaderDelegate, @unchecked Sendable {
  weak var client: CrumbsClient?

  func shouldSend(_ report: CrashReport) -> Bool {
    guard let client else { return false }
    return client.consentToSend(report) && (client.delegate?.shouldSend(report) ?? true)
  }
  func willSend(_ draft: ReportDraft) -> ReportDraft? {
    guard let delegate = client?.delegate else { return draft }
    return delegate.willSend(draft)
  }
  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    client?.delegate?.willSendRequest(request) ?? request
  }
  func serverDidRespond(_ result: DeliveryResult) { client?.delegate?.serverDidRespond(result) }
  func serverDidFail(_ failure: DeliveryFailure) { client?.delegate?.serverDidFail(failure) }
  func didReachLimit(_ result: DeliveryResult) { client?.delegate?.didReachLimit(result) }
  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) {
    client?.tell(.reportDelivered(report.kind))
    client?.delegate?.didSucceedSending(report, results: results)
  }
  func didFailSending(_ report: CrashReport, result: DeliveryResult) {
    if case .dropped = result.outcome { client?.tell(.reportDropped(report.kind)) }
    client?.delegate?.didFailSending(report, result: result)
  }
}

/// The client's outbox: its queued session summaries, and the consent they need.
extension UploaderBridge: DeliveryOutbox {
  func queuedEvents() -> [OutboxEvent] {
    guard let client else { return [] }
    return SessionSummaryOutbox(directory: client.configuration.directory, resource: client.summaryResource)
      .queuedEvents()
  }

  func remove(_ event: OutboxEvent) {
    guard let client else { return }
    SessionSummaryOutbox(directory: client.configuration.directory, resource: [:]).remove(event)
  }

  /// Summaries never go without consent when a consent handler is set: the handler is asked
  /// about crash reports, and its standing answer (`.always`) covers the summaries too
  /// (CrumbsDirectory.delivery: `allowed` only).
  func shouldSend(event: OutboxEvent) -> Bool {
    guard let client, client.isEnabled,
      client.crumbsDirectory.delivery(consentHandlerSet: client.hasConsentHandler) == .allowed
    else { return false }
    return client.delegate?.shouldSend(event: event) ?? true
  }
}
