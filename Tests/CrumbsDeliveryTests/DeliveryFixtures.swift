// DeliveryFixtures.swift — what the delivery tests share: a store with real reports
// (ReportFixture), a clock moved by hand, a delegate that records every hook call, and readers
// for what was sent (the report id in an OTLP body, the parts of a multipart body).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

/// Wall time the test moves by hand.
final class ManualClock: Sendable {
  private let nanoseconds = Mutex<UInt64>(1_900_000_000_000_000_000)
  func now() -> UInt64 { nanoseconds.withLock { $0 } }
  func advance(seconds: Double) { nanoseconds.withLock { $0 += UInt64(seconds * 1e9) } }
  /// Sets the clock, backwards too (a clock corrected after running ahead).
  func set(_ value: UInt64) { nanoseconds.withLock { $0 = value } }
}

/// Records every hook call.
final class RecordingDelegate: ReportUploaderDelegate {
  let responses = Mutex<[DeliveryResult]>([])
  let failures = Mutex<[DeliveryFailure]>([])
  let limits = Mutex<[DeliveryResult]>([])
  let succeeded = Mutex<[String]>([])
  let failed = Mutex<[DeliveryResult]>([])
  let requests = Mutex<[String]>([])
  let addAttribute: Bool
  init(addAttribute: Bool = false) { self.addAttribute = addAttribute }

  func willSend(_ report: CrashReport) -> CrashReport {
    guard addAttribute else { return report }
    var report = report
    report.attributes["added.by.delegate"] = "yes"
    return report
  }
  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    requests.withLock { $0.append(request.reportID) }
    var request = request
    request.headers.append(HTTPHeader("X-Signed", "by-delegate"))
    return request
  }
  func serverDidRespond(_ result: DeliveryResult) { responses.withLock { $0.append(result) } }
  func serverDidFail(_ failure: DeliveryFailure) { failures.withLock { $0.append(failure) } }
  func didReachLimit(_ result: DeliveryResult) { limits.withLock { $0.append(result) } }
  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) {
    succeeded.withLock { $0.append(report.id) }
  }
  func didFailSending(_ report: CrashReport, result: DeliveryResult) { failed.withLock { $0.append(result) } }
}

/// A store with real reports: one made by the post-mortem processor from a ring left by a
/// "dead" session, and clones of it with new ids (each a little newer than the last).
struct ReportFixture {
  let directory = TestDirectory()
  let store: ReportStore
  let reports: [StoredReport]

  init(count: Int = 1, extraAttachmentBytes: Int = 0, messages: Int = 40) throws {
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    for index in 0..<messages {
      ring.append(
        "step \(index)", level: index % 10 == 9 ? .warning : .info, type: .manual,
        attributes: ["n": String(index)])
    }
    ring.close(clean: false)
    store = try ReportStore(directory: directory.path)
    let outcome = PostMortemProcessor(directory: rings, store: store).run()
    let original = try #require(outcome.reports.first)
    var reports = [original]
    let trail = try Syscall.readFile(original.attachmentPath(TrailAttachment.name))
    for index in 1..<max(count, 1) {
      var clone = original.report
      clone.id = SessionID().description
      clone.sessionID = clone.id
      clone.observedTimeUnixNano += UInt64(index) * 1_000_000
      var attachments: [(name: String, bytes: [UInt8])] = [(TrailAttachment.name, trail)]
      if extraAttachmentBytes > 0 {
        // Random (so nothing on the way can compress it), eight bytes per draw.
        var generator = SystemRandomNumberGenerator()
        var blob: [UInt8] = []
        blob.reserveCapacity(extraAttachmentBytes + 8)
        while blob.count < extraAttachmentBytes {
          withUnsafeBytes(of: generator.next() as UInt64) { blob.append(contentsOf: $0) }
        }
        attachments.append(("blob.bin", Array(blob.prefix(extraAttachmentBytes))))
        clone.attachments.append(
          CrashReport.Attachment(
            name: "blob.bin", contentType: "application/octet-stream", size: extraAttachmentBytes))
      }
      reports.append(try store.store(clone, attachments: attachments))
    }
    self.reports = reports
  }

  var ids: [String] { reports.map(\.report.id) }

  /// Every byte stored under the directory, as text (to look for secrets).
  func everythingStored() -> String {
    var text = ""
    let enumerator = FileManager.default.enumerator(atPath: directory.path)
    while let name = enumerator?.nextObject() as? String {
      if let data = FileManager.default.contents(atPath: directory.path + "/" + name) {
        text += String(decoding: data, as: UTF8.self)
      }
    }
    return text
  }
}

func settings(_ change: (inout DeliverySettings) -> Void = { _ in }) -> DeliverySettings {
  var settings = DeliverySettings()
  settings.retryInterval = 10
  change(&settings)
  return settings
}

/// An uploader of `fixture`'s store to one OTLP destination at `server`, on a clock moved by hand.
func otlpUploader(
  _ fixture: ReportFixture, _ server: LoopbackHTTPServer, clock: ManualClock,
  settings deliverySettings: DeliverySettings = settings(), random: @escaping @Sendable () -> Double = { 0 }
) -> ReportUploader {
  ReportUploader(
    store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)],
    settings: deliverySettings,
    clock: { clock.now() }, random: random)
}

extension DeliveryResult {
  var nextAttempt: UInt64 {
    if case .willRetry(_, let next) = outcome { return next }
    return 0
  }
}
