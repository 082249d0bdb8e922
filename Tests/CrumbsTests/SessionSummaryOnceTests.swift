// SessionSummaryOnceTests.swift — each session summary, and each count, goes out once
// (issue 25): a session processed a second time (a run that died before removing its files,
// after a flush had already sent its summary) is neither counted nor summarized again, and a
// flush racing the start-up delivery pass sends no summary twice. Real loopback server; the
// requests are decoded by the official OTLP classes.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite(.serialized) struct SessionSummaryOnceTests {
  /// Session ids of the summaries the server received, one entry per summary sent.
  func summaryIDs(_ server: LoopbackHTTPServer) throws -> [String] {
    try server.requests.filter { $0.target.hasSuffix("/v1/logs") }.flatMap { request in
      (try decodeOTLP(request.body)["records"] as? [[String: Any]] ?? []).filter {
        $0["event_name"] as? String == "crumbs.session.summary"
      }.compactMap { ($0["attributes"] as? [String: Any])?["session.id"] as? String }
    }
  }

  /// A run killed after a flush sent a session's summary and before the session's files were
  /// removed leaves the session to the next run, which processes it again: it must not be
  /// summarized (nor counted) twice. The old code queued its summary again, and sent it again.
  @Test func aSessionProcessedAgainAfterItsSummaryWentOutIsNotSentAgain() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    var configuration = CrumbsConfiguration(directory: directory.path)
    configuration.appVersion = "1.0"
    let store = try ReportStore(directory: directory.path)
    let processor = configuration.makePostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: store
    ) { problem in Issue.record("\(problem)") }
    let uploader = ReportUploader(
      store: store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      outbox: SessionSummaryOutbox(directory: directory.path, resource: [:]))
    var session = PreviousSession(
      sessionID: SessionID(), end: .crash, report: nil, receivedMemoryWarning: false,
      startedWallNanoseconds: 1)
    session.appVersion = "1.0"

    processor.sessionEnded(session)
    uploader.deliverPendingNow()
    #expect(try summaryIDs(server) == [session.sessionID.description])
    // The same session again (its files were still there).
    processor.sessionEnded(session)
    uploader.deliverPendingNow()
    #expect(try summaryIDs(server) == [session.sessionID.description], "the summary went out once")
    let metrics = try SessionMetricsFile.read(directory: directory.path)
    #expect(metrics.crashedSessions == 1)
    #expect(metrics.releases["1.0"]?.crashed == 1)
  }

  /// Many summaries queued; `flush` runs while the start-up pass is sending them: every summary
  /// reaches the server once.
  @Test func aFlushRacingTheStartUpPassSendsEachSummaryOnce() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let rings = try RingDirectory(path: directory.path)
      var earlier: Set<String> = []
      for _ in 0..<12 {
        let ring = try rings.createRing()
        earlier.insert(ring.sessionID.description)
        ring.close(clean: true)
      }
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = CrumbsConfiguration(directory: directory.path)
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.appVersion = "1.0"
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      // As soon as the sessions are processed the start-up pass begins sending; flush at once,
      // from two threads, so passes overlap the start-up one.
      let flushed = DispatchGroup()
      for _ in 0..<2 {
        flushed.enter()
        DispatchQueue.global().async {
          client.flush(timeout: 120)
          flushed.leave()
        }
      }
      client.flush(timeout: 120)
      #expect(flushed.wait(timeout: .now() + 300) == .success)
      // The last pass found nothing left (a later one would find nothing either).
      client.flush(timeout: 120)
      let ids = try summaryIDs(server)
      #expect(Set(ids) == earlier)
      #expect(ids.count == earlier.count, "each summary once: \(ids.count) sent for \(earlier.count)")
      #expect(((try? Syscall.directoryEntries(directory.path + "/session-summaries")) ?? []).isEmpty)
    }
  }
}
