// StoreBoundsTests.swift — what the client leaves on disk (issue 11): the store keeps its own
// limits with or without a destination, evicts in an order that never loses the newest crash,
// a crash loop leaves rings/ bounded and every session counted, queued summaries are bounded,
// and what writers killed inside a write (or stopped by a full disk) left is cleaned up.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

struct OtherSampleError: Error {}

@Suite(.serialized) struct StoreBoundsTests {
  func configuration(_ directory: TestDirectory, records: Int = 0, megabytes: Int = 0) -> CrumbsConfiguration
  {
    var configuration = CrumbsConfiguration(directory: directory.path)
    // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
    // would be true, and one more report than these tests count (HangTests watch children).
    configuration.hangs = nil
    configuration.appName = "bounds-test"
    configuration.automaticBreadcrumbs = nil
    configuration.storeLimits = StoreLimits(maxRecordCount: records, maxDatabaseSize: megabytes)
    return configuration
  }

  /// Every regular file under `path` (links and folders not counted), with its size.
  func files(under path: String) -> [(path: String, size: Int)] {
    var found: [(String, Int)] = []
    for name in (try? Syscall.directoryEntries(path)) ?? [] {
      let child = path + "/" + name
      guard let status = Syscall.status(ofPath: child) else { continue }
      if status.kind == .directory {
        found += files(under: child)
      } else {
        found.append((child, status.size))
      }
    }
    return found
  }

  // MARK: - The store's own limits (items 1 and 2)

  @Test func withoutADestinationTheStoreKeepsItsOwnLimits() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try CrumbsClient.start(configuration(directory, records: 3), shared: false)
      defer { client.close() }
      client.waitForPreviousSessions(timeout: 300)
      #expect(client.uploader == nil)
      var ids: [String] = []
      for _ in 0..<8 { ids.append(try #require(ClientProbe.report(client)).report.id) }
      // One signature: the three newest stay pending, the older ones are evicted with a reason.
      #expect(client.store.list(.pending).reports.map(\.report.id) == Array(ids.suffix(3)))
      let dropped = client.store.list(.dropped).reports
      #expect(Set(dropped.map(\.report.id)) == Set(ids.prefix(5)).subtracting(ids.prefix(2)))
      for stored in dropped {
        #expect(stored.droppedReason() == "evicted: more than 3 pending reports (maxRecordCount)")
      }
    }
  }

