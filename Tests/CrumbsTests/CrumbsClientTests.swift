import CrumbsDeliveryTestSupport
import CrumbsPlatform
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

struct SampleError: Error, CustomStringConvertible {
  var code: Int
  var description: String { "sample failure \(code)" }
}

/// Adds a header to every request (as a signing delegate would) and notes their ids.
final class SigningDelegate: CrumbsClientDelegate {
  let requestIDs = Mutex<[String]>([])

  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    requestIDs.withLock { $0.append(request.reportID) }
    var signed = request
    signed.headers.append(HTTPHeader("X-Crumbs-Signed", "yes"))
    return signed
  }
}

/// Keeps `report(_:)` a real frame in every build.
enum ClientProbe {
  @inline(never) static func report(_ client: CrumbsClient, attachments: [String] = []) -> StoredReport? {
    client.send(error: SampleError(code: 7), attributes: ["order.id": "A-1"], attachments: attachments)
  }
}

/// The client (issue 5): a crash-SDK API over the ring, the crash handler, the store and delivery.
@Suite(.serialized) struct CrumbsClientTests {
  func configuration(_ directory: TestDirectory) -> CrumbsConfiguration {
    var configuration = CrumbsConfiguration(directory: directory.path)
    // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
    // would be true, and one more report than these tests count (HangTests watch children).
    configuration.hangs = nil
    configuration.appName = "client-test"
    configuration.appVersion = "1.2.3"
    // Off here: SIGCHLD from other tests' children would land in these rings. One test below
    // turns them on.
    configuration.automaticBreadcrumbs = nil
    return configuration
  }

  @Test func aNonFatalReportCarriesTheStackAttributesTrailAndAttachments() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try CrumbsClient.start(configuration(directory), shared: false)
      defer { client.close() }
      client.setAttribute("eu-west", forKey: "region")
      client.addBreadcrumb("loaded cart", level: .info, type: .navigation)
      client.addBreadcrumb("charge failed", level: .error, type: .http, attributes: ["status": "502"])
      let small = directory.file("small.txt")
      try Syscall.writeFileAtomically(small, Array("hello".utf8))
      let large = directory.file("large.bin")
      try Syscall.writeFileAtomically(large, [UInt8](repeating: 1, count: 8 * 1024 * 1024))
      let missing = directory.file("missing.txt")

      let stored = try #require(ClientProbe.report(client, attachments: [small, large, missing]))
      let report = stored.report
      #expect(report.kind == .nonFatal)
      #expect(report.exceptionType.hasSuffix("SampleError"))
      #expect(report.exceptionMessage == "sample failure 7")
      #expect(report.exceptionStacktrace.contains("ClientProbe.report"), "\(report.exceptionStacktrace)")
      #expect(report.attributes == ["region": "eu-west", "order.id": "A-1"])
      #expect(report.resource["service.name"] == "client-test")
      #expect(report.resource["service.version"] == "1.2.3")
      #expect(report.sessionID == client.sessionID.description)
      #expect(report.breadcrumbs.lastMessage == "charge failed")
      let trail = try runLZ4Decompress(stored.attachmentPath(TrailAttachment.name))
      #expect(trail.contains("\"message\":\"loaded cart\""))

