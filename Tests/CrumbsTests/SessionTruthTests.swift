import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// What the next launch says about a session (issue 10, "Reports that tell the truth"): how it
/// ended, how many sessions there were, which release and attributes it had, and why a crash
/// left no record. Every session here is a real child process.
@Suite struct SessionTruthTests {
  /// The children crash without the Swift backtracer: it only slows their death.
  let childEnvironment = ["SWIFT_BACKTRACE": "enable=no"]

  func nextLaunchConfiguration(_ directory: TestDirectory) -> CrumbsConfiguration {
    var configuration = CrumbsConfiguration(directory: directory.path)
    // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
    // would be true, and one more report than these tests count (HangTests watch children).
    configuration.hangs = nil
    configuration.appName = "next-launch"
    configuration.appVersion = "2.0"
    configuration.automaticBreadcrumbs = nil
    return configuration
  }

  /// Reads what the children left without starting a client in this process.
  func processLeftovers(_ directory: TestDirectory) throws -> PostMortemOutcome {
    PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run()
  }

  @Test func processesThatExitSoonAfterStartAreCleanAndEveryStartIsCounted() throws {
    let directory = TestDirectory()
    // At once, each pinned to one CPU: their background threads get no time before they exit,
    // and their session counts race for the same file.
    let count = 8
    var children: [ChildProcess] = []
    for _ in 0..<count {
      children.append(try ChildProcess(ChildProcess.testChild, ["client-quick-exit", directory.path]))
    }
    for child in children {
      child.wait(seconds: 120)
      #expect(child.exitCode == 0, "\(child.readRemaining(seconds: 1))")
    }
    try ProcessWideState.exclusive {
      let client = try CrumbsClient.start(nextLaunchConfiguration(directory), shared: false)
      defer { client.close() }
      // The run may take long on a busy machine: wait for it with a wide margin.
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      let metrics = try #require(client.sessionMetrics)
      // What the runs said (a count that failed, a ring left unclaimed): seen once with 4 of 8
      // clean sessions counted under load, and not reproduced since.
      let said =
        "problems: \(client.problems); left in rings/: "
        + "\((try? Syscall.directoryEntries(directory.path + "/rings")) ?? [])"
      #expect(metrics.sessions == count + 1, "\(said)")
      #expect(metrics.cleanSessions == count, "\(said)")
      #expect(metrics.abnormalSessions == 0)
      #expect(metrics.crashedSessions == 0)
      let reports = client.store.list(.pending).reports.map(\.report)
      #expect(reports.isEmpty, "\(reports.map { "\($0.exceptionType): \($0.exceptionMessage)" })")
    }
  }

  /// Starts `count` children that wait at one gate, releases them together and returns their
  /// outputs ("started N …" or "error …"), checking that each exited 0.
  func startTogether(_ count: Int, in directory: TestDirectory, round: Int) throws -> [String] {
    let gate = try StartGate(in: directory, name: "gate-\(round)")
    var children: [ChildProcess] = []
    for _ in 0..<count {
      children.append(
        try ChildProcess(
          ChildProcess.testChild, ["client-start-at-gate", directory.path, gate.path],
          environment: childEnvironment))
    }
    let late = gate.release(children)
    #expect(late.isEmpty, "\(late.count) children never reached the gate")
    return children.map { child in
      let output = child.readRemaining(seconds: 120)
      child.wait(seconds: 120)
      #expect(child.exitCode == 0, "\(output)")
      return output
    }
  }

  @Test func processesStartingTogetherAllStartAndNeverClaimARingBeingCreated() throws {
    // Issue 11 item 6: a starter's claim of leftover rings used to take another starter's ring
    // between its O_EXCL create and its flock ("cannot create ring: flock(…): Resource
    // temporarily unavailable", and the fresh ring quarantined as "only 0 bytes").
    let directory = TestDirectory()
    for round in 0..<8 {
      for output in try startTogether(10, in: directory, round: round) {
        #expect(output.hasPrefix("started 0 "), "round \(round): \(output)")
      }
      let quarantined = (try? Syscall.directoryEntries(directory.path + "/quarantine")) ?? []
      #expect(quarantined.isEmpty, "round \(round): quarantined \(quarantined)")
      if !quarantined.isEmpty { break }
    }
  }