  @Test func theNewestReportOfASignatureIsEvictedLast() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let client = try CrumbsClient.start(configuration(directory, records: 2), shared: false)
      defer { client.close() }
      client.waitForPreviousSessions(timeout: 300)
      // Oldest first: one report of another signature, then two of SampleError's.
      let other = try #require(client.send(error: OtherSampleError())).report
      let older = try #require(ClientProbe.report(client)).report
      let newer = try #require(ClientProbe.report(client)).report
      #expect(other.signature != older.signature)
      #expect(older.signature == newer.signature)
      // Oldest first would evict `other`: it is its signature's newest, so the older
      // SampleError goes instead.
      #expect(Set(client.store.list(.pending).reports.map(\.report.id)) == [other.id, newer.id])
      #expect(client.store.list(.dropped).reports.map(\.report.id) == [older.id])
    }
  }

  @Test func aNewCrashSurvivesAStoreFullOfDroppedReports() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      // 67 dropped reports of ~17 kB (1.1 MB), left by earlier sessions.
      let store = try ReportStore(directory: directory.path)
      var dropped: [String] = []
      for index in 0..<67 {
        let report = CrashReport.sample(observed: 1_000 + UInt64(index))
        try store.plant(report, in: .dropped, blobBytes: 16_000)
        dropped.append(report.id)
      }
      // A real crash, then a start with maxDatabaseSize 1 and a server that answers 503.
      let run = try runCrashScenario(
        "report-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory)
      #expect(run.status & 0x7f == SIGSEGV)
      let server = try LoopbackHTTPServer(status: 503)
      defer { server.stop() }
      var configuration = configuration(directory, records: 100, megabytes: 1)
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      let crash = try #require(client.lastSessionCrashReport)
      client.uploader?.deliverPendingNow()

      // The crash is still pending and was offered to the server; the dropped ones went first,
      // oldest first, and the store is within its megabyte.
      #expect(try client.store.load(id: crash.id).state == .pending)
      #expect(server.requests.compactMap(reportID(ofOTLP:)).contains(crash.id))
      let left = client.store.list(.dropped).reports.map(\.report.id)
      #expect(left.count < 67)
      #expect(left == Array(dropped.suffix(left.count)))
      #expect(files(under: client.store.path).reduce(0) { $0 + $1.size } <= 1_000_000)
    }
  }

  @Test func aLinkInPlaceOfTheSessionCounterIsNeverWrittenThrough() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let outside = TestDirectory()
      let precious = outside.file("precious.txt")
      try Syscall.writeFileAtomically(precious, Array("precious\n".utf8))
      try #require(symlink(precious, directory.file("session-starts")) == 0)
      let client = try CrumbsClient.start(configuration(directory), shared: false)
      defer { client.close() }
      #expect(try Syscall.readFile(precious) == Array("precious\n".utf8))
      #expect(client.problems.contains { $0.hasPrefix("cannot count this session") }, "\(client.problems)")
    }
  }

  // MARK: - A crash loop (items 2 and 3)

  @Test func aCrashLoopKeepsRingsBoundedAndLosesNoSession() throws {
    let directory = TestDirectory()
    let launches = 30
    for _ in 0..<launches {
      let child = try ChildProcess(
        ChildProcess.testChild, ["client-crash-at-once", directory.path, "3", "1"],
        environment: ["SWIFT_BACKTRACE": "enable=no"])
      child.wait(seconds: 120)
      try #require(child.terminatingSignal == SIGSEGV, "\(child.readRemaining(seconds: 1))")
    }
    // Each launch died before its background work: rings/ holds the 4 sessions left for a full
    // run and the last launch's own (ring, crash record, session file each) — not 30.
    let rings = files(under: directory.path + "/rings")
    let sessions = Set(rings.map { Syscall.baseName(of: $0.path).prefix { $0 != "." } })
    #expect(sessions.count <= 5, "\(rings.map(\.path))")
    // Three files a session; a launch killed while its background work rewrote its session file
    // also leaves that write's temporary file (seen in full runs, two of them on a loaded
    // machine): one at most per listed session, removed with the session's files.
    let temporary = rings.filter { Syscall.baseName(of: $0.path).contains(".tmp-") }
    #expect(rings.count - temporary.count <= 15, "\(rings.map(\.path))")
    let temporarySessions = temporary.map { Syscall.baseName(of: $0.path).prefix { $0 != "." } }
    #expect(Set(temporarySessions).count == temporarySessions.count, "\(temporary.map(\.path))")
    #expect(temporary.count <= sessions.count, "\(temporary.map(\.path))")
    #expect(rings.reduce(0) { $0 + $1.size } <= 5 * (2 << 20))
    // At most 3 reports pending, though no launch had a destination.
    let store = try ReportStore(directory: directory.path)
    #expect(store.list(.pending).reports.count <= 3)

    // The next launch that lives processes the rest: every session is counted, none is lost.
    try ProcessWideState.exclusive {
      let client = try CrumbsClient.start(configuration(directory, records: 3, megabytes: 1), shared: false)
      defer { client.close() }
      // The run may take long on a busy machine: wait for it with a wide margin.
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      let metrics = try #require(client.sessionMetrics)
      #expect(metrics.sessions == launches + 1)
      #expect(metrics.crashedSessions == launches)
      #expect(client.hasCrashedInLastSession)
      let left = files(under: directory.path + "/rings").map { Syscall.baseName(of: $0.path) }
      #expect(left.allSatisfy { $0.hasPrefix(client.sessionID.description) }, "\(left)")
      #expect(client.store.list(.pending).reports.count == 3)
      #expect(files(under: client.store.path).reduce(0) { $0 + $1.size } <= 1_000_000)
    }
  }

  @Test func queuedSessionSummariesAreBoundedWithoutADestination() throws {
    let directory = TestDirectory()
    let metrics = SessionMetrics(installID: "install")
    var sessions: [PreviousSession] = []
    for _ in 0..<130 {
      let session = PreviousSession(
        sessionID: SessionID(), end: .clean, report: nil, receivedMemoryWarning: false,
        startedWallNanoseconds: 1)
      SessionSummaryQueue.enqueue([session], metrics: metrics, directory: directory.path)
      sessions.append(session)
    }
    let queued = try Syscall.directoryEntries(directory.path + "/session-summaries")
    #expect(queued.count == 100)
    // The newest are the ones kept.
    #expect(
      Set(queued.map { $0.split(separator: "-", maxSplits: 1)[1] })
        == Set(sessions.suffix(100).map { "\($0.sessionID).json" }))
  }

  // MARK: - Leftovers of dead writers (item 4)

  @Test(arguments: ["report", "delivery-state", "reason", "session-metrics"])
  func aWriterKilledInsideAWriteLeavesNothingAfterTheNextStart(what: String) throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["die-mid-write", directory.path, what],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let pid = try #require(child.value(after: "pid ").flatMap { Int32($0) })
    let stopped = child.readLine(seconds: 60)
    child.signal(SIGKILL)
    child.wait(seconds: 60)
    try #require(stopped == "in-write", "the child did not stop inside the write: \(stopped ?? "nothing")")
    // The child's pid namespace is this process's.
    let namespace = SystemFacts.pidNamespace(of: "self")

    func leftovers() -> [String] {
      files(under: directory.path).map(\.path).filter { $0.hasSuffix(".tmp-\(pid)-\(namespace)") }
        + ((try? Syscall.directoryEntries(directory.path + "/reports/.incoming")) ?? [])
    }
    #expect(!leftovers().isEmpty, "the kill left nothing to clean up")
    // Temporary files of a process that still runs, and of this one, are left alone (and of
    // writers that did not name their pid namespace, for an hour).
    let sleeper = try ChildProcess("/bin/sleep", ["600"])
    defer {
      sleeper.signal(SIGKILL)
      sleeper.wait()
    }
    let alive = [
      directory.path + "/session-metrics.json.tmp-\(sleeper.pid)-\(namespace)",
      directory.path + "/reports/pending/x.tmp-\(getpid())-\(namespace)",
      directory.path + "/reports/pending/y.tmp-\(pid)",
    ]
    for path in alive { try Syscall.writeFileAtomically(path, [1], durable: false) }

    // The next start removes, in its background work, what the dead writer left.
    try ProcessWideState.exclusive {
      let client = try CrumbsClient.start(configuration(directory), shared: false)
      defer { client.close() }
      let outcome = try #require(client.waitForPreviousSessions(timeout: 60))
      #expect(outcome.sessions.count == 1)  // the killed client's own session, reported
      #expect(!outcome.removedLeftovers.isEmpty)
    }
    #expect(leftovers().isEmpty, "\(leftovers())")
    for path in alive { #expect(Syscall.fileExists(path), "\(path)") }
  }

  @Test func aStoreThatMeetsAFullDiskLeavesNoIncomingFolder() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["store-on-full-disk", directory.path],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let output = child.readRemaining(seconds: 60)
    child.wait(seconds: 60)
    #expect(child.exitCode == 0, "\(output)")
    #expect(output.contains("stored no"))
    #expect(output.contains("File too large"), "\(output)")
    #expect(output.contains("incoming 0\n"), "\(output)")
    #expect(try Syscall.directoryEntries(directory.path + "/reports/.incoming").isEmpty)
  }

  @Test(arguments: ["report", "session-metrics"])
  func aLiveWriterInAnotherPidNamespaceKeepsWhatItIsWriting(what: String) throws {
    // Issue 21 case 13: two containers (or an app and its sidecar) sharing the directory each
    // judged the other's live writes by a pid that means nothing in their own namespace. The
    // writer runs in a pid namespace of its own (unshare, as root) with a pid that is free here.
    let directory = TestDirectory()
    let free = try #require(
      (20000..<30000).map { Int32($0) }.first { kill($0, 0) != 0 && errno == ESRCH }, "no free pid")
    let child = try ChildProcess(
      "/usr/bin/unshare",
      [
        "--pid", "--fork", "--mount-proc", "--kill-child", "/bin/sh", "-c",
        "echo \(free - 1) > /proc/sys/kernel/ns_last_pid && \"$0\" \"$@\"; true",
        ChildProcess.testChild, "die-mid-write", directory.path, what,
      ], environment: ["SWIFT_BACKTRACE": "enable=no"])
    defer {
      child.signal(SIGKILL)  // --kill-child: the namespace goes with it
      child.wait(seconds: 60)
    }
    let pid = child.value(after: "pid ")
    let stopped = child.readLine(seconds: 60)
    try #require(stopped == "in-write", "pid \(pid ?? "?"), then \(stopped ?? "nothing")")
    #expect(pid == String(free), "the writer's pid in its namespace")
    func inWrite() -> [String] {
      files(under: directory.path).map(\.path).filter { $0.contains(".tmp-") }
        + ((try? Syscall.directoryEntries(directory.path + "/reports/.incoming")) ?? [])
    }
    let before = inWrite()
    #expect(!before.isEmpty, "the writer has nothing under way")

    // What a client starting here would clean, while the writer there still runs.
    let removed =
      try ReportStore(directory: directory.path).removeLeftovers()
      + AbandonedFiles.removeTemporaryFiles(inFolder: directory.path)
    #expect(removed.isEmpty, "\(removed)")
    #expect(inWrite() == before)
  }
}