      let attachments = Dictionary(uniqueKeysWithValues: report.attachments.map { ($0.name, $0) })
      #expect(attachments["attachment-small.txt"]?.omittedReason == nil)
      #expect(try Syscall.readFile(stored.attachmentPath("attachment-small.txt")) == Array("hello".utf8))
      #expect(attachments["attachment-large.bin"]?.omittedReason?.contains("limit") == true)
      #expect(!Syscall.fileExists(stored.attachmentPath("attachment-large.bin")))
      #expect(attachments["attachment-missing.txt"]?.omittedReason?.hasPrefix("unreadable") == true)
    }
  }

  @Test func theNextStartReportsTheCrashedSessionAndCountsSessions() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        "report-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
        environment: ["CRUMBS_TEST_CRASH_KIND": "bounds"])
      #expect(run.status & 0x7f == swiftTrapSignal)
      let client = try CrumbsClient.start(configuration(directory), shared: true)
      defer { client.close() }
      #expect(CrumbsClient.shared === client)
      #expect(client.hasCrashedInLastSession)
      let report = try #require(client.lastSessionCrashReport)
      #expect(report.kind == .crash)
      #expect(report.reportingSessionID == client.sessionID.description)
      #expect(!client.hasReceivedMemoryWarningInLastSession)
      // The run may take long on a busy machine: wait for it with a wide margin.
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      let metrics = try #require(client.sessionMetrics)
      #expect(metrics.sessions == 1)
      #expect(metrics.crashedSessions == 1)
      #expect(!metrics.installID.isEmpty)
    }
  }

  /// A PSI trigger makes the kernel wait for an RCU grace period when the process ends (6–20 ms
  /// added to every exit and crash): a client holds one only when asked for.
  @Test func aClientHoldsAPressureTriggerOnlyWhenAskedFor() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = configuration(directory)
      var automatic = AutomaticBreadcrumbsOptions()
      automatic.signals = nil
      configuration.automaticBreadcrumbs = automatic
      let client = try CrumbsClient.start(configuration, shared: false)
      client.waitForPreviousSessions()
      #expect(openPressureFiles().isEmpty)
      client.close()

      let psiWritable = access("/proc/pressure/memory", W_OK) == 0
      automatic.memoryPressure?.pressureTrigger = PressureTrigger(
        stallMicroseconds: 150_000, windowMicroseconds: 2_000_000)
      configuration.automaticBreadcrumbs = automatic
      let asking = try CrumbsClient.start(configuration, shared: false)
      asking.waitForPreviousSessions()
      if psiWritable { #expect(!openPressureFiles().isEmpty) }
      asking.close()
      #expect(openPressureFiles().isEmpty)
    }
  }

  /// The ring's cgroup facts (for the next launch's OOM check) are read off the caller's thread
  /// of start, and are in the header once the start-up work is done.
  @Test func theRingNamesItsCgroupOnceStartUpWorkIsDone() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try CrumbsClient.start(configuration(directory), shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      let header = client.ring.snapshot().header
      let cgroup = SystemFacts.memoryCgroup() ?? ""
      #expect(header.cgroup == cgroup)
      #expect(header.cgroupOOMKillsAtStart == SystemFacts.cgroupOOMKills(cgroup: cgroup))
    }
  }

  @Test func aTracerIsSeenInTheStatusFile() {
    func status(_ tracer: String) -> [UInt8] {
      Array(
        "Name:\tapp\nUmask:\t0022\nState:\tR (running)\nTgid:\t7\nPid:\t7\nPPid:\t1\nTracerPid:\(tracer)\nUid:\t0\n"
          .utf8)
    }
    #expect(!CrumbsClient.tracerAttached(status: status("\t0")))
    #expect(CrumbsClient.tracerAttached(status: status("\t4242")))
    #expect(CrumbsClient.tracerAttached(status: status(" 9")))
    #expect(!CrumbsClient.tracerAttached(status: Array("Name:\tapp\n".utf8)))
    #expect(!CrumbsClient.debuggerAttached())  // the tests run untraced
  }

  @Test func disablingIsPersistedAndRecordsNothing() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let first = try CrumbsClient.start(configuration(directory), shared: false)
      first.addBreadcrumb("while enabled")
      first.setEnabled(false)
      first.addBreadcrumb("while disabled")
      #expect(first.ring.snapshot().breadcrumbs.map(\.message) == ["while enabled"])
      #expect(ClientProbe.report(first) == nil)
      #expect(!CrashHandler.isInstalled)
      first.close()

      let second = try CrumbsClient.start(configuration(directory), shared: false)
      #expect(!second.isEnabled)
      second.addBreadcrumb("still disabled")
      #expect(second.ring.snapshot().breadcrumbs.isEmpty)
      second.setEnabled(true)
      second.addBreadcrumb("enabled again")
      #expect(second.ring.snapshot().breadcrumbs.map(\.message).contains("enabled again"))
      #expect(!second.ring.snapshot().breadcrumbs.map(\.message).contains("still disabled"))
      #expect(CrashHandler.isInstalled)
      second.close()
      #expect(!CrashHandler.isInstalled)
    }
  }

  @Test func withAConsentHandlerNothingLeavesWithoutConsent() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = configuration(directory)
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      let asked = Counter()
      client.setConsentHandler { reports in
        asked.add(reports.count)
        return .dontSend
      }
      let declined = try #require(ClientProbe.report(client))
      _ = client.uploader?.deliverPendingNow()
      #expect(server.requests.isEmpty)
      #expect(asked.value >= 1)
      #expect(client.store.list(.dropped).reports.map(\.report.id).contains(declined.report.id))

      client.setConsentHandler { _ in .always }
      let accepted = try #require(ClientProbe.report(client))
      _ = client.uploader?.deliverPendingNow()
      #expect(server.requests.count == 1)
      #expect(client.hasStandingConsent)
      #expect(client.store.list(.sent).reports.map(\.report.id) == [accepted.report.id])
    }
  }

  @Test func sessionSummariesAreSentAsOTLPEventsAndRemovedOnceAccepted() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      // Two earlier sessions: one crashed (abnormally ended), one clean.
      let rings = try RingDirectory(path: directory.path)
      let dead = try rings.createRing()
      dead.append("before the end")
      let deadSession = dead.sessionID
      dead.close(clean: false)
      let clean = try rings.createRing()
      clean.close(clean: true)
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = configuration(directory)
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      // The background thread sends them right after processing; poll (bounded) for the requests.
      let deadline = ChildProcess.now() + 20
      var summaries: [[String: Any]] = []
      while summaries.count < 2, ChildProcess.now() < deadline {
        summaries = try server.requests.flatMap { request -> [[String: Any]] in
          let decoded = try decodeOTLP(request.body)
          return (decoded["records"] as? [[String: Any]] ?? []).filter {
            ($0["event_name"] as? String) == "crumbs.session.summary"
          }
        }
      }
      #expect(summaries.count == 2)
      let ends = Set(
        summaries.compactMap { ($0["attributes"] as? [String: Any])?["crumbs.session.end"] as? String })
      #expect(ends == ["abnormal_termination", "clean"])
      let sessionIDs = Set(
        summaries.compactMap { ($0["attributes"] as? [String: Any])?["session.id"] as? String })
      #expect(sessionIDs.contains(deadSession.description))
      let counts = summaries.compactMap { ($0["attributes"] as? [String: Any])?["crumbs.sessions"] }
      #expect(counts.count == 2)
      // Delivered summaries leave the queue.
      let queued = (try? Syscall.directoryEntries(directory.path + "/session-summaries")) ?? []
      #expect(queued.isEmpty)
    }
  }

  /// Session summaries leave through the uploader like reports (issue 22): the consent a
  /// handler gives or withholds holds for them, and `willSendRequest` sees and changes them.
  @Test func sessionSummariesPassThroughConsentAndWillSendRequest() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let earlier = try RingDirectory(path: directory.path).createRing()
      let earlierSession = earlier.sessionID.description
      earlier.close(clean: true)
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = configuration(directory)
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      // The background work (which queues the summary and starts delivery) waits until the
      // consent handler and the delegate are in place.
      let held = DispatchSemaphore(value: 0)
      CrumbsClient.backgroundWorkWillStart.withLock { $0 = { held.wait() } }
      defer { CrumbsClient.backgroundWorkWillStart.withLock { $0 = nil } }
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      let delegate = SigningDelegate()
      client.delegate = delegate
      client.setConsentHandler { _ in .dontSend }
      held.signal()
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      func summaries() throws -> [CapturedRequest] {
        try server.requests.filter { request in
          let records = try decodeOTLP(request.body)["records"] as? [[String: Any]] ?? []
          return records.contains { ($0["event_name"] as? String) == "crumbs.session.summary" }
        }
      }
      let queue = directory.path + "/session-summaries"

      // No standing consent: the summary stays queued, whichever pass looks at it.
      client.flush(timeout: 120)
      #expect(try summaries().isEmpty)
      #expect(delegate.requestIDs.withLock { $0 }.isEmpty)
      #expect(try Syscall.directoryEntries(queue).count == 1)

      // Consent given through the handler (`.always`, asked about a report) covers the summary,
      // which goes out as willSendRequest made it.
      client.setConsentHandler { _ in .always }
      _ = try #require(ClientProbe.report(client))
      client.flush(timeout: 120)
      let sent = try summaries()
      #expect(sent.count == 1)
      #expect(sent.first?.headers["x-crumbs-signed"] == "yes")
      #expect(delegate.requestIDs.withLock { $0 }.contains(earlierSession))
      #expect(try Syscall.directoryEntries(queue).isEmpty)
    }
  }

  @Test func automaticBreadcrumbsStartWithTheClientAndStopWithIt() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = configuration(directory)
      var automatic = AutomaticBreadcrumbsOptions()
      automatic.signals = nil  // SIGCHLD from other tests' children would make this racy
      configuration.automaticBreadcrumbs = automatic
      let client = try CrumbsClient.start(configuration, shared: false)
      client.addBreadcrumb("first of the app's own")
      client.waitForPreviousSessions()
      let crumbs = client.ring.snapshot().breadcrumbs
      // The start breadcrumb is recorded on the caller's thread, before anything the app adds.
      #expect(crumbs.first?.message == "process started")
      #expect(crumbs.first?.attributes.contains(.init(key: "version", value: "1.2.3")) == true)
      #expect(crumbs.map(\.message).firstIndex(of: "first of the app's own") == 1)
      client.close()
      #expect(!CrashHandler.isInstalled)
    }
  }

  @Test func withoutAllowsAttachingDebuggerATracedProcessGetsNoCrashHandler() throws {
    let direct = TestDirectory()
    let untraced = try ChildProcess(ChildProcess.testChild, ["client-debugger", direct.path])
    #expect(untraced.value(after: "crash-handler ") == "installed")
    untraced.wait()
    let candidates: [String] = ["/usr/bin/strace", "/bin/strace"]
    guard let strace = candidates.first(where: { access($0, X_OK) == 0 }) else {
      print("skipped the traced half: strace is not installed (apt-get install strace)")
      return
    }
    let traced = TestDirectory()
    let child = try ChildProcess(
      strace, ["-f", "-o", "/dev/null", ChildProcess.testChild, "client-debugger", traced.path])
    #expect(child.value(after: "crash-handler ") == "absent")
    child.wait()
  }

  @Test func aBadDirectoryIsAnErrorTheAppCanSee() {
    var configuration = CrumbsConfiguration(directory: "/proc/no-such-place/crumbs")
    configuration.appName = "x"
    #expect(throws: CrumbsError.self) { try CrumbsClient.start(configuration, shared: false) }
  }
}

final class Counter: @unchecked Sendable {
  private let lock = NSLock()
  private var total = 0
  func add(_ value: Int) { lock.withLock { total += value } }
  var value: Int { lock.withLock { total } }
}
