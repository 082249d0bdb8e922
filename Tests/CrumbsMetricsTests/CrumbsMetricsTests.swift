// CrumbsMetricsTests.swift — the swift-metrics bridge (issue 37, point 8) with a real client:
// a child of release 2.0.0 really crashes, the next start (release 2.1.0) processes it and the
// crash counter of 2.0.0 goes up; a later start continues the cumulative series; a heartbeat
// really stalls and the hang counter goes up. Counters are read from swift-metrics' own
// MetricsTestKit factory, given to the bridge (no process-wide bootstrap). Waits are on events:
// the child's exit, the previous sessions' processing, the watchdog's hang event.

import CoreMetrics
import Crumbs
import CrumbsTestSupport
import Dispatch
import MetricsTestKit
import Synchronization
import Testing

@testable import CrumbsMetrics

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct CrumbsMetricsTests {
  func configuration(_ directory: TestDirectory, version: String) -> CrumbsConfiguration {
    var configuration = CrumbsConfiguration(directory: directory.path)
    // The test runner's concurrency pool is blocked by synchronous tests: no pool watch here.
    configuration.hangs = nil
    configuration.automaticBreadcrumbs = nil
    configuration.environment = [:]
    configuration.appVersion = version
    return configuration
  }

  func sessions(_ metrics: TestMetrics, _ release: String, _ end: String) throws -> Int64 {
    try metrics.expectCounter(CrumbsMetrics.sessionsLabel, [("release", release), ("end", end)]).totalValue
  }

  func reports(_ metrics: TestMetrics, _ kind: String, _ outcome: String) throws -> Int64 {
    try metrics.expectCounter(CrumbsMetrics.reportsLabel, [("kind", kind), ("outcome", outcome)]).totalValue
  }

  /// One launch of `version` that crashes (SIGSEGV) in `directory`.
  func crashedLaunch(_ version: String, _ directory: TestDirectory) throws {
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-release", version, directory.path, "crash"],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    #expect(child.value(after: "crashing") != nil)
    let status = child.wait(seconds: 180)
    try #require(status & 0x7f == SIGSEGV, "the child died by SIGSEGV (wait status \(status))")
  }

  @Test func aCrashedSessionCountsUnderItsReleaseAtTheNextStartAndTheSeriesContinues() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      try crashedLaunch("2.0.0", directory)

      // The next launch is a new release: the crash is 2.0.0's.
      let metrics = TestMetrics()
      do {
        let client = try CrumbsClient.start(configuration(directory, version: "2.1.0"), shared: false)
        defer { client.close() }
        CrumbsMetrics.bootstrap(client: client, factory: metrics)
        // The run may take long on a busy machine: wait for it with a wide margin.
        try #require(client.waitForPreviousSessions(timeout: 300) != nil)
        #expect(try sessions(metrics, "2.0.0", "crashed") == 1)
        for end in ["clean", "abnormal", "terminated_by_signal", "hang"] {
          #expect(try sessions(metrics, "2.0.0", end) == 0)
        }
        // This launch's release is there at 0, so that its first crash is seen as one.
        #expect(try sessions(metrics, "2.1.0", "crashed") == 0)
        #expect(try reports(metrics, "crash", "stored") == 1)
        #expect(try reports(metrics, "non_fatal", "stored") == 0)
        // A live report is counted as it is stored.
        #expect(client.send(message: "caught") != nil)
        #expect(try reports(metrics, "non_fatal", "stored") == 1)
        #expect(try metrics.expectCounter(CrumbsMetrics.hangsLabel, [("release", "2.1.0")]).totalValue == 0)
      }

      // A restart (a new process, here a new factory) continues the cumulative counts: the
      // crash is still counted once, the clean close of 2.1.0 is added.
      let restarted = TestMetrics()
      let client = try CrumbsClient.start(configuration(directory, version: "2.1.0"), shared: false)
      defer { client.close() }
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      // Added after the previous sessions were processed: told of them at once.
      CrumbsMetrics.bootstrap(client: client, factory: restarted)
      #expect(try sessions(restarted, "2.0.0", "crashed") == 1)
      #expect(try sessions(restarted, "2.1.0", "clean") == 1)
      #expect(try sessions(restarted, "2.1.0", "crashed") == 0)
      #expect(try reports(restarted, "crash", "stored") == 0)
    }
  }

  @Test func aStalledHeartbeatCountsAHangOfTheConfiguredRelease() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = configuration(directory, version: "3.0.0")
      configuration.hangs = HangDetection(threshold: 0.5, watchesConcurrencyPool: false)
      // This heartbeat's hang only: on a busy machine the watchdog may see the test process's
      // main queue stall before the metrics are bootstrapped (a hang counted by no one), and a
      // wait woken by that would look at the counter too early.
      let began = DispatchSemaphore(value: 0)
      CrumbsClient.hangWatchdogEvents.withLock {
        $0 = { event in if case .began("metrics-stall", _) = event { began.signal() } }
      }
      defer { CrumbsClient.hangWatchdogEvents.withLock { $0 = nil } }
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      let metrics = TestMetrics()
      CrumbsMetrics.bootstrap(client: client, factory: metrics)
      let hangs = try metrics.expectCounter(CrumbsMetrics.hangsLabel, [("release", "3.0.0")])
      #expect(hangs.totalValue == 0)

      // This thread beats once, then blocks until the watchdog saw it stall.
      let heartbeat = client.heartbeat("metrics-stall", threshold: 0.5)
      heartbeat.beat()
      try #require(began.wait(timeout: .now() + 120) == .success, "the watchdog saw no hang")
      heartbeat.end()
      #expect(hangs.totalValue == 1)
      #expect(try reports(metrics, "hang", "stored") == 1)
    }
  }

  @Test func mirroringAddsOnlyWhatWasCountedSinceAndNeverGoesDown() throws {
    let metrics = TestMetrics()
    let bridge = CrumbsMetrics(release: "1.0", factory: metrics)
    var counts = ReleaseCounts()
    counts.firstCountedUnixNano = 100
    counts.clean = 3
    counts.crashed = 1
    bridge.mirror(["1.0": counts])
    bridge.mirror(["1.0": counts])
    #expect(try sessions(metrics, "1.0", "clean") == 3)
    #expect(try sessions(metrics, "1.0", "crashed") == 1)
    counts.crashed = 2
    bridge.mirror(["1.0": counts])
    #expect(try sessions(metrics, "1.0", "crashed") == 2)
    // Forgotten and counted again (a new start): the new count is added, nothing taken away.
    var anew = ReleaseCounts()
    anew.firstCountedUnixNano = 200
    anew.crashed = 1
    bridge.mirror(["1.0": anew])
    #expect(try sessions(metrics, "1.0", "crashed") == 3)
    #expect(try sessions(metrics, "1.0", "clean") == 3)
  }
}
