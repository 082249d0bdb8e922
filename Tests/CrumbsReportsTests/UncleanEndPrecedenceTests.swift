// UncleanEndPrecedenceTests.swift — the order in which the next launch names the cause of an
// unclean end (CrashReportBuilder+UncleanEnds.swift's design comment), on ring contents built
// here: the combinations a real child cannot be made to leave on demand (OOM evidence with a
// stop request, a restart after a SIGTERM, a header read without its trail).

import CrumbsPlatform
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct UncleanEndPrecedenceTests {
  static let stopAt: UInt64 = 1_795_320_600_000_000_000

  /// A running ring of this boot with a SIGTERM noted at `stopAt` and, unless `trail` is false,
  /// one breadcrumb 2.5 s later.
  static func contents(trail: Bool = true, change: (inout RingHeaderInfo) -> Void = { _ in }) -> RingContents
  {
    var header = RingHeaderInfo.unknown
    header.state = .running
    header.bootID = SystemFacts.bootID
    header.createdWallNanoseconds = stopAt - 60_000_000_000
    header.uncleanEndSigns.stopRequest = SignalSeen(signal: SIGTERM, wallNanoseconds: stopAt)
    change(&header)
    let breadcrumb = Breadcrumb(
      id: 1, threadSequence: 1, threadID: 1, wallTimeNanoseconds: stopAt + 2_500_000_000,
      monotonicNanoseconds: 0, ticks: 0, level: .info, type: .system, message: "closing the database",
      attributes: [], messageTruncated: false, attributesTruncated: false, fromSignalHandler: false)
    return RingContents(
      header: header, breadcrumbs: trail ? [breadcrumb] : [], counts: SlotCounts(), timesAreCalibrated: true)
  }

  static func report(_ contents: RingContents) -> CrashReport {
    CrashReportBuilder(attributes: [:], appVersion: nil, reportingSession: nil)
      .abnormalTermination(ring: contents, trailSize: nil, cgroupRoot: "/nonexistent")
  }

  @Test func aStopRequestThenNothingIsAShutdownThatDidNotFinish() {
    let report = Self.report(Self.contents())
    #expect(report.exceptionType == "ShutdownTimeout")
    #expect(
      report.exceptionMessage
        == "shutdown did not finish within 2.5 s after SIGTERM (at least: its last sign of life came that late); "
        + "the process was killed without a clean exit (SIGKILL after a grace period?); "
        + "last breadcrumb: \"closing the database\"")
    #expect(UncleanEndCause(exceptionType: report.exceptionType) == .shutdownTimeout)
  }

  /// A brief report reads the header only: no duration is claimed.
  @Test func withoutTheTrailNoDurationIsClaimed() {
    let report = Self.report(Self.contents(trail: false))
    #expect(report.exceptionType == "ShutdownTimeout")
    #expect(
      report.exceptionMessage
        == "shutdown did not finish after SIGTERM (received at \(ISO8601.string(nanoseconds: Self.stopAt))); "
        + "the process was killed without a clean exit (SIGKILL after a grace period?)")
  }

  /// OOM evidence keeps today's report; the stop request is said after it.
  @Test func outOfMemoryEvidenceIsNeverHiddenByAStopRequest() {
    let report = Self.report(Self.contents { $0.receivedMemoryWarning = true })
    #expect(report.exceptionType == "OutOfMemory")
    #expect(
      report.exceptionMessage.hasPrefix("likely out of memory: the session recorded memory-pressure warnings")
    )
    #expect(report.exceptionMessage.hasSuffix("; it had received SIGTERM 2.5 s before its last sign of life"))
  }

  /// A restart wins over a stop request (the reboot's own shutdown) and over OOM evidence.
  @Test func aMachineRestartWinsAndNamesTheSIGTERMBeforeIt() {
    let report = Self.report(
      Self.contents {
        $0.bootID = [UInt8](repeating: 0xB0, count: 16)
        $0.receivedMemoryWarning = true
      })
    #expect(report.exceptionType == "MachineRestart")
    #expect(report.exceptionStacktrace == "(no stack: the machine restarted)")
    #expect(report.evidence.contains("SIGTERM came before the restart: likely the reboot's orderly shutdown"))
    #expect(report.evidence.contains("the session recorded memory-pressure warnings"))
  }

  /// An unknown boot id (all zero) proves no restart.
  @Test func anUnknownBootIDIsNoRestart() {
    let report = Self.report(Self.contents { $0.bootID = [UInt8](repeating: 0, count: 16) })
    #expect(report.exceptionType == "ShutdownTimeout")
  }

  static func withSIGXCPU(hard: UInt64?) -> RingContents {
    contents {
      $0.uncleanEndSigns.limitSignal = SignalSeen(signal: SIGXCPU, wallNanoseconds: Self.stopAt)
      $0.uncleanEndSigns.limits = ResourceLimits(
        cpuSeconds: ResourceLimit(soft: 30, hard: hard), fileSizeBytes: ResourceLimit(soft: nil, hard: nil),
        realTimeMicroseconds: ResourceLimit(soft: nil, hard: nil))
    }
  }

  /// A SIGXCPU outlived goes before a stop request: the kill is the kernel's.
  @Test func aCPUHardLimitGoesBeforeAStopRequest() {
    let report = Self.report(Self.withSIGXCPU(hard: 60))
    #expect(report.exceptionType == "ResourceLimit")
    #expect(
      report.exceptionMessage
        == "CPU time limit of 30 s exceeded (RLIMIT_CPU): SIGXCPU at the soft limit, then the process was "
        + "killed without a clean exit (SIGKILL at the hard limit of 60 s)")
    #expect(report.evidence.count == 2)
  }

  /// Without a hard limit no limit sent the SIGKILL: the stop request explains the end.
  @Test func aSIGXCPUWithoutAHardLimitIsOnlyEvidence() {
    let report = Self.report(Self.withSIGXCPU(hard: nil))
    #expect(report.exceptionType == "ShutdownTimeout")
    #expect(report.evidence.contains { $0.hasPrefix("SIGXCPU received at ") })
  }
}