  @Test func crashedSessionsAndStartsTogetherAreAllCounted() throws {
    // Issue 11 item 5: 10 crashed sessions, then 5 processes starting at once, each counting its
    // start and processing some of the crashed sessions: no count may be lost.
    let directory = TestDirectory()
    for _ in 0..<10 {
      let child = try ChildProcess(
        ChildProcess.testChild, ["client-crash-at-once", directory.path], environment: childEnvironment)
      child.wait(seconds: 120)
      #expect(child.terminatingSignal == SIGSEGV)
    }
    for output in try startTogether(5, in: directory, round: 0) {
      #expect(output.hasPrefix("started 0 "), "\(output)")
    }
    try ProcessWideState.exclusive {
      let client = try CrumbsClient.start(nextLaunchConfiguration(directory), shared: false)
      defer { client.close() }
      // The run may take long on a busy machine: wait for it with a wide margin.
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      let metrics = try #require(client.sessionMetrics)
      #expect(metrics.sessions == 16)
      #expect(metrics.crashedSessions == 10)
      #expect(metrics.cleanSessions == 5)
      #expect(metrics.abnormalSessions == 0)
      #expect(client.store.list(.pending).reports.count == 10)
    }
  }

  @Test func anEndedSessionProcessedAgainIsCountedOnce() throws {
    // A run killed after counting a session but before deleting its files leaves it to the next.
    let directory = TestDirectory()
    try SessionMetricsFile.countStart(directory: directory.path)
    let session = PreviousSession(
      sessionID: SessionID(), end: .abnormalTermination, report: nil, receivedMemoryWarning: false,
      startedWallNanoseconds: 1)
    let first = try SessionMetricsFile.countEnd(session, directory: directory.path)
    let again = try SessionMetricsFile.countEnd(session, directory: directory.path)
    #expect(first == again)
    #expect(again.sessions == 1)
    #expect(again.abnormalSessions == 1)
    #expect(try SessionMetricsFile.read(directory: directory.path) == again)
  }

