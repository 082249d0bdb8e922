// CrashReportBuilder+UncleanEnds.swift — every unclean end explained: what a report
// says of a session that ended without a crash record and without a clean exit, when its ring
// header can prove why (UncleanEndSigns: the stop request and limit signal the signal handler
// noted, the resource limits at start; the boot id).
//
// Entry points, used by CrashReportBuilder.abnormalTermination once its generic message is made:
//   explainUncleanEnd(ring, oomEvidence:, into:)   names the cause over the generic message
//                                                  (exception type and message, stack line,
//                                                  evidence), or leaves the report as it was
//   UncleanEndCause(exceptionType:)                the cause a report named, for PreviousSession
//
// The causes, the first that applies wins; why this order:
//   1. ResourceLimit, the process ended by SIGXCPU or SIGXFSZ (ring TERMINATED_BY_SIGNAL): its
//      own handler said so while it died — certain, and no other cause leaves that state.
//   2. MachineRestart, the ring left running in another boot (its boot id is not this boot's):
//      every process of that boot ended with it. It goes before the OOM evidence because the
//      cgroup's oom_kill count of another boot cannot be compared (OOMEvidence skips it), and
//      before a stop request, which is then most likely the reboot's own orderly shutdown (said
//      as evidence).
//   3. OutOfMemory, today's report, unchanged: the OOM killer's SIGKILL looks like any other, and
//      memory evidence is the more specific cause; a stop request or limit signal noted before
//      it is added to the message, never put in its place.
//   4. ResourceLimit, a SIGXCPU the process outlived, then gone without a clean exit: the CPU
//      hard limit's SIGKILL (the kernel sends SIGXCPU at the soft limit, SIGKILL at the hard) —
//      unless the limits at start say no hard limit was set (RLIMIT_CPU and RLIMIT_RTTIME).
//      Before a stop request: the limit is the kernel's, the request only began a shutdown.
//      (A SIGXFSZ outlived only makes writes fail with EFBIG: evidence, not a cause.)
//   5. ShutdownTimeout, a stop request (SIGTERM, SIGINT, SIGHUP) the app took over, then gone
//      without a clean exit: the shutdown did not finish (a grace period's SIGKILL).
// The session keeps `SessionEnd.abnormalTermination` in every case (consumers that count ends
// stay as they are); `exceptionType` and `PreviousSession.uncleanEndCause` tell them apart.
// Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// Why a session ended without a crash record and without a clean exit, when its ring could
/// tell; the report's `exceptionType` says the same.
public enum UncleanEndCause: String, Sendable, Codable {
  /// The machine restarted while the process ran (power loss, kernel panic or reboot): not a
  /// process problem. `exceptionType` "MachineRestart".
  case machineRestart = "machine_restart"
  /// A stop request (SIGTERM, SIGINT, SIGHUP) came and the process was killed before its clean
  /// exit. `exceptionType` "ShutdownTimeout".
  case shutdownTimeout = "shutdown_timeout"
  /// A resource limit ended it (SIGXCPU, SIGXFSZ, or the CPU hard limit's SIGKILL after a
  /// SIGXCPU). `exceptionType` "ResourceLimit".
  case resourceLimit = "resource_limit"
  /// The OOM killer, by the evidence. `exceptionType` "OutOfMemory".
  case outOfMemory = "out_of_memory"
  /// Killed while its hang watchdog saw a hang going on (the ring header's record of it), with
  /// no likelier cause above: "killed during a hang of …". `exceptionType` "AbnormalTermination".
  case hang

  /// The cause a report of an unclean end names by its exception type; nil for any other (a
  /// hang is told by the ring header, not the type: see PostMortemProcessor).
  public init?(exceptionType: String) {
    switch exceptionType {
    case "MachineRestart": self = .machineRestart
    case "ShutdownTimeout": self = .shutdownTimeout
    case "ResourceLimit": self = .resourceLimit
    case "OutOfMemory": self = .outOfMemory
    default: return nil
    }
  }
}

