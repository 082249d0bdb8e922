import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// Crash loops (issue 24, part 4): `client.crashLoop` right after `start`, from what the previous
/// launches left, processed or not; `crumbs.crash_loop.count` on the reports. Every launch is a
/// real child process (the test child's `client-loop` scenario).
@Suite struct CrashLoopTests {
  /// The children crash without the Swift backtracer: it only slows their death.
  let childEnvironment = ["SWIFT_BACKTRACE": "enable=no"]

  /// What one launch printed and how it ended.
  struct Launch {
    var lines: [String]
    var signal: Int32?
    var exitCode: Int32?
    /// The `loop …` line's fields (nil: "loop none").
    var loop: [String: String]? {
      guard let line = lines.first(where: { $0.hasPrefix("loop ") }), line != "loop none" else { return nil }
      var fields: [String: String] = [:]
      var rest = Substring(line.dropFirst(5))
      // "signature=" is last and may hold spaces.
      if let range = rest.firstRange(of: " signature=") {
        fields["signature"] = String(rest[range.upperBound...])
        rest = rest[..<range.lowerBound]
      }
      for pair in rest.split(separator: " ") {
        let parts = pair.split(separator: "=", maxSplits: 1)
        if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
      }
      return fields
    }
    var count: Int? { loop.flatMap { $0["count"] }.flatMap { Int($0) } }
    var signature: String? { loop?["signature"] }
    var session: String? { lines.first { $0.hasPrefix("session ") }.map { String($0.dropFirst(8)) } }
    var problems: [String] { lines.filter { $0.hasPrefix("problem ") } }
  }

  func launch(_ directory: TestDirectory, _ mode: String) throws -> Launch {
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-loop", directory.path, mode], environment: childEnvironment)
    let output = child.readRemaining(seconds: 300)
    child.wait(seconds: 120)
    let launch = Launch(
      lines: output.split(separator: "\n").map(String.init), signal: child.terminatingSignal,
      exitCode: child.exitCode)
    #expect(launch.lines.first?.hasPrefix("loop ") == true, "\(mode): \(output)")
    switch mode {
    case "segv", "wait-segv": #expect(launch.signal == SIGSEGV, "\(mode): \(output)")
    case "fpe": #expect(launch.signal == SIGFPE, "\(mode): \(output)")
    case "wait-term": #expect(launch.signal == SIGTERM, "\(mode): \(output)")
    default: #expect(launch.exitCode == 0, "\(mode): \(output)")
    }
    return launch
  }

  /// The reports stored in `directory`, by the session they report.
  func reportsBySession(_ directory: TestDirectory) throws -> [String: [CrashReport]] {
    let store = try ReportStore(directory: directory.path)
    return Dictionary(grouping: store.list(.pending).reports.map(\.report), by: \.sessionID)
  }

  @Test func threeLaunchesCrashingTheSameWayAreALoopOfThreeAtTheFourthStartUntilACleanOne() throws {
    // Done-when (e). Each crashing launch holds its background work: it dies before processing
    // anything, as a launch in a crash loop does, so the fourth start sees three waiting rings.
    let directory = TestDirectory()
    var crashed: [Launch] = []
    for index in 0..<3 {
      let launch = try launch(directory, "segv")
      #expect(launch.count == (index == 0 ? nil : index), "\(launch.lines)")
      crashed.append(launch)
    }
    let fourth = try launch(directory, "wait-clean")
    #expect(fourth.count == 3, "\(fourth.lines)")
    let signature = try #require(fourth.signature)
    #expect(signature.hasPrefix("SIGSEGV CrumbsTestChild+0x"), "\(signature)")
    // The same crash, the same signature, whichever launch looked.
    #expect(crashed[2].signature == signature, "\(crashed[2].lines)")
    let first = try #require(fourth.loop?["first"].flatMap { UInt64($0) })
    let last = try #require(fourth.loop?["last"].flatMap { UInt64($0) })
    #expect(first < last)
    #expect(fourth.lines.contains("processed 3"), "\(fourth.lines)")
    #expect(fourth.problems.isEmpty, "\(fourth.problems)")

    // The reports the fourth launch made: each crash from the second on with its place in the
    // loop (a lone crash is no loop), the last with the loop's count; its own non-fatal report
    // with the count it started with.
    let reports = try reportsBySession(directory)
    for (index, launch) in crashed.enumerated() {
      let report = try #require(reports[launch.session ?? ""]?.first { $0.kind == .crash }, "\(reports.keys)")
      #expect(
        report.attributes[CrashLoopStep.attributeKey]?.text == (index == 0 ? nil : String(index + 1)),
        "\(report.attributes)")
    }
    let nonFatal = try #require(reports[fourth.session ?? ""]?.first, "\(reports.keys)")
    #expect(nonFatal.attributes[CrashLoopStep.attributeKey] == "3", "\(nonFatal.attributes)")