  @Test func countsAtTheirLimitInDamagedFilesStayThereInsteadOfTrapping() throws {
    // session-starts and session-metrics.json are read at every start, inside the app.
    let directory = TestDirectory()
    try Syscall.writeFileAtomically(
      CrumbsDirectory(directory.path).path(.sessionStarts), Array("9223372036854775807\n".utf8))
    try Syscall.writeFileAtomically(
      CrumbsDirectory(directory.path).path(.sessionMetrics),
      Array(
        (#"{"installID":"x","sessions":0,"crashedSessions":9223372036854775807,"#
          + #""abnormalSessions":9223372036854775807,"cleanSessions":9223372036854775807}"#).utf8))
    try SessionMetricsFile.countStart(directory: directory.path)
    let session = PreviousSession(
      sessionID: SessionID(), end: .crash, report: nil, receivedMemoryWarning: false,
      startedWallNanoseconds: 1)
    let metrics = try SessionMetricsFile.countEnd(session, directory: directory.path)
    #expect(metrics.sessions == Int.max)
    #expect(metrics.crashedSessions == Int.max)
    #expect(metrics.crashFreeRate > 0.33 && metrics.crashFreeRate < 0.34)

    try Syscall.writeFileAtomically(CrumbsDirectory(directory.path).path(.sessionStarts), Array("-7\n".utf8))
    try SessionMetricsFile.countStart(directory: directory.path)
    #expect(try SessionMetricsFile.read(directory: directory.path).sessions == 1)
  }

  /// A `session-metrics.json` that cannot be read is moved to quarantine/ with its reason and
  /// named, never overwritten: the counts start again beside it.
  @Test func damagedSessionMetricsAreQuarantinedAndNamedNotOverwritten() throws {
    let directory = TestDirectory()
    let damaged = Array(#"{"installID":"kept","sessions":"#.utf8)
    try Syscall.writeFileAtomically(CrumbsDirectory(directory.path).path(.sessionMetrics), damaged)
    try SessionMetricsFile.countStart(directory: directory.path)
    let session = PreviousSession(
      sessionID: SessionID(), end: .crash, report: nil, receivedMemoryWarning: false,
      startedWallNanoseconds: 1)
    var problems: [String] = []
    let metrics = try SessionMetricsFile.countEnd(session, directory: directory.path) { problems.append($0) }
    #expect(metrics.crashedSessions == 1)
    #expect(problems.count == 1 && problems[0].contains("session metrics"), "\(problems)")
    #expect(problems.first?.contains("quarantine/session-metrics.json") == true, "\(problems)")
    let quarantine = directory.path + "/quarantine"
    #expect(try Syscall.readFile(quarantine + "/session-metrics.json") == damaged)
    #expect(Syscall.fileExists(quarantine + "/session-metrics.json.reason"))
    // The new file reads back, with nothing more to say.
    problems = []
    #expect(try SessionMetricsFile.read(directory: directory.path) { problems.append($0) } == metrics)
    #expect(problems.isEmpty, "\(problems)")
  }

  @Test func aSecondStartInOneProcessFailsAndOneCrashGivesOneReport() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-start-twice", directory.path], environment: childEnvironment)
    let second = child.value(after: "second-start ")
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV)
    #expect(second?.hasPrefix("error") == true, "\(second ?? "nothing printed")")
    let outcome = try processLeftovers(directory)
    let reports = outcome.reports.map(\.report)
    #expect(reports.count == 1, "\(reports.map { "\($0.kind): \($0.exceptionMessage)" })")
    #expect(reports.first?.kind == .crash)
  }

  @Test func aSecondStartThrowsWithTheRunningClientUntilItIsClosed() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let first = try CrumbsClient.start(nextLaunchConfiguration(directory), shared: false)
      do throws(CrumbsError) {
        let second = try CrumbsClient.start(nextLaunchConfiguration(directory), shared: false)
        second.close()
        Issue.record("a second start succeeded")
      } catch {
        guard case .alreadyStarted(let running) = error else {
          Issue.record("unexpected error \(error)")
          first.close()
          return
        }
        #expect(running === first)
      }
      first.close()
      let again = try CrumbsClient.start(nextLaunchConfiguration(directory), shared: false)
      #expect(again !== first)
      again.close()
    }
  }