extension CrashReportBuilder {
  /// Names the cause of `ring`'s unclean end in `report` (made by `abnormalTermination`, whose
  /// OOM evidence is `oomEvidence`) when the header proves one; see the design comment for the
  /// order.
  package static func explainUncleanEnd(
    _ ring: RingContents, oomEvidence: [String], into report: inout CrashReport
  ) {
    let header = ring.header
    let signs = header.uncleanEndSigns
    let lastSignOfLife = Self.lastSignOfLife(ring)
    let hang = header.ongoingHang.map { "; " + Self.hangSentence($0, endSignal: nil) } ?? ""
    // What came before the end, whatever the cause named.
    for seen in [signs.stopRequest, signs.limitSignal].compactMap({ $0 }) {
      report.evidence.append(
        "\(SignalNames.name(seen.signal)) received at \(ISO8601.string(nanoseconds: seen.wallNanoseconds))"
          + (lastSignOfLife.map {
            ", " + Self.elapsedText(from: seen.wallNanoseconds, to: $0) + " before the last sign of life"
          } ?? "")
          + " (noted in the ring header by the signal handler)")
    }

    if header.state == .terminatedBySignal, let signal = header.endSignal,
      UncleanEndSigns.limitSignals.contains(signal)
    {
      report.exceptionType = "ResourceLimit"
      report.exceptionMessage =
        Self.limitText(signal, limits: signs.limits)
        + ": the process was ended by \(SignalNames.name(signal))"
        + hang
      report.exceptionStacktrace = "(no stack: the process was ended by \(SignalNames.name(signal)))"
      return
    }
    guard header.state == .running else { return }
    if let restart = Self.machineRestartEvidence(header) {
      report.exceptionType = "MachineRestart"
      report.exceptionMessage =
        "the machine restarted (power loss, kernel panic or reboot) while the process ran: not a process problem"
      report.exceptionStacktrace = "(no stack: the machine restarted)"
      report.evidence.insert(restart, at: 0)
      if let stop = signs.stopRequest {
        report.evidence.append(
          "\(SignalNames.name(stop.signal)) came before the restart: likely the reboot's orderly shutdown")
      }
      return
    }
    if !oomEvidence.isEmpty {
      if let before = signs.limitSignal ?? signs.stopRequest {
        report.exceptionMessage +=
          "; it had received \(SignalNames.name(before.signal))"
          + (lastSignOfLife.map {
            " " + Self.elapsedText(from: before.wallNanoseconds, to: $0) + " before its last sign of life"
          } ?? "")
      }
      return
    }
    if let limit = signs.limitSignal, limit.signal == SIGXCPU, let hard = Self.cpuHardLimitText(signs.limits)
    {
      report.exceptionType = "ResourceLimit"
      report.exceptionMessage =
        Self.limitText(SIGXCPU, limits: signs.limits)
        + ": SIGXCPU at the soft limit, then the process was killed without a clean exit "
        + "(SIGKILL at the hard limit\(hard))" + hang
      return
    }
    if let stop = signs.stopRequest {
      let name = SignalNames.name(stop.signal)
      // Without the trail (a brief report reads the header only) no duration can be proved.
      let within =
        lastSignOfLife.map {
          " within " + Self.elapsedText(from: stop.wallNanoseconds, to: $0)
            + " after \(name) (at least: its last sign of life came that late)"
        } ?? " after \(name) (received at \(ISO8601.string(nanoseconds: stop.wallNanoseconds)))"
      report.exceptionType = "ShutdownTimeout"
      report.exceptionMessage =
        "shutdown did not finish" + within
        + "; the process was killed without a clean exit (SIGKILL after a grace period?)" + hang
        + (ring.slots.entries.last.map { "; last breadcrumb: \"\(ring.slots.string($0.message))\"" } ?? "")
    }
  }

  /// The latest time the ring shows the process alive: its newest breadcrumb, or the watchdog's
  /// last look at a hang going on; nil when it shows neither (no trail read).
  static func lastSignOfLife(_ ring: RingContents) -> UInt64? {
    let times =
      ring.slots.entries.map(\.wallTimeNanoseconds)
      + [ring.header.ongoingHang?.seenWallNanoseconds].compactMap { $0 }
    return times.max()
  }

  /// "1.2 s" from `start` to `end` (0 s when the clocks disagree the other way).
  static func elapsedText(from start: UInt64, to end: UInt64) -> String {
    OngoingHang.durationText(end > start ? end - start : 0)
  }

  /// The evidence that `header`'s boot is not this one, or nil (same boot, or either unknown).
  static func machineRestartEvidence(_ header: RingHeaderInfo) -> String? {
    guard header.isFromAnotherBoot else { return nil }
    let text: ([UInt8]) -> String = { SessionID(bytes: $0)?.description ?? "?" }
    return "the ring's boot id \(text(header.bootID)) is not this boot's (\(text(SystemFacts.bootID))): "
      + "the machine restarted since the process started"
  }

  /// "CPU time limit of 1 s exceeded (RLIMIT_CPU)" and the like, from the limits at start.
  static func limitText(_ signal: Int32, limits: ResourceLimits?) -> String {
    if signal == SIGXFSZ {
      let size = limits?.fileSizeBytes.soft.map { " of \($0) bytes" } ?? ""
      return "file size limit\(size) exceeded (RLIMIT_FSIZE)"
    }
    if let cpu = limits?.cpuSeconds.soft {
      return "CPU time limit of \(seconds(cpu)) exceeded (RLIMIT_CPU)"
    }
    if let realTime = limits?.realTimeMicroseconds.soft {
      return "real-time CPU limit of \(realTime) µs exceeded (RLIMIT_RTTIME)"
    }
    return "CPU time limit exceeded (RLIMIT_CPU or RLIMIT_RTTIME)"
  }

  /// " of 2 s" (RLIMIT_CPU) or " of 950000 µs" (RLIMIT_RTTIME): the hard limit whose SIGKILL
  /// follows a SIGXCPU; "" when the limits are unknown; nil when both are unlimited, so no limit
  /// sent a SIGKILL.
  static func cpuHardLimitText(_ limits: ResourceLimits?) -> String? {
    guard let limits else { return "" }
    if let cpu = limits.cpuSeconds.hard { return " of \(seconds(cpu))" }
    return limits.realTimeMicroseconds.hard.map { " of \($0) µs" }
  }

  private static func seconds(_ value: UInt64) -> String { "\(value) s" }
}
