// PostMortemProcessor.swift — the next launch: what the previous sessions left becomes reports.
//
// Entry points, in call order:
//   PostMortemProcessor(directory:store:)
//   run(reportingSession:)          claim every leftover ring (RingDirectory.claimLeftovers),
//     → process(claimed)            read ring (+ crash record), decide how the session ended:
//                                     clean    → nothing to report, files removed
//                                     terminated by an unhandled SIGTERM/SIGINT... → no report,
//                                       the session ends `.terminatedBySignal(n)`, files removed
//                                     crashed  → crash report (CrashReportBuilder)
//                                     running  → abnormal-termination report, with OOM evidence
//     → ReportStore.store           report.json + breadcrumbs.jsonl.lz4, idempotent per session
//     → ClaimedRing.finish          consumed files removed only after the report is stored
//
// Damaged inputs never stop the run: an unreadable ring is quarantined with its reason and, if a
// crash record survived, the crash is still reported with the damage named. Not signal-safe.

#if canImport(Glibc)
  import Glibc
#endif

/// How a previous session ended.
public enum SessionEnd: String, Sendable, Codable {
  case clean, crash, abnormalTermination = "abnormal_termination"
  /// A terminating signal the app did not handle (SIGTERM, SIGINT, SIGHUP...) ended it: an
  /// orderly stop from outside, not a crash; `PreviousSession.endSignal` says which signal.
  case terminatedBySignal = "terminated_by_signal"
}

/// What the processor learned about one previous session.
public struct PreviousSession: Sendable {
  public var sessionID: SessionID
  public var end: SessionEnd
  /// The stored report, for crashes and abnormal ends.
  public var report: StoredReport?
  /// A memory-pressure warning was recorded during the session.
  public var receivedMemoryWarning: Bool
  /// When the session's ring was created (ns since the epoch).
  public var startedWallNanoseconds: UInt64
  /// With `end == .terminatedBySignal`: the signal number.
  public var endSignal: Int32? = nil
}

/// The outcome of one run.
public struct PostMortemOutcome: Sendable {
  /// Every previous session found, oldest first.
  public var sessions: [PreviousSession] = []
  /// Files moved to quarantine.
  public var quarantined: [RingDirectory.QuarantinedFile] = []
  /// What went wrong without stopping the run.
  public var problems: [String] = []

  /// The most recent previous session.
  public var lastSession: PreviousSession? { sessions.last }
  /// `hasCrashedInLastSession`: the last session ended by a crash or abnormally (a clean exit
  /// and an unhandled SIGTERM-like signal are not crashes).
  public var hasCrashedInLastSession: Bool {
    let end = lastSession?.end ?? .clean
    return end == .crash || end == .abnormalTermination
  }
  /// `lastSessionCrashReport`.
  public var lastSessionCrashReport: CrashReport? { lastSession?.report?.report }
  /// `hasReceivedMemoryWarningInLastSession`.
  public var hasReceivedMemoryWarningInLastSession: Bool { lastSession?.receivedMemoryWarning ?? false }
  /// Reports stored by this run.
  public var reports: [StoredReport] { sessions.compactMap(\.report) }
}

public struct PostMortemProcessor: Sendable {
  public let directory: RingDirectory
  public let store: ReportStore
  /// Added to every report's `attributes`.
  public var attributes: [String: String] = [:]
  /// Reported as `service.version`.
  public var appVersion: String?

  public init(directory: RingDirectory, store: ReportStore) {
    self.directory = directory
    self.store = store
  }

  /// Processes every leftover ring except `reportingSession`'s own.
  public func run(reportingSession: SessionID? = nil) -> PostMortemOutcome {
    var outcome = PostMortemOutcome()
    let (claimed, problems) = directory.claimLeftovers(excluding: reportingSession)
    outcome.problems += problems
    for ring in claimed {
      if let session = process(ring, reportingSession: reportingSession, into: &outcome) {
        outcome.sessions.append(session)
      }
    }
    outcome.sessions.sort { $0.startedWallNanoseconds < $1.startedWallNanoseconds }
    return outcome
  }

