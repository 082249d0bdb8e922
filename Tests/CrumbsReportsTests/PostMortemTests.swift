import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct PostMortemTests {
  /// Runs the processor until it has seen `expectingSessions` sessions (bounded). A child
  /// spawned by a test running in parallel holds a copy of every open file, and so of a ring's
  /// flock, from its fork until its exec; a ring closed at that moment looks live for a moment.
  func run(_ rings: RingDirectory, _ store: ReportStore, expectingSessions: Int) -> PostMortemOutcome {
    var outcome = PostMortemProcessor(directory: rings, store: store).run()
    let deadline = ChildProcess.now() + 10
    while outcome.sessions.count < expectingSessions, ChildProcess.now() < deadline {
      let more = PostMortemProcessor(directory: rings, store: store).run()
      outcome.sessions += more.sessions
      outcome.quarantined += more.quarantined
      outcome.problems += more.problems
    }
    return outcome
  }

  /// Leaves a ring that looks like a process that died without a clean exit.
  func leaveDeadRing(_ directory: RingDirectory, messages: [String]) throws -> SessionID {
    let ring = try directory.createRing()
    for message in messages { ring.append(message, level: .info, type: .manual, attributes: ["k": "v"]) }
    let session = ring.sessionID
    ring.close(clean: false)
    return session
  }

  @Test func aKilledChildBecomesOneAbnormalTerminationReportWithItsTrail() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["append-forever", directory.path, "2", "1024"])
    let ringPath = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")
    let deadline = ChildProcess.now() + 30
    while ((try? RingReader.read(file: ringPath))?.header.appendsClaimed ?? 0) < 500,
      ChildProcess.now() < deadline
    {}
    child.signal(SIGKILL)
    child.wait()

    let rings = try RingDirectory(path: directory.path)
    let store = try ReportStore(directory: directory.path)
    let reader = SessionID()
    let outcome = PostMortemProcessor(directory: rings, store: store).run(reportingSession: reader)
    #expect(outcome.problems.isEmpty)
    #expect(outcome.hasCrashedInLastSession)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionType == "AbnormalTermination" || report.exceptionType == "OutOfMemory")
    #expect(report.reportingSessionID == reader.description)
    #expect(report.resource["process.pid"] == String(child.pid))
    #expect(report.breadcrumbs.count > 0)
    #expect(report.breadcrumbs.attachment == TrailAttachment.name)

    // The attachment is an LZ4 frame the lz4 CLI reads, holding the ring's breadcrumbs.
    let stored = try #require(outcome.reports.first)
    let attachment = stored.attachmentPath(TrailAttachment.name)
    let lines = try runLZ4Decompress(attachment).split(separator: "\n")
    #expect(lines.count == report.breadcrumbs.count)
    for line in lines {
      let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
      #expect(
        Set(object.keys).isSuperset(of: [
          "timestamp", "id", "seq", "thread", "level", "type", "message", "attributes",
        ]))
      let message = try #require(object["message"] as? String)
      let attributes = try #require(object["attributes"] as? [String: String])
      #expect(message == "t=\(attributes["t"] ?? "?") n=\(attributes["n"] ?? "?")")
    }
    // The ring was consumed: processing again finds nothing and makes no second report.
    #expect(!Syscall.fileExists(ringPath))
    let again = PostMortemProcessor(directory: rings, store: store).run()
    #expect(again.sessions.isEmpty)
    #expect(store.list(.pending).reports.count == 1)
  }

  /// A client writes the session file just after `start` returns (issue 14: creating a file cost
  /// start 0.1–0.3 ms); a session that ends before that, or whose file is lost, is still
  /// reported with its own version, from its ring's header, not with the reading launch's.
  @Test func aSessionThatLeftNoSessionFileIsReportedWithTheVersionInItsRing() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    var options = RingOptions()
    options.appVersion = "3.2.1"
    let ring = try rings.createRing(options: options)
    ring.append("last words", level: .info, type: .manual)
    ring.close(clean: false)
    #expect(try RingReader.read(file: ring.path).header.appVersion == "3.2.1")
    #expect(!Syscall.fileExists(RingDirectory.sessionFilePath(forRing: ring.path)))

    let store = try ReportStore(directory: directory.path)
    var processor = PostMortemProcessor(directory: rings, store: store)
    processor.appVersion = "9.9"  // the reading launch's: not the one that ended
    let report = try #require(processor.run().lastSessionCrashReport)
    #expect(report.kind == .abnormalTermination)
    #expect(report.resource["service.version"] == "3.2.1")
  }

  @Test func aCleanExitProducesNothing() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append("bye")
    ring.close(clean: true)
    let store = try ReportStore(directory: directory.path)
    let outcome = run(rings, store, expectingSessions: 1)
    #expect(outcome.sessions.map(\.end) == [.clean])
    #expect(!outcome.hasCrashedInLastSession)
    #expect(outcome.lastSessionCrashReport == nil)
    #expect(store.list(.pending).reports.isEmpty)
    #expect(try Syscall.directoryEntries(rings.ringsPath).isEmpty)
  }

  @Test func theProcessorNeverTouchesALiveRingOrItsOwn() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let live = try rings.createRing()
    defer { live.close() }
    let store = try ReportStore(directory: directory.path)
    let outcome = PostMortemProcessor(directory: rings, store: store).run(reportingSession: live.sessionID)
    #expect(outcome.sessions.isEmpty)
    #expect(Syscall.fileExists(live.path))
  }

  @Test func twoProcessorsAtOnceMakeExactlyOneReportPerSession() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    var sessions: Set<String> = []
    for index in 0..<6 {
      sessions.insert(try leaveDeadRing(rings, messages: ["session \(index)"]).description)
    }
    let store = try ReportStore(directory: directory.path)
    let results = OutcomeBox()
    onThreads(2) { _ in
      results.add(PostMortemProcessor(directory: rings, store: store).run())
    }
    results.add(run(rings, store, expectingSessions: 6 - results.reportCount))
    let stored = store.list(.pending).reports
    #expect(Set(stored.map(\.report.id)) == sessions)
    #expect(stored.count == 6)
    #expect(results.reportCount == 6)
  }

  @Test func aClaimLeftByAProcessorKilledMidwayIsTakenOver() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let session = try leaveDeadRing(rings, messages: ["before the first processor died"])
    // A processor claims it, then "dies" (releases its lock without finishing). A child a
    // parallel test spawns holds the ring's lock from its fork to its exec: try again (bounded).
    var (claimed, _) = rings.claimLeftovers()
    let deadline = ChildProcess.now() + 10
    while claimed.isEmpty, ChildProcess.now() < deadline { claimed = rings.claimLeftovers().claimed }
    #expect(claimed.count == 1)
    #expect(claimed.first?.path.hasSuffix(".ring.claimed") == true)
    claimed.forEach { $0.release() }
    let store = try ReportStore(directory: directory.path)
    let outcome = run(rings, store, expectingSessions: 1)
    #expect(outcome.reports.map(\.report.id) == [session.description])
  }

  @Test func aDamagedRingIsQuarantinedWithItsReasonAndTheRunGoesOn() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let good = try leaveDeadRing(rings, messages: ["fine"])
    let broken = rings.ringsPath + "/\(SessionID()).ring"
    try Syscall.writeFileAtomically(broken, Array("garbage, not a ring".utf8))
    let store = try ReportStore(directory: directory.path)
    let outcome = run(rings, store, expectingSessions: 1)
    #expect(outcome.reports.map(\.report.id) == [good.description])
    #expect(outcome.quarantined.count == 1)
    let quarantined = try #require(outcome.quarantined.first)
    #expect(quarantined.reason.contains("not a Crumbs ring"))
    #expect(Syscall.fileExists(quarantined.quarantinedPath))
  }

  @Test func memoryPressureEvidenceNamesOutOfMemory() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append(
      "memory pressure high", level: .error, type: .system,
      attributes: ["memory.pressure": "some avg10=42.00"])
    ring.markMemoryWarning()
    ring.close(clean: false)
    let store = try ReportStore(directory: directory.path)
    let outcome = run(rings, store, expectingSessions: 1)
    #expect(outcome.hasReceivedMemoryWarningInLastSession)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.exceptionType == "OutOfMemory")
    #expect(report.exceptionMessage.hasPrefix("likely out of memory"))
    #expect(report.evidence.contains("the session recorded memory-pressure warnings"))
    #expect(report.evidence.contains { $0.contains("memory pressure high") })
  }

  @Test func withoutEvidenceOutOfMemoryIsNeverClaimed() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    _ = try leaveDeadRing(rings, messages: ["ordinary"])
    let outcome = run(rings, try ReportStore(directory: directory.path), expectingSessions: 1)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.exceptionType == "AbnormalTermination")
    #expect(report.evidence.isEmpty)
    #expect(!outcome.hasReceivedMemoryWarningInLastSession)
  }

  @Test func cgroupOOMKillCounterThatRoseIsEvidence() throws {
    let directory = TestDirectory()
    let root = directory.file("cgroup")
    try Syscall.makeDirectories(root + "/app.slice")
    try Syscall.writeFileAtomically(
      root + "/app.slice/memory.events", Array("low 0\nhigh 3\nmax 1\noom 1\noom_kill 2\n".utf8))
    var header = RingHeaderInfo.unknown
    header.cgroup = "v2:/app.slice"
    header.cgroupOOMKillsAtStart = 1
    let contents = RingContents(
      header: header, breadcrumbs: [], counts: SlotCounts(), timesAreCalibrated: true)
    #expect(
      OOMEvidence.gather(contents, cgroupRoot: root) == [
        "the cgroup's oom_kill count rose from 1 to 2 (v2:/app.slice)"
      ])
    header.cgroupOOMKillsAtStart = 2
    #expect(
      OOMEvidence.gather(
        RingContents(header: header, breadcrumbs: [], counts: SlotCounts(), timesAreCalibrated: true),
        cgroupRoot: root
      ).isEmpty)
    // cgroup v1: memory.oom_control.
    try Syscall.makeDirectories(root + "/memory/svc")
    try Syscall.writeFileAtomically(
      root + "/memory/svc/memory.oom_control", Array("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n".utf8))
    #expect(SystemFacts.cgroupOOMKills(cgroup: "v1:/svc", root: root) == 5)
  }
}

final class OutcomeBox: @unchecked Sendable {
  private let lock = NSLock()
  private var outcomes: [PostMortemOutcome] = []
  func add(_ outcome: PostMortemOutcome) { lock.withLock { outcomes.append(outcome) } }
  var reportCount: Int { lock.withLock { outcomes.map(\.reports.count).reduce(0, +) } }
}
