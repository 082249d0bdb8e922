// PostMortemProcessor.swift — the next launch: what the previous sessions left becomes reports.
//
// Entry points, in call order:
//   PostMortemProcessor(directory:store:)
//   run(reportingSession:)          claim every leftover ring (RingDirectory.claimLeftovers),
//     → process(claimed)            read ring (+ crash record), decide how the session ended:
//                                     clean    → nothing to report, files removed
//                                     terminated by an unhandled SIGTERM/SIGINT... → no report,
//                                       the session ends `.terminatedBySignal(n)`, files removed
//                                     crash record (any ring state) → crash report
//                                     crashed, no record → crash report naming the damage
//                                     running  → abnormal-termination report, with OOM evidence,
//                                       except for a forked child's session (below)
//     → CrashReportBuilder             symbolicates on the device, names what was damaged
//     → ReportStore.store           report.json + breadcrumbs.jsonl.lz4, idempotent per session
//     → ClaimedRing.finish          consumed files removed only after the report is stored
//
// Damaged inputs never stop the run: an unreadable ring is quarantined with its reason and, if a
// crash record survived, the crash is still reported with the damage named. Not signal-safe.
//
// Forked children (crumbs_fork.h) record in sessions of their own, whose rings name the parent's
// session. They are kept apart (`PostMortemOutcome.forkedSessions`): the last session, session
// counts and summaries are the app's own processes'. A child's crash is reported (with
// `crumbs.session.parent_id` and `process.parent_pid`); a child that ended without a crash
// record is not: _exit and exec, the usual ends of a forked child, leave its ring running, and
// its parent is the one that watches it.

import CrumbsRecorder

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
  /// A forked child's session: the session it was forked from.
  public var parentSessionID: SessionID? = nil
}

/// The outcome of one run.
public struct PostMortemOutcome: Sendable {
  /// Every previous session found, oldest first; forked children's are in `forkedSessions`.
  public var sessions: [PreviousSession] = []
  /// Sessions of forked children (see the design comment), oldest first.
  public var forkedSessions: [PreviousSession] = []
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
  /// Reports stored by this run, forked children's included.
  public var reports: [StoredReport] { (sessions + forkedSessions).compactMap(\.report) }
}

public struct PostMortemProcessor: Sendable {
  public let directory: RingDirectory
  public let store: ReportStore
  /// Added to every report's `attributes`.
  public var attributes: [String: String] = [:]
  /// Reported as `service.version`.
  public var appVersion: String?
  /// How frames are symbolicated. By default from the ELF symbol tables only, with simplified
  /// Swift names: llvm-symbolizer's file and line cost 200–300 ms per report, beyond the 50 ms
  /// next-launch budget (the demo turns it on).
  public var symbolicatorOptions = PostMortemProcessor.defaultSymbolication
  /// Whether a session that vanished without a crash record becomes a report (`detectOOM`).
  /// When false such sessions are still counted (and their files removed), but not reported.
  public var reportsAbnormalTerminations = true
  /// Asked before a report is stored (the client's `shouldProcess`); false skips it, and the
  /// session's files are removed as processed.
  public var shouldStore: @Sendable (CrashReport) -> Bool = { _ in true }

  /// ELF symbols only, simplified Swift names.
  public static var defaultSymbolication: Symbolicator.Options {
    var options = Symbolicator.Options()
    options.useLLVMSymbolizer = false
    options.nameStyle = .simplified
    return options
  }

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
      guard let session = process(ring, reportingSession: reportingSession, into: &outcome) else {
        continue
      }
      if session.parentSessionID != nil {
        outcome.forkedSessions.append(session)
      } else {
        outcome.sessions.append(session)
      }
    }
    outcome.sessions.sort { $0.startedWallNanoseconds < $1.startedWallNanoseconds }
    outcome.forkedSessions.sort { $0.startedWallNanoseconds < $1.startedWallNanoseconds }
    return outcome
  }

  func process(
    _ claimed: RingDirectory.ClaimedRing, reportingSession: SessionID?, into outcome: inout PostMortemOutcome
  ) -> PreviousSession? {
    var damage: [String] = []
    // The ring: unreadable ones are quarantined, but a crash record may still tell the story.
    var ring: RingContents?
    do {
      ring = try RingReader.read(file: claimed.path)
    } catch {
      damage.append("breadcrumb ring unreadable: \(error.reason)")
      quarantine(claimed.path, reason: error.reason, into: &outcome)
    }
    // The crash record, when the handler made one (an untouched one means "no crash").
    var record: CrashRecord?
    if Syscall.fileExists(claimed.crashRecordPath) {
      do {
        let read = try CrashRecord.read(file: claimed.crashRecordPath)
        if read.status != .noCrash { record = read }
      } catch {
        damage.append("crash record unreadable: \(error.reason)")
        quarantine(claimed.crashRecordPath, reason: error.reason, into: &outcome)
      }
    }
    guard ring != nil || record != nil else {
      claimed.release()
      return nil
    }
    let sessionID = ring?.header.sessionID ?? record!.sessionID
    var session = PreviousSession(
      sessionID: sessionID, end: .clean, report: nil,
      receivedMemoryWarning: ring?.header.receivedMemoryWarning ?? false,
      startedWallNanoseconds: ring?.header.createdWallNanoseconds ?? record!.installWallNanoseconds,
      parentSessionID: ring?.header.parentSessionID)
    if record == nil, ring?.header.state == .clean {
      claimed.finish()
      return session
    }
    if record == nil, let header = ring?.header, header.state == .terminatedBySignal {
      claimed.finish()
      session.end = .terminatedBySignal
      session.endSignal = header.endSignal
      return session
    }
    if record == nil, session.parentSessionID != nil, ring?.header.state != .crashed {
      // A forked child gone without a crash record: not reported (see the design comment).
      claimed.finish()
      session.end = .abnormalTermination
      return session
    }
    do {
      let trail = try ring.flatMap { try TrailAttachment.make($0.breadcrumbs) }
      var builder = CrashReportBuilder(
        attributes: attributes, appVersion: appVersion, reportingSession: reportingSession)
      builder.symbolicatorOptions = symbolicatorOptions
      let report: CrashReport
      if let record {
        report = builder.crash(record: record, ring: ring, trailSize: trail?.bytes.count, damage: damage)
      } else if let ring, ring.header.state == .crashed {
        report = builder.crashWithoutRecord(
          ring: ring, trailSize: trail?.bytes.count,
          damage: damage + ["no crash record next to a ring marked crashed"])
      } else {
        report = builder.abnormalTermination(ring: ring!, trailSize: trail?.bytes.count)
      }
      session.end = report.kind == .crash ? .crash : .abnormalTermination
      if (report.kind == .abnormalTermination && !reportsAbnormalTerminations) || !shouldStore(report) {
        claimed.finish()
        return session
      }
      let stored = try store.store(report, attachments: trail.map { [($0.name, $0.bytes)] } ?? [])
      claimed.finish()
      session.report = stored
      return session
    } catch {
      outcome.problems.append("cannot store the report for \(claimed.path): \(error)")
      claimed.release()
      return nil
    }
  }

  private func quarantine(_ file: String, reason: String, into outcome: inout PostMortemOutcome) {
    do {
      outcome.quarantined.append(try directory.quarantine(file, reason: reason))
    } catch {
      outcome.problems.append("cannot quarantine \(file): \(error)")
    }
  }
}

/// Evidence that a session without a crash record was ended by the OOM killer.
package enum OOMEvidence {
  package static func gather(_ contents: RingContents, cgroupRoot: String = "/sys/fs/cgroup") -> [String] {
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
