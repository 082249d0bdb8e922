// ClosingSpanQueueTests.swift — the closing spans' queue (issue 38, point 4): queued once per
// ended session by the run that counts it (a session processed again queues nothing), sent
// once by the outbox to a real loopback server, and a hostile folder — garbage, a FIFO, a
// symbolic link, a file of another user — neither blocks, traps nor loses what is readable.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct ClosingSpanQueueTests {
  /// A crash session whose stored report held one traced and one untraced operation.
  func crashedSession(_ store: ReportStore) throws -> PreviousSession {
    let id = SessionID()
    var report = CrashReport.sample(id: id.description, observed: 2_000_000_000_000_000_000)
    report.openOperations = CrashReport.OpenOperations(
      operations: [
        .init(
          name: "GET /v1/orders/:id", kind: "server", traceID: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanID: "00f067aa0ba902b7", parentSpanID: "b7ad6b7169203331",
          startTimeUnixNano: 1_999_999_999_000_000_000,
          startTime: "", ageNanoseconds: 1_000_000_000, threadID: 7, attributes: [], onCrashingThread: true),
        .init(
          name: "orders.export", kind: "job", traceID: nil, spanID: nil, parentSpanID: nil,
          startTimeUnixNano: 1_999_999_999_000_000_000, startTime: "", ageNanoseconds: 1_000_000_000,
          threadID: 8, attributes: [], onCrashingThread: false),
      ], capacity: 512, notHeld: 0, unreadable: 0, damage: nil)
    report.signal = CrashReport.SignalInfo(
      number: 11, name: "SIGSEGV", code: 1, codeName: "SEGV_MAPERR", faultAddress: "0x0", senderPID: nil,
      senderUID: nil)
    let stored = try store.store(report, attachments: [])
    return PreviousSession(
      sessionID: id, end: .crash, report: stored, receivedMemoryWarning: false, startedWallNanoseconds: 1)
  }

  @Test func aSessionProcessedAgainQueuesAndSendsItsSpansOnce() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let store = try ReportStore(directory: directory.path)
    let processor = CrumbsConfiguration(directory: directory.path).makePostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: store
    ) { problem in Issue.record("\(problem)") }
    let uploader = ReportUploader(
      store: store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      outbox: SessionSummaryOutbox(directory: directory.path, resource: [:]))
    let session = try crashedSession(store)
    processor.sessionEnded(session)
    #expect(try Syscall.directoryEntries(directory.path + "/closing-spans").count == 1)
    uploader.deliverPendingNow()
    let spans = try receivedSpans(server)
    #expect(spans.map { $0["span_id"] as? String } == ["00f067aa0ba902b7"])
    #expect((spans.first?["status"] as? [String: Any])?["message"] as? String == "crashed: SIGSEGV")
    #expect(try Syscall.directoryEntries(directory.path + "/closing-spans").isEmpty)
    // Processed again (a run that died before removing its files): counted already, not queued.
    processor.sessionEnded(session)
    uploader.deliverPendingNow()
    #expect(try receivedSpans(server).count == 1, "sent once")
  }

  @Test func aHostileQueueNeitherBlocksNorLosesWhatIsReadable() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let session = try crashedSession(store)
    ClosingSpanQueue.enqueue(session, directory: directory.path)
    let folder = directory.path + "/closing-spans"
    try Syscall.writeFileAtomically(
      folder + "/00000000000000000001-garbage.json", Array("{\"reportID\":".utf8))
    #expect(mkfifo(folder + "/00000000000000000002-fifo.json", 0o600) == 0)
    #expect(symlink("/etc/passwd", folder + "/00000000000000000003-link.json") == 0)
    let events = ClosingSpanQueue.events(directory: directory.path)
    #expect(events.map(\.id) == [session.report?.report.id], "the readable one, nothing else")
    #expect(events.first?.traces?.spans.count == 1)
    let names = Set(try Syscall.directoryEntries(folder))
    #expect(names.contains("00000000000000000001-garbage.json.unreadable"))
    #expect(names.contains("00000000000000000001-garbage.json.reason"))
    // The FIFO and the link are set aside too, never opened through.
    #expect(names.contains("00000000000000000002-fifo.json.unreadable"))
    #expect(names.contains("00000000000000000003-link.json.unreadable"))
    // A key naming another folder removes nothing there.
    var outside = try #require(events.first)
    outside.key = ClosingSpanQueue.keyPrefix + "../reports"
    #expect(ClosingSpanQueue.remove(outside, directory: directory.path))
    #expect(FileManager.default.fileExists(atPath: directory.path + "/reports"))
  }

  /// A file another user put in the folder is not the app's to send.
  @Test func aFileOfAnotherUserIsNotSent() throws {
    guard getuid() == 0 else { return }  // needs root to own a file as another user
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    ClosingSpanQueue.enqueue(try crashedSession(store), directory: directory.path)
    let folder = directory.path + "/closing-spans"
    let name = try #require(try Syscall.directoryEntries(folder).first)
    #expect(chown(folder + "/" + name, 65534, 65534) == 0)
    #expect(ClosingSpanQueue.events(directory: directory.path).isEmpty)
  }

  /// At most `maxSpansPerDeath` spans are queued per death, the oldest.
  @Test func aHugeLedgerQueuesItsOldestSpans() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    var session = try crashedSession(store)
    var report = try #require(session.report?.report)
    let traced = try #require(report.openOperations?.operations.first)
    report.openOperations?.operations = (0..<(ClosingSpanQueue.maxSpansPerDeath + 10)).map { index in
      var operation = traced
      operation.name = "op \(index)"
      return operation
    }
    report.id = SessionID().description
    session.report = try store.store(report, attachments: [])
    ClosingSpanQueue.enqueue(session, directory: directory.path)
    let spans = try #require(ClosingSpanQueue.events(directory: directory.path).first?.traces?.spans)
    #expect(spans.count == ClosingSpanQueue.maxSpansPerDeath)
    #expect(spans.first?.name == "op 0")
  }

  /// Spans wait for consent as the summaries do: refused, they stay queued; allowed, they go.
  @Test func spansWaitForConsent() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let store = try ReportStore(directory: directory.path)
    ClosingSpanQueue.enqueue(try crashedSession(store), directory: directory.path)
    let consent = EventConsent()
    let uploader = ReportUploader(
      store: store, destinations: [OTLPDestination(endpoint: server.baseURL)], delegate: consent,
      outbox: SessionSummaryOutbox(directory: directory.path, resource: [:]))
    uploader.deliverPendingNow()
    #expect(try receivedSpans(server).isEmpty)
    #expect(try Syscall.directoryEntries(directory.path + "/closing-spans").count == 1)
    consent.allowed.withLock { $0 = true }
    uploader.deliverPendingNow()
    #expect(try receivedSpans(server).count == 1)
    #expect(try Syscall.directoryEntries(directory.path + "/closing-spans").isEmpty)
  }
}

/// Refuses every outbox event until `allowed`.
final class EventConsent: ReportUploaderDelegate {
  let allowed = Mutex(false)
  func shouldSend(event: OutboxEvent) -> Bool { allowed.withLock { $0 } }
}
