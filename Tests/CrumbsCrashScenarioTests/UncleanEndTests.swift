// UncleanEndTests.swift — issue 24's "every unclean end explained", end to end: a real child
// (the test child's unclean-end scenarios) is stopped and killed, or ended by a resource limit,
// or leaves a ring whose boot id this test changes; the next launch (PostMortemProcessor, as in
// PostMortemTests) makes a report that names the cause. No sleeps: every wait is on the child's
// pipe or its exit, bounded.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Every unclean end explained, end to end")
struct UncleanEndTests {
  /// What the next launch makes of what `directory` holds: the one session and its report.
  func nextLaunch(_ directory: TestDirectory) throws -> (session: PreviousSession, report: CrashReport?) {
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    #expect(outcome.sessions.count == 1, "\(outcome.problems)")
    let session = try #require(outcome.sessions.first)
    return (session, session.report?.report)
  }

  /// Done-when (d): SIGTERM taken over by the app, acknowledged, then SIGKILL 1 s later
  /// without an exit.
  @Test func aShutdownKilledAfterSIGTERMSaysItDidNotFinish() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["shutdown-stalls", directory.path])
    let ring = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")
    child.signal(SIGTERM)
    #expect(child.readLine() == "stopping")
    #expect(child.readLine() == "drained 1 s")
    child.signal(SIGKILL)
    child.wait()
    #expect(child.terminatingSignal == SIGKILL)
    let header = try RingReader.read(file: ring).header
    #expect(header.state == .running)
    #expect(header.uncleanEndSigns.stopRequest?.signal == SIGTERM)

    let (session, report) = try nextLaunch(directory)
    #expect(session.end == .abnormalTermination)
    #expect(session.uncleanEndCause == .shutdownTimeout)
    #expect(!session.machineRestarted)
    let made = try #require(report)
    #expect(made.kind == .abnormalTermination)
    #expect(made.exceptionType == "ShutdownTimeout")
    #expect(made.exceptionMessage.hasPrefix("shutdown did not finish within "), "\(made.exceptionMessage)")
    #expect(made.exceptionMessage.contains(" after SIGTERM (at least"), "\(made.exceptionMessage)")
    #expect(
      made.exceptionMessage.hasSuffix("; last breadcrumb: \"waiting for the last request\""),
      "\(made.exceptionMessage)")
    // The child was alive a whole second after SIGTERM: N says so.
    let seconds = made.exceptionMessage.dropFirst("shutdown did not finish within ".count)
      .prefix { $0 != " " }
    #expect((Double(seconds) ?? 0) >= 1.0, "\(made.exceptionMessage)")
    #expect(made.evidence.contains { $0.hasPrefix("SIGTERM received at ") }, "\(made.evidence)")
  }

  /// RLIMIT_CPU's soft limit: SIGXCPU's default action ends the process.
  @Test func aCPULimitThatEndsTheProcessIsNamed() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["cpu-limit", directory.path, "ends"])
    #expect(child.value(after: "ring ") != nil)
    #expect(child.readLine() == "spinning")
    child.wait()
    #expect(child.terminatingSignal == SIGXCPU)

    let (session, report) = try nextLaunch(directory)
    #expect(session.end == .abnormalTermination)
    #expect(session.endSignal == SIGXCPU)
    #expect(session.uncleanEndCause == .resourceLimit)
    let made = try #require(report)
    #expect(made.exceptionType == "ResourceLimit")
    #expect(
      made.exceptionMessage == "CPU time limit of 1 s exceeded (RLIMIT_CPU): the process was ended by SIGXCPU"
    )
  }

  /// RLIMIT_CPU's hard limit: the app outlives SIGXCPU, the kernel's SIGKILL ends it.
  @Test func aCPUHardLimitKillAfterSIGXCPUIsNamed() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["cpu-limit", directory.path, "outlives"])
    let ring = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "spinning")
    child.wait()
    #expect(child.terminatingSignal == SIGKILL)
    #expect(try RingReader.read(file: ring).header.uncleanEndSigns.limitSignal?.signal == SIGXCPU)

    let (session, report) = try nextLaunch(directory)
    #expect(session.end == .abnormalTermination)
    #expect(session.uncleanEndCause == .resourceLimit)
    let made = try #require(report)
    #expect(made.exceptionType == "ResourceLimit")
    #expect(
      made.exceptionMessage
        == "CPU time limit of 1 s exceeded (RLIMIT_CPU): SIGXCPU at the soft limit, then the process was "
        + "killed without a clean exit (SIGKILL at the hard limit of 2 s)")
  }

  /// RLIMIT_FSIZE: a write past it raises SIGXFSZ, whose default action ends the process.
  @Test func aFileSizeLimitThatEndsTheProcessIsNamed() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["file-limit", directory.path, directory.path + "/export.bin"])
    #expect(child.value(after: "ring ") != nil)
    #expect(child.readLine() == "writing")
    child.wait()
    #expect(child.terminatingSignal == SIGXFSZ)

    let (session, report) = try nextLaunch(directory)
    #expect(session.end == .abnormalTermination)
    #expect(session.endSignal == SIGXFSZ)
    #expect(session.uncleanEndCause == .resourceLimit)
    let made = try #require(report)
    #expect(made.exceptionType == "ResourceLimit")
    #expect(
      made.exceptionMessage
        == "file size limit of 2097152 bytes exceeded (RLIMIT_FSIZE): the process was ended by SIGXFSZ")
  }

  /// A ring left running in another boot (its boot id changed here, as a restart would leave it).
  @Test func aRingFromAnotherBootIsAMachineRestart() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["signals-default", directory.path])
    let ring = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")
    child.signal(SIGKILL)
    child.wait()
    let bootIDOffset = MemoryLayout<crumbs_ring_header>.offset(of: \crumbs_ring_header.boot_id)!
    let fd = open(ring, O_WRONLY)
    #expect(fd >= 0)
    let otherBoot = [UInt8](repeating: 0xB0, count: 16)
    #expect(otherBoot.withUnsafeBytes { pwrite(fd, $0.baseAddress, 16, off_t(bootIDOffset)) } == 16)
    close(fd)

    let (session, report) = try nextLaunch(directory)
    #expect(session.end == .abnormalTermination)
    #expect(session.uncleanEndCause == .machineRestart)
    #expect(session.machineRestarted)
    let made = try #require(report)
    #expect(made.exceptionType == "MachineRestart")
    #expect(
      made.exceptionMessage
        == "the machine restarted (power loss, kernel panic or reboot) while the process ran: not a process problem"
    )
    #expect(made.evidence.first?.hasPrefix("the ring's boot id b0b0b0b0-") == true, "\(made.evidence)")
  }

  /// A SIGKILL with nothing before it stays as it was: no cause claimed.
  @Test func aPlainKillNamesNoCause() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["signals-default", directory.path])
    #expect(child.value(after: "ring ") != nil)
    #expect(child.readLine() == "ready")
    child.signal(SIGKILL)
    child.wait()
    let (session, report) = try nextLaunch(directory)
    #expect(session.end == .abnormalTermination)
    #expect(session.uncleanEndCause == nil)
    #expect(report?.exceptionType == "AbnormalTermination")
  }
}