    let fifth = try launch(directory, "clean")
    #expect(fifth.loop == nil, "\(fifth.lines)")
  }

  @Test func sessionsProcessedByAnEarlierLaunchStillCountAndKeepTheirSignature() throws {
    let directory = TestDirectory()
    _ = try launch(directory, "segv")
    _ = try launch(directory, "segv")
    // The third launch processes the first two (their files leave rings/), then crashes.
    let third = try launch(directory, "wait-segv")
    #expect(third.count == 2, "\(third.lines)")
    #expect(third.lines.contains("processed 2"), "\(third.lines)")
    #expect(
      try Syscall.directoryEntries(directory.path + "/rings").filter { $0.hasSuffix(".crash") }.count == 1)
    let fourth = try launch(directory, "clean")
    #expect(fourth.count == 3, "\(fourth.lines)")
    #expect(fourth.signature == third.signature, "\(fourth.lines) \(third.lines)")
    #expect(fourth.signature?.hasPrefix("SIGSEGV ") == true, "\(fourth.lines)")
    // The fifth processes the third and the clean fourth; the sixth processes the fifth (clean:
    // the tally's reset) and crashes; the seventh counts the sixth alone.
    let fifth = try launch(directory, "wait-clean")
    #expect(fifth.loop == nil, "\(fifth.lines)")
    let sixth = try launch(directory, "wait-segv")
    #expect(sixth.loop == nil, "\(sixth.lines)")
    let seventh = try launch(directory, "clean")
    #expect(seventh.count == 1, "\(seventh.lines)")
    #expect(seventh.signature == third.signature, "\(seventh.lines)")
  }

  @Test func sessionsAreOrderedByTheirStartNotByWhenTheyWereProcessed() {
    // The processor goes newest first: a crash older than a clean session may reach the tally
    // after it, and must not count; a waiting clean session ends a loop of processed crashes.
    func session(_ started: UInt64, _ step: CrashLoopStep) -> PreviousSession {
      var session = PreviousSession(
        sessionID: SessionID(), end: .clean, report: nil, receivedMemoryWarning: false,
        startedWallNanoseconds: started)
      session.crashLoopStep = step
      return session
    }
    var tally = CrashLoopTally.Stored()
    #expect(CrashLoopTally.add(session(30, .counts(signature: "A")), to: &tally))
    #expect(CrashLoopTally.add(session(20, .resets), to: &tally))
    #expect(!CrashLoopTally.add(session(10, .counts(signature: "A")), to: &tally))
    #expect(!CrashLoopTally.add(session(15, .passes), to: &tally))
    #expect(tally.loop.map(\.started) == [30])
    var found = CrashLoop.count(waiting: [], tally: tally)
    #expect(
      found.loop
        == CrashLoop(
          count: 1, signature: "A", firstStartedWallNanoseconds: 30, lastStartedWallNanoseconds: 30))
    let waitingCrash = CrashLoopEvidence.Waiting(
      sessionID: SessionID(), startedWallNanoseconds: 40, step: .counts(signature: "B"))
    found = CrashLoop.count(waiting: [waitingCrash], tally: tally)
    #expect(found.loop?.count == 2)
    #expect(found.loop?.signature == nil)
    #expect(CrashLoop.bySession(found.counts) == [waitingCrash.sessionID: 2])
    let waitingClean = CrashLoopEvidence.Waiting(
      sessionID: SessionID(), startedWallNanoseconds: 35, step: .resets)
    found = CrashLoop.count(waiting: [waitingCrash, waitingClean], tally: tally)
    #expect(found.loop?.count == 1)
    #expect(found.loop?.signature == "B")
    // A long loop stays bounded: the oldest are folded into one count.
    var long = CrashLoopTally.Stored()
    for index in 0..<200 {
      _ = CrashLoopTally.add(session(UInt64(1000 + index), .counts(signature: "C")), to: &long)
    }
    #expect(long.loop.count == CrashLoopTally.maxEntries)
    #expect(long.earlier?.count == 200 - CrashLoopTally.maxEntries)
    found = CrashLoop.count(waiting: [], tally: long)
    #expect(
      found.loop
        == CrashLoop(
          count: 200, signature: "C", firstStartedWallNanoseconds: 1000, lastStartedWallNanoseconds: 1199))
  }

  @Test func aLoopOfTwoDifferentCrashesCountsAllWithNoSignature() throws {
    let directory = TestDirectory()
    let one = try launch(directory, "segv")
    let two = try launch(directory, "fpe")
    #expect(one.loop == nil && two.count == 1 && two.signature?.hasPrefix("SIGSEGV ") == true, "\(two.lines)")
    let three = try launch(directory, "segv")
    #expect(three.signature == "", "\(three.lines)")  // SIGSEGV then SIGFPE: they differ
    let four = try launch(directory, "clean")
    #expect(four.count == 3, "\(four.lines)")
    #expect(four.signature == "", "\(four.lines)")
  }

  @Test func aSessionStoppedBySIGTERMNeitherCountsNorEndsTheLoop() throws {
    // An orchestrator stopping a crash-looping app (a rolling restart, a scale-down) says
    // nothing about whether the app can start: the loop goes on through it.
    let directory = TestDirectory()
    let first = try launch(directory, "segv")
    let stopped = try launch(directory, "wait-term")
    #expect(stopped.count == 1, "\(stopped.lines)")
    let second = try launch(directory, "segv")
    #expect(second.count == 1, "\(second.lines)")
    let next = try launch(directory, "wait-clean")
    #expect(next.count == 2, "\(next.lines)")
    #expect(next.signature == second.signature && first.loop == nil, "\(next.lines)")
  }

  @Test func aMachineRestartAForkedChildAndAStopSayNothingAboutTheApp() {
    let otherBoot = SystemFacts.bootID.map { $0 ^ 0xFF }
    #expect(
      CrashLoopStep(end: .abnormalTermination, record: nil, bootID: otherBoot, parentSessionID: nil)
        == .passes)
    #expect(
      CrashLoopStep(end: .abnormalTermination, record: nil, bootID: SystemFacts.bootID, parentSessionID: nil)
        == .counts(signature: CrashLoopStep.abnormalSignature))
    #expect(CrashLoopStep(end: .crash, record: nil, bootID: nil, parentSessionID: SessionID()) == .passes)
    #expect(
      CrashLoopStep(end: .terminatedBySignal, record: nil, bootID: nil, parentSessionID: nil) == .passes)
    #expect(CrashLoopStep(end: .clean, record: nil, bootID: nil, parentSessionID: nil) == .resets)
  }

  @Test func aDamagedTallyIsReportedTakenAsEmptyAndQuarantinedNotOverwritten() throws {
    let directory = TestDirectory()
    let damaged = Array("{\"version\": 1, \"loop\": [".utf8)
    try Syscall.writeFileAtomically(CrumbsDirectory(directory.path).path(.crashLoopTally), damaged)
    let first = try launch(directory, "segv")
    #expect(first.loop == nil, "\(first.lines)")
    #expect(
      first.problems.contains { $0.contains("crash-loop tally") && $0.contains("damaged") }, "\(first.lines)")
    let second = try launch(directory, "wait-clean")
    #expect(second.count == 1, "\(second.lines)")
    #expect(second.lines.contains("processed 1"), "\(second.lines)")
    // The processed session replaced it, after moving the damaged bytes to quarantine/ with
    // their reason: kept, and named in the problems of the run that moved them.
    #expect(
      second.problems.contains {
        $0.contains("crash-loop tally") && $0.contains("quarantine/crash-loop.json")
      },
      "\(second.lines)")
    let quarantine = directory.path + "/quarantine"
    #expect(try Syscall.readFile(quarantine + "/crash-loop.json") == damaged)
    let reason = String(decoding: try Syscall.readFile(quarantine + "/crash-loop.json.reason"), as: UTF8.self)
    #expect(reason.hasPrefix("crash-loop tally damaged:"), "\(reason)")
    // Replaced by the processed session: readable again.
    let (tally, problem) = CrashLoopTally.read(directory: directory.path)
    #expect(problem == nil, "\(problem ?? "")")
    #expect(tally.loop.count == 1)
    let third = try launch(directory, "clean")
    #expect(third.loop == nil, "\(third.lines)")
    #expect(third.problems.isEmpty, "\(third.lines)")
  }
}
