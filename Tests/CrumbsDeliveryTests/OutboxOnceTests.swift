// OutboxOnceTests.swift — two delivery passes over one outbox never send one event twice
// (issue 25: a flush racing the start-up pass sent a summary twice). The delivery lock is the
// store's lock file, whatever path names the store: two uploaders of one process whose paths
// are spelled differently ("dir" and "dir/") are one deliverer at a time, as two processes are.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Dispatch
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsReports

/// An outbox whose events each carry one record whose body is the event's id.
final class NamedOutbox: DeliveryOutbox {
  let events: Mutex<[OutboxEvent]>

  init(_ ids: [String]) {
    events = Mutex(
      ids.map { id in
        let record = OTLPLogRecord(
          timeUnixNano: 1, observedTimeUnixNano: 1, severity: .info, body: .string(id), attributes: [],
          eventName: "test")
        return OutboxEvent(
          id: id, key: id,
          batch: OTLPLogBatch(resource: [], scopeName: "test", scopeVersion: "1", records: [record]))
      })
  }

  var keys: [String] { events.withLock { $0.map(\.key) } }
  func queuedEvents() -> [OutboxEvent] { events.withLock { $0 } }
  func remove(_ event: OutboxEvent) { events.withLock { $0.removeAll { $0.key == event.key } } }
}

/// At its first request, runs another uploader's whole pass (on another thread, waited for):
/// a second deliverer that starts while the first is sending.
final class OverlappingDelegate: ReportUploaderDelegate {
  let other: ReportUploader
  let otherPass = Mutex<DeliveryPass?>(nil)

  init(other: ReportUploader) { self.other = other }

  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    guard otherPass.withLock({ $0 }) == nil else { return request }
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async { [self] in
      let pass = other.deliverPendingNow()
      otherPass.withLock { $0 = pass }
      done.signal()
    }
    done.wait()
    return request
  }
}

@Suite(.serialized) struct OutboxOnceTests {
  /// A second pass starts while the first is sending (a flush during the start-up pass, or a
  /// collector beside the client), through a store path spelled differently: it finds the lock
  /// busy, and each event goes out once. The old lock, kept by path, let both send.
  @Test func aPassStartedDuringAnotherSendsNothingTwice() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let ids = (0..<8).map { "event-\($0)" }
    let outbox = NamedOutbox(ids)
    // One store, named two ways (as a client configured with "dir/" and a collector given "dir").
    let second = ReportUploader(
      store: try ReportStore(directory: directory.path + "/"),
      destinations: [OTLPDestination(endpoint: server.baseURL)], outbox: outbox)
    let delegate = OverlappingDelegate(other: second)
    let first = ReportUploader(
      store: try ReportStore(directory: directory.path),
      destinations: [OTLPDestination(endpoint: server.baseURL)],
      delegate: delegate, outbox: outbox)
    let pass = first.deliverPendingNow()
    let overlapping = try #require(delegate.otherPass.withLock { $0 })
    #expect(overlapping.lockBusy, "the second deliverer waits for the first")
    #expect(pass.events.count == ids.count)
    let sent = try server.requests.flatMap { request in
      (try decodeOTLP(request.body)["records"] as? [[String: Any]] ?? []).compactMap { $0["body"] as? String }
    }
    #expect(Set(sent) == Set(ids))
    #expect(sent.count == ids.count, "\(sent.count) sent for \(ids.count) events")
    #expect(outbox.keys.isEmpty)
  }
}
