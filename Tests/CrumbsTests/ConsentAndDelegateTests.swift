import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// The app's hooks given in the configuration, in place before `start` touches the previous
/// sessions (issue 25, "Wrong today" 2 and 3, done-when (c) and (d)): the consent handler, the
/// delegate's `shouldProcess`, and `willSend` editing the trail or dropping the report. Each
/// previous session is a real child process that crashed; the next launch delivers to a real
/// loopback server, whose requests the official OTLP classes decode.
@Suite(.serialized) struct ConsentAndDelegateTests {
  /// The children crash without the Swift backtracer: it only slows their death.
  let childEnvironment = ["SWIFT_BACKTRACE": "enable=no"]

  /// A session that crashed (SIGSEGV) with the breadcrumb "about to crash" in its ring.
  func crashedSession(in directory: TestDirectory) throws -> String {
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", directory.path], environment: childEnvironment)
    let output = child.readRemaining(seconds: 300)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV, "\(output)")
    let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("session ") })
    return String(line.dropFirst("session ".count))
  }

  func nextLaunch(_ directory: TestDirectory, server: LoopbackHTTPServer?) -> CrumbsConfiguration {
    var configuration = CrumbsConfiguration(directory: directory.path)
    // The test runner's own concurrency pool is blocked by synchronous tests (HangTests).
    configuration.hangs = nil
    configuration.appName = "next-launch"
    configuration.appVersion = "2.0"
    configuration.automaticBreadcrumbs = nil
    if let server { configuration.destinations = [.otlp(endpoint: server.baseURL)] }
    return configuration
  }

  /// The next launch with `delegate` in its configuration, once its start-up processing and a
  /// flush to `server` are done: the client, to close.
  func nextLaunchDelivering(
    _ directory: TestDirectory, to server: LoopbackHTTPServer, delegate: some CrumbsClientDelegate
  ) throws -> CrumbsClient {
    var configuration = nextLaunch(directory, server: server)
    configuration.delegate = delegate
    let client = try CrumbsClient.start(configuration, shared: false)
    let processed = client.waitForPreviousSessions(timeout: 300) != nil
    if !processed { client.close() }
    try #require(processed, "the next launch did not process the previous sessions in 300 s")
    client.flush(timeout: 120)
    return client
  }

  /// The log records of every request the server received, decoded.
  func records(_ server: LoopbackHTTPServer) throws -> [[String: Any]] {
    // Log records only: session counts go to /v1/metrics beside them (release health).
    try server.requests.filter { $0.target.hasSuffix("/v1/logs") }.flatMap {
      try decodeOTLP($0.body)["records"] as? [[String: Any]] ?? []
    }
  }

  func isSummary(_ record: [String: Any]) -> Bool {
    (record["event_name"] as? String) == "crumbs.session.summary"
  }

  func attributes(_ record: [String: Any]) -> [String: Any] { record["attributes"] as? [String: Any] ?? [:] }

  // MARK: - (c) consent

  @Test func aConfiguredConsentHandlerAnsweringDontSendLetsNothingLeaveNotEvenASummary() throws {
    let directory = TestDirectory()
    _ = try crashedSession(in: directory)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    try ProcessWideState.exclusive {
      let asked = Counter()
      var configuration = nextLaunch(directory, server: server)
      configuration.consent = { reports in
        asked.add(reports.count)
        return .dontSend
      }
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      client.flush(timeout: 120)
      #expect(server.requests.isEmpty)
      #expect(asked.value == 1)
      // Declined: dropped with the reason; the summary stays queued, and the directory says
      // consent is required (for `crumbs collect`).
      #expect(client.store.list(.dropped).reports.count == 1)
      #expect(client.store.list(.pending).reports.isEmpty)
      #expect(try Syscall.directoryEntries(directory.path + "/session-summaries").count == 1)
      #expect(CrumbsDirectory(directory.path).consent == .required)
    }
  }

  @Test func aConfiguredConsentHandlerAnsweringSendLetsTheReportLeaveAndAlwaysTheSummaryToo() throws {
    for answer in [ConsentAnswer.send, .always] {
      let directory = TestDirectory()
      let session = try crashedSession(in: directory)
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      try ProcessWideState.exclusive {
        var configuration = nextLaunch(directory, server: server)
        configuration.consent = { _ in answer }
        let client = try CrumbsClient.start(configuration, shared: false)
        defer { client.close() }
        try #require(client.waitForPreviousSessions(timeout: 300) != nil)
        let flushed = client.flush(timeout: 120)
        #expect(flushed.delivered + client.store.list(.sent).reports.count >= 1, "\(answer)")
        let records = try records(server)
        let crashes = records.filter { !isSummary($0) }
        #expect(crashes.count == 1, "\(answer)")
        #expect(crashes.first.map { attributes($0)["session.id"] as? String } == session, "\(answer)")
        // A summary needs standing consent (`.always`); `.send` covers the reports asked about.
        let summaries = records.filter(isSummary)
        #expect(summaries.count == (answer == .always ? 1 : 0), "\(answer)")
        #expect(CrumbsDirectory(directory.path).consent == (answer == .always ? .granted : .required))
      }
    }
  }

  /// The client asks the directory's one answer (CrumbsDirectory.delivery, the collector's
  /// too) before each report, not only before each pass: a pass that runs while the directory
  /// is turned off (another process of the app turned it off) sends nothing and asks no
  /// handler; the report stays pending. (Before, only summaries were held: the report went.)
  @Test func aPassWhileTheDirectoryIsTurnedOffSendsNoReportAndAsksNoHandler() throws {
    let directory = TestDirectory()
    _ = try crashedSession(in: directory)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    try ProcessWideState.exclusive {
      // Off before the start: the report is stored, and the client's own uploader never runs.
      try CrumbsDirectory(directory.path).setEnabled(false)
      let asked = Counter()
      var configuration = nextLaunch(directory, server: server)
      configuration.consent = { reports in
        asked.add(reports.count)
        return .send
      }
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      #expect(client.store.list(.pending).reports.count == 1)
      // A pass with the client's hooks, as its uploader would run one.
      let pass = ReportUploader(
        store: client.store, destinations: configuration.resolvedDestinations(CrumbsEnvironment([:])),
        delegate: client.bridge, outbox: client.bridge
      ).deliverPendingNow()
      #expect(pass.results.count == 0)
      #expect(server.requests.count == 0)
      #expect(asked.value == 0)
      #expect(client.store.list(.pending).reports.count == 1)
    }
  }

  // MARK: - (d) shouldProcess

  final class RefusingDelegate: CrumbsClientDelegate {
    let seen = Mutex<[CrashReport]>([])
    func shouldProcess(_ report: CrashReport) -> Bool {
      seen.withLock { $0.append(report) }
      return false
    }
  }

  @Test func shouldProcessInTheConfigurationSeesThePreviousCrashAndRefusingItStoresNothingButCountsIt()
    throws
  {
    let directory = TestDirectory()
    let session = try crashedSession(in: directory)
    try ProcessWideState.exclusive {
      var configuration = nextLaunch(directory, server: nil)
      let delegate = RefusingDelegate()
      configuration.delegate = delegate
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      let outcome = try #require(client.waitForPreviousSessions(timeout: 300))
      let seen = delegate.seen.withLock { $0 }
      #expect(seen.map(\.sessionID) == [session])
      #expect(seen.first?.kind == .crash)
      #expect(client.store.list(.pending).reports.isEmpty)
      #expect(client.store.list(.dropped).reports.isEmpty)
      #expect(outcome.reports.isEmpty)
      let metrics = try #require(client.sessionMetrics)
      #expect(metrics.crashedSessions == 1)
      #expect(metrics.sessions == 2)
    }
  }

  // MARK: - willSend

  final class EditingDelegate: CrumbsClientDelegate {
    let drops: Bool
    let failed = Mutex<[DeliveryResult]>([])
    let trailSeen = Mutex<[String]>([])
    init(drops: Bool) { self.drops = drops }

    func willSend(_ draft: ReportDraft) -> ReportDraft? {
      trailSeen.withLock { $0 = draft.breadcrumbs.map(\.message) }
      if drops { return nil }
      var edited = draft
      edited.breadcrumbs.removeAll { $0.message == "about to crash" }
      return edited
    }
    func didFailSending(_ report: CrashReport, result: DeliveryResult) {
      failed.withLock { $0.append(result) }
    }
  }

  @Test func willSendDroppingAReportSendsNothingOfItAndMarksItDroppedByTheApp() throws {
    let directory = TestDirectory()
    _ = try crashedSession(in: directory)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    try ProcessWideState.exclusive {
      let delegate = EditingDelegate(drops: true)
      let client = try nextLaunchDelivering(directory, to: server, delegate: delegate)
      defer { client.close() }
      #expect(try records(server).filter { !isSummary($0) }.isEmpty)
      #expect(delegate.trailSeen.withLock { $0 }.contains("about to crash"))
      let dropped = client.store.list(.dropped).reports
      #expect(dropped.count == 1)
      #expect(dropped.first?.droppedReason()?.contains(ReportDraft.droppedReason) == true)
      #expect(client.store.list(.pending).reports.isEmpty)
      let results = delegate.failed.withLock { $0 }
      #expect(results.map(\.outcome) == [.dropped(reason: ReportDraft.droppedReason)])
      #expect(results.first?.attempts == 0)
    }
  }

  @Test func willSendRemovingABreadcrumbLeavesItOutOfWhatTheServerReceives() throws {
    let directory = TestDirectory()
    _ = try crashedSession(in: directory)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    try ProcessWideState.exclusive {
      let delegate = EditingDelegate(drops: false)
      let client = try nextLaunchDelivering(directory, to: server, delegate: delegate)
      defer { client.close() }
      let stored = try #require(client.store.list(.sent).reports.first)
      let storedTrail = try stored.trailBreadcrumbs().map(\.message)
      #expect(storedTrail.contains("about to crash"))
      let decoded = try server.requests.map { try decodeOTLP($0.body) }
      let report = try #require(
        decoded.first { ($0["records"] as? [[String: Any]] ?? []).contains { !isSummary($0) } })
      let crash = try #require((report["records"] as? [[String: Any]])?.first)
      let sent = attributes(crash)
      // The trail as the server got it: the LZ4 JSON Lines attribute, decompressed by `lz4 -d`.
      let jsonl = try #require(report["trail_jsonl"] as? String, "\(report["trail_error"] ?? "no trail")")
      let trail = Breadcrumb.trail(jsonLines: Array(jsonl.utf8))
      #expect(!trail.isEmpty)
      #expect(trail.map(\.message) == storedTrail.filter { $0 != "about to crash" })
      #expect(sent["crumbs.breadcrumbs.count"] as? Int == trail.count)
      #expect(sent["crumbs.breadcrumbs.last_message"] as? String != "about to crash")
      #expect(!server.requests.contains { $0.body.firstRange(of: Array("about to crash".utf8)) != nil })
    }
  }

  // MARK: - non-fatal sample rate

  @Test func nonFatalReportsAreSampledWhenMadeAndCrashesNever() throws {
    try ProcessWideState.exclusive {
      for (rate, random, kept) in [
        (0.0, 0.0, false), (1.0, 0.999, true), (0.5, 0.25, true), (0.5, 0.75, false),
      ] {
        let directory = TestDirectory()
        var configuration = nextLaunch(directory, server: nil)
        configuration.nonFatalSampleRate = rate
        configuration.nonFatalSampleRandom = { random }
        let client = try CrumbsClient.start(configuration, shared: false)
        defer { client.close() }
        let made = client.send(message: "sampled?")
        #expect((made != nil) == kept, "rate \(rate), random \(random)")
        #expect(client.store.list(.pending).reports.count == (kept ? 1 : 0), "rate \(rate)")
      }
    }
  }

  @Test func aSampleRateOfZeroNeverSamplesThePreviousSessionsCrash() throws {
    let directory = TestDirectory()
    let session = try crashedSession(in: directory)
    try ProcessWideState.exclusive {
      var configuration = nextLaunch(directory, server: nil)
      configuration.nonFatalSampleRate = 0
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      #expect(client.store.list(.pending).reports.map(\.report.sessionID) == [session])
      #expect(client.send(error: SampleError(code: 1)) == nil)
      #expect(client.sessionMetrics?.sessions == 2)
    }
  }
}