  @Test func aCrashReportCarriesTheVersionAttributesAndAttachmentsOfTheSessionThatCrashed() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-metadata", directory.path], environment: childEnvironment)
    #expect(child.readLines(until: "crashing", seconds: 60).last == "crashing")
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV)
    try ProcessWideState.exclusive {
      // A deploy: the next launch is another release.
      let client = try CrumbsClient.start(nextLaunchConfiguration(directory), shared: false)
      defer { client.close() }
      let stored = try #require(client.waitForPreviousSessions()?.lastSession?.report)
      let report = stored.report
      #expect(report.kind == .crash)
      #expect(report.resource["service.version"] == "1.0")
      #expect(report.attributes == ["region": "eu-west-1"])
      let attachment = report.attachments.first { $0.name == "attachment-app.log" }
      #expect(attachment?.omittedReason == nil)
      #expect(attachment?.size == "last log line\n".utf8.count)
      #expect(
        (try? Syscall.readFile(stored.attachmentPath("attachment-app.log"))) == Array("last log line\n".utf8))
    }
  }

  @Test func aCrashOnASignalAnotherHandlerTookSaysSoInItsReport() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-handler-replaced", directory.path, "crash"],
      environment: childEnvironment)
    let noticed = child.value(after: "noticed ")
    child.wait(seconds: 120)
    #expect(noticed == "yes")
    #expect(child.terminatingSignal == SIGSEGV)
    let outcome = try processLeftovers(directory)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionMessage.contains("SIGSEGV"), "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.contains("replaced"), "\(report.exceptionMessage)")
    #expect(report.resource["service.version"] == "1.0")
  }

  @Test func aHandlerReplacedRightBeforeACrashIsNamedInItsReport() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-handler-replaced", directory.path, "at-once"],
      environment: childEnvironment)
    #expect(child.value(after: "crashing") != nil)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV)
    let outcome = try processLeftovers(directory)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.kind == .abnormalTermination)
    #expect(report.exceptionMessage.contains("replaced"), "\(report.exceptionMessage)")
    #expect(outcome.problems.contains { $0.contains("SIGSEGV") }, "\(outcome.problems)")
  }

  @Test func aHandlerReplacedBeforeACleanExitIsMentionedByTheNextLaunch() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-handler-replaced", directory.path, "exit"],
      environment: childEnvironment)
    #expect(child.value(after: "exiting") != nil)
    child.wait(seconds: 120)
    #expect(child.exitCode == 0)
    let outcome = try processLeftovers(directory)
    #expect(outcome.reports.isEmpty)
    #expect(outcome.lastSession?.end == .clean)
    #expect(outcome.problems.contains { $0.contains("SIGABRT") }, "\(outcome.problems)")
  }

  @Test func aCrashBeforeTheSessionFileIsWrittenIsReportedWithTheEnvironmentsResource() throws {
    // Issue 21 case 10: the child's background work is held before it starts, so the session
    // file is never written; the crash comes as soon as `start` returns.
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash-before-background", directory.path],
      environment: childEnvironment.merging([
        "OTEL_SERVICE_NAME": "checkout-env",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=staging,team=payments",
      ]) { $1 })
    let output = child.readRemaining(seconds: 120)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV, "\(output)")
    let left = try Syscall.directoryEntries(directory.path + "/rings")
    #expect(!left.contains { $0.hasSuffix(".session.json") }, "a session file was written: \(left)")

    let outcome = try processLeftovers(directory)
    let report = try #require(outcome.reports.first?.report, "\(outcome.problems)")
    #expect(report.kind == .crash)
    #expect(report.resource["service.name"] == "checkout-env", "\(report.resource)")
    #expect(report.resource["deployment.environment"] == "staging", "\(report.resource)")
    #expect(report.resource["team"] == "payments", "\(report.resource)")
  }

  @Test func aCrashBeforeTheBackgroundWorkKeepsTheAppsRedactionRules() throws {
    // Issue 38 (a flaky ClosingSpanTests run): the session file, and the app's redaction rules
    // in it, were written only by the background work; a crash before it ran was redacted by
    // `crumbs collect` with the default rules alone, and an e-mail address went out.
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash-before-background", directory.path, "redacting"],
      environment: childEnvironment)
    let output = child.readRemaining(seconds: 120)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV, "\(output)")

    // As the collector processes it: no configuration of the app's, the default rules.
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run()
    let stored = try #require(outcome.reports.first, "\(outcome.problems)")
    let trail = String(
      decoding: try LZ4Frame.decompress(try Syscall.readFile(stored.attachmentPath(TrailAttachment.name))),
      as: UTF8.self)
    #expect(trail.contains("mailing "), "\(trail)")
    #expect(!trail.contains("alice@example.com"), "\(trail)")
  }

  @Test func aRelativeDirectoryStillWorksAfterTheAppChangesItsWorkingDirectory() throws {
    // Issue 21 case 13: the session file, written after the chdir, went to the new working
    // directory (or nowhere), and the crash was reported without what was set after it.
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-relative-chdir", directory.path], environment: childEnvironment)
    let output = child.readRemaining(seconds: 120)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV, "\(output)")
    #expect(try Syscall.directoryEntries(directory.path + "/elsewhere").isEmpty)

    let crumbs = directory.path + "/crumbs"
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: crumbs), store: try ReportStore(directory: crumbs)
    ).run()
    let report = try #require(outcome.reports.first?.report, "\(outcome.problems)")
    #expect(report.kind == .crash)
    #expect(report.attributes["after.chdir"] == "yes", "\(report.attributes)")
  }
}
