// CrumbsClient+Hooks.swift — the app's hooks: its delegate (which reports are processed, and
// every uploader hook), and its consent to sending crash reports. The uploader reaches both
// through UploaderBridge.
//
// Both may be given in CrumbsConfiguration (`delegate`, `consent`): the client's initializer puts
// them in place before `start` begins any work on the previous sessions (processBacklog on the
// caller's thread, then the background thread), so `shouldProcess` sees the previous session's
// crash and nothing leaves before the handler answered. The setters below change them later.
// A configured or set handler is recorded in the directory (ConsentFile), for `crumbs collect`.

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
      try ConsentFile.markRequired(configuration.directory)
    } catch {
      state.withLock { $0.problems.append("cannot record that consent is required: \(error)") }
    }
  }

  /// Whether the user answered `.always` (persisted).
  public var hasStandingConsent: Bool { ConsentFile.state(configuration.directory) == .granted }

  /// Asks the consent handler (if any) about `report`; called on the uploader's thread.
  func consentToSend(_ report: CrashReport) -> Bool {
    guard let handler = state.withLock({ $0.consentHandler }) else { return true }
    if hasStandingConsent { return true }
    switch handler([report]) {
    case .send:
      return true
    case .always:
      try? ConsentFile.grant(configuration.directory)
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
    client?.delegate?.didSucceedSending(report, results: results)
  }
  func didFailSending(_ report: CrashReport, result: DeliveryResult) {
    client?.delegate?.didFailSending(report, result: result)
  }
}
