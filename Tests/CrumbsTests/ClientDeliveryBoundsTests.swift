// ClientDeliveryBoundsTests.swift — what CrumbsConfiguration bounds in delivery: close() returns
// within closeTimeout while an upload hangs (the upload ends later on its own thread, and the
// report is still delivered, at least once), requestTimeout reaches the transport, and OTLP/JSON
// is chosen there as in the CLI. Every wait is on an event (a request arriving, a hook called),
// bounded with a wide margin.

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsReports

/// Signals each hook call it is told about.
final class SignallingDelegate: CrumbsClientDelegate {
  let delivered = DispatchSemaphore(value: 0)
  let failedToReach = DispatchSemaphore(value: 0)
  let failures = Mutex<[TransportError]>([])

  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) { delivered.signal() }
  func serverDidFail(_ failure: DeliveryFailure) {
    failures.withLock { $0.append(failure.error) }
    failedToReach.signal()
  }
}

@Suite(.serialized) struct ClientDeliveryBoundsTests {
  func configuration(_ directory: TestDirectory, _ server: LoopbackHTTPServer) -> CrumbsConfiguration {
    var configuration = CrumbsConfiguration(directory: directory.path)
    // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
    // would be true, and one more report than these tests count (HangTests watch children).
    configuration.hangs = nil
    configuration.appName = "bounds-test"
    configuration.automaticBreadcrumbs = nil
    configuration.destinations = [.otlp(endpoint: server.baseURL)]
    return configuration
  }

  @Test func closeReturnsWithinItsBoundWhileAnUploadHangsAndTheReportIsStillDelivered() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let arrived = DispatchSemaphore(value: 0)
      // Never answers until stopped (then 200).
      let server = try LoopbackHTTPServer { _, _ in
        arrived.signal()
        return .stall(seconds: 3600)
      }
      defer { server.stop() }
      var configuration = configuration(directory, server)
      configuration.requestTimeout = 60
      configuration.closeTimeout = 1
      let client = try CrumbsClient.start(configuration, shared: false)
      let delegate = SignallingDelegate()
      client.delegate = delegate
      client.waitForPreviousSessions(timeout: 300)
      let stored = try #require(ClientProbe.report(client))
      try #require(arrived.wait(timeout: .now() + 60) == .success, "the upload never started")

      let started = ChildProcess.now()
      client.close()
      let took = ChildProcess.now() - started
      // closeTimeout is 1 s; the upload alone would hold close() for the request timeout (60 s
      // here, 30 s by default). 20 s leaves a busy machine all the margin it needs.
      #expect(took < 20, "close() took \(took) s")
      #expect(try client.store.load(id: stored.report.id).state == .pending)

      // The upload outlives close() on its own thread; once the server answers, it is recorded.
      server.stop()
      #expect(delegate.delivered.wait(timeout: .now() + 60) == .success)
      #expect(try client.store.load(id: stored.report.id).state == .sent)
    }
  }

  @Test func theRequestTimeoutFromTheConfigurationReachesTheTransport() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let server = try LoopbackHTTPServer { _, _ in .stall(seconds: 3600) }
      defer { server.stop() }
      var configuration = configuration(directory, server)
      configuration.requestTimeout = 1
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      #expect((client.uploader?.transport as? DeliveryTransport)?.timeout == 1)
      let delegate = SignallingDelegate()
      client.delegate = delegate
      client.waitForPreviousSessions(timeout: 300)
      let started = ChildProcess.now()
      _ = try #require(ClientProbe.report(client))
      // The default (30 s) would not fail it within this bound; 1 s does, with room to spare.
      #expect(delegate.failedToReach.wait(timeout: .now() + 20) == .success)
      #expect(delegate.failures.withLock { $0 } == [.timedOut])
      #expect(ChildProcess.now() - started < 20)
    }
  }

  @Test func otlpJSONChosenInTheConfigurationReachesTheServerAsJSON() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = configuration(directory, server)
      configuration.destinations = [.otlp(endpoint: server.baseURL, encoding: .json)]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      let delegate = SignallingDelegate()
      client.delegate = delegate
      client.waitForPreviousSessions(timeout: 300)
      let stored = try #require(ClientProbe.report(client))
      #expect(delegate.delivered.wait(timeout: .now() + 60) == .success)
      let request = try #require(
        server.requests.first { String(decoding: $0.body, as: UTF8.self).contains(stored.report.id) })
      #expect(request.headers["content-type"] == "application/json")
      let decoded = try decodeOTLP(request.body, json: true)
      let records = try #require(decoded["records"] as? [[String: Any]])
      let attributes = try #require(records.first?["attributes"] as? [String: Any])
      #expect(attributes["crumbs.report.id"] as? String == stored.report.id)
    }
  }
}