  func process(
    _ claimed: RingDirectory.ClaimedRing, reportingSession: SessionID?, into outcome: inout PostMortemOutcome
  ) -> PreviousSession? {
    let contents: RingContents
    do {
      contents = try RingReader.read(file: claimed.path)
    } catch {
      do {
        outcome.quarantined.append(try directory.quarantine(claimed.path, reason: error.reason))
      } catch {
        outcome.problems.append("cannot quarantine \(claimed.path): \(error)")
      }
      claimed.release()
      return nil
    }
    let header = contents.header
    let session = PreviousSession(
      sessionID: header.sessionID, end: .clean, report: nil,
      receivedMemoryWarning: header.receivedMemoryWarning,
      startedWallNanoseconds: header.createdWallNanoseconds)
    if header.state == .clean {
      claimed.finish()
      return session
    }
    if header.state == .terminatedBySignal {
      claimed.finish()
      var ended = session
      ended.end = .terminatedBySignal
      ended.endSignal = header.endSignal
      return ended
    }
    do {
      let trail = try TrailAttachment.make(contents.breadcrumbs)
      let report = buildReport(
        contents, trailSize: trail?.bytes.count, claimed: claimed, reportingSession: reportingSession)
      let stored = try store.store(report, attachments: trail.map { [($0.name, $0.bytes)] } ?? [])
      claimed.finish()
      var ended = session
      ended.end = report.kind == .crash ? .crash : .abnormalTermination
      ended.report = stored
      return ended
    } catch {
      outcome.problems.append("cannot store the report for \(claimed.path): \(error)")
      claimed.release()
      return nil
    }
  }

  func buildReport(
    _ contents: RingContents, trailSize: Int?, claimed: RingDirectory.ClaimedRing,
    reportingSession: SessionID?
  ) -> CrashReport {
    let header = contents.header
    let observed = wallClockNanoseconds()
    let lastSignOfLife = contents.breadcrumbs.last?.wallTimeNanoseconds ?? header.createdWallNanoseconds
    var report = CrashReport(
      id: header.sessionID.description,
      kind: .abnormalTermination,
      exceptionType: "AbnormalTermination",
      exceptionMessage: "",
      exceptionStacktrace: "",
      threadID: nil,
      threadName: nil,
      sessionID: header.sessionID.description,
      reportingSessionID: reportingSession?.description,
      timeUnixNano: lastSignOfLife,
      time: ISO8601.string(nanoseconds: lastSignOfLife),
      observedTimeUnixNano: observed,
      observedTime: ISO8601.string(nanoseconds: observed),
      signal: nil, registers: [], frames: [], modules: [],
      resource: ProcessAttributes.resource(
        pid: header.pid, executable: header.executable, appName: header.appName, appVersion: appVersion),
      attributes: attributes,
      breadcrumbs: TrailAttachment.summary(contents, attachmentSize: trailSize),
      attachments: [], damage: [], evidence: [], handlerDurationNanoseconds: nil)
    if contents.counts.torn > 0 {
      report.damage.append("\(contents.counts.torn) breadcrumb slot(s) torn or damaged, skipped")
    }
    if let trailSize {
      report.attachments.append(
        .init(name: TrailAttachment.name, contentType: TrailAttachment.contentType, size: trailSize))
    }
    let evidence = OOMEvidence.gather(contents)
    report.evidence = evidence
    if evidence.isEmpty {
      report.exceptionMessage =
        "the process ended without a crash record and without a clean exit (SIGKILL, the OOM killer, or power loss)"
    } else {
      report.exceptionType = "OutOfMemory"
      report.exceptionMessage = "likely out of memory: " + evidence.joined(separator: "; ")
    }
    report.exceptionStacktrace = "(no stack: the process was killed without running any handler)"
    return report
  }
}

/// Evidence that a session without a crash record was ended by the OOM killer.
enum OOMEvidence {
  static func gather(_ contents: RingContents, cgroupRoot: String = "/sys/fs/cgroup") -> [String] {
    var evidence: [String] = []
    let header = contents.header
    if let atStart = header.cgroupOOMKillsAtStart, !header.cgroup.isEmpty,
      let now = SystemFacts.cgroupOOMKills(cgroup: header.cgroup, root: cgroupRoot), now > atStart
    {
      evidence.append("the cgroup's oom_kill count rose from \(atStart) to \(now) (\(header.cgroup))")
    }
    if header.receivedMemoryWarning {
      evidence.append("the session recorded memory-pressure warnings")
    }
    let pressure = contents.breadcrumbs.filter {
      $0.type == .system && $0.level >= .warning && $0.attributes.contains { $0.key == "memory.pressure" }
    }
    if let last = pressure.last {
      evidence.append("last memory-pressure breadcrumb: \(last.message)")
    }
    return evidence
  }
}

func wallClockNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_REALTIME, &now)
  return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
