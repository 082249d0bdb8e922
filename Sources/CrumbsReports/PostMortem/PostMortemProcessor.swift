// PostMortemProcessor.swift — the next launch: what the previous sessions left becomes reports.
//
// Entry points, in call order:
//   PostMortemProcessor(directory:store:)
//   processBacklog(reportingSession:)   on the app's thread at start, cheap: when more than
//                                   `maxWaitingSessions` sessions wait in rings/ (a crash loop:
//                                   each launch dies before its background run processed the
//                                   last one), the oldest beyond that number (at most
//                                   `maxBriefPerCall`) are processed briefly — crash record or
//                                   ring header only, frames not symbolicated, no trail, the
//                                   reason named in the report — and their files removed. The
//                                   newest always wait for a full run. So rings/ stays bounded
//                                   and nothing is deleted unreported.
//   run(reportingSession:)          remove what writers killed mid-write left in rings/,
//                                   quarantine/ and reports/ (temporary files, `.incoming`
//                                   folders: AbandonedFiles; the client sweeps its own files),
//                                   then claim every leftover ring
//                                   (RingDirectory.claimLeftovers) and process them newest first
//     → process(claimed)            read ring (+ crash record, + the session file with the
//                                   session's own version, attributes, attachments and replaced
//                                   crash handlers), decide how the session ended:
//                                     clean    → nothing to report, files removed
//                                     terminated by an unhandled SIGTERM/SIGINT... → no report,
//                                       the session ends `.terminatedBySignal(n)`, files removed;
//                                       during a hang the watchdog recorded (a liveness probe's
//                                       SIGTERM) → an abnormal-termination report that says so;
//                                       ended by SIGXCPU/SIGXFSZ (a resource limit) → a report
//                                       naming the limit
//                                     crash record (any ring state) → crash report
//                                     crashed, no record → crash report naming the damage
//                                     running  → abnormal-termination report, with OOM evidence
//                                       and the hang going on when it was killed, except for a
//                                       forked child's session (below); the cause named when the
//                                       ring header proves one (machine restart, shutdown not
//                                       finished after SIGTERM, CPU hard limit:
//                                       CrashReportBuilder+UncleanEnds.swift)
//     → finishHeldHangs             the session's `hang` reports still held for a hang it ended
//                                   during: finished and released (PostMortemProcessor+HeldHangs)
//     → CrashReportBuilder             symbolicates on the device, names what was damaged
//     → Redactor                    the session's redaction rules (its session file's, else
//                                   `redaction`) on the trail before it is encoded, then on the
//                                   report (Redaction.swift)
//     → ReportStore.store           report.json + breadcrumbs.jsonl.lz4 + the session's
//                                   attachments, idempotent per session
//     → sessionEnded(session)       the caller counts it (before the files go: see sessionEnded),
//                                   with its crash-loop step (CrashLoopEvidence.swift); reports
//                                   of sessions in `crashLoopCounts` carry crumbs.crash_loop.count
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

import CrumbsPlatform
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
  /// With `end == .terminatedBySignal`: the signal number; with `.abnormalTermination`, the
  /// terminating signal that stopped the session during a hang, or the resource-limit signal
  /// (SIGXCPU, SIGXFSZ) that ended it (the report says so), if one did. A SIGKILL is never
  /// seen: a shutdown killed after SIGTERM has no `endSignal` (see `uncleanEndCause`).
  public var endSignal: Int32? = nil
  /// With `end == .abnormalTermination`: the cause the report named, when the ring could prove
  /// one (a machine restart, a shutdown not finished after SIGTERM, a resource limit, the OOM
  /// killer, a hang going on); nil when it could not.
  public var uncleanEndCause: UncleanEndCause? = nil
  /// The machine restarted while the session ran (power loss, kernel panic, reboot): an
  /// abnormal end, but not a process problem (a crash loop does not count it).
  public var machineRestarted: Bool { uncleanEndCause == .machineRestart }
  /// Crash signals whose handler another handler had replaced when the session last checked
  /// (names, e.g. `SIGSEGV`): a crash on one of them left no crash record.
  public var replacedCrashSignals: [String] = []
  /// A forked child's session: the session it was forked from.
  public var parentSessionID: SessionID? = nil
  /// How it bears on a crash loop (CrashLoopEvidence.swift), set before `sessionEnded`.
  public var crashLoopStep: CrashLoopStep = .passes
  /// The session's own `service.version` (its session file's, else its ring header's), whoever
  /// processes it: its summary and counts go to this release, not the processing launch's.
  public var appVersion: String? = nil
  /// The session's own resource, as its report has it (CrashReportBuilder.resource; with
  /// `crumbs.resource.measured_at` = `summary` when the session recorded none).
  public var resource: [String: String] = [:]
  /// Pool seats its hang watchdog found blocked in a system call past the threshold (its
  /// session file's count); nil when none was, or the file is missing.
  public var blockedPoolSeats: Int? = nil
}

/// The outcome of one run.
public struct PostMortemOutcome: Sendable {
  /// Every previous session found, oldest first; forked children's are in `forkedSessions`.
  public var sessions: [PreviousSession] = []
  /// Sessions of forked children (see the design comment), oldest first.
  public var forkedSessions: [PreviousSession] = []
  /// Files moved to quarantine.
  public var quarantined: [RingDirectory.QuarantinedFile] = []
  /// Files that writers killed mid-write left, removed (their writer is gone).
  public var removedLeftovers: [String] = []
  /// What went wrong without stopping the run.
  public var problems: [String] = []
  /// The run stopped early (its `stopping` said so): the sessions it had not processed yet were
  /// released untouched, left for the next run.
  public var interrupted = false

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
  package init() {}

  /// Reports stored by this run, forked children's included.
  public var reports: [StoredReport] { (sessions + forkedSessions).compactMap(\.report) }
}

public struct PostMortemProcessor: Sendable {
  public let directory: RingDirectory
  public let store: ReportStore
  /// A report's `attributes` and `service.version` are those of the session that crashed, from
  /// its session file (CrumbsClient writes one just after `start` returns), or for the version,
  /// when the session left no file, from its ring's header (`RingOptions.appVersion`). These two
  /// are used instead only for sessions that left neither (a program that records without the
  /// client): set them only when those sessions ran with these values.
  public var attributes: [String: AttributeValue] = [:]
  /// See `attributes`.
  public var appVersion: String?
  /// Largest attachment (of those the crashed session attached) copied into its report; larger
  /// ones are listed with the reason.
  public var attachmentSizeLimit = 7 * 1024 * 1024
  /// Most breadcrumbs one report's trail carries: the newest are kept, and the report's damage
  /// says how many older ones were left out. A ring holds at most
  /// `RingOptions.maxPlannedSlotCount` slots; this bounds what one report costs to encode,
  /// store and send whatever the ring (sixteen times the default ring's 4096).
  public var maxTrailEntries = 1 << 16
  /// Set by a processor that runs outside the app (`crumbs collect`): it never wrote the
  /// sessions it processes, whatever its user, so it reads their attachments confined to the
  /// Crumbs directory (ReportAttachments.Confinement). Without it, the same holds for each
  /// session whose session file another user owns than this process's effective user.
  public var runsOutsideTheApp = false
  /// How frames are symbolicated (`defaultSymbolication`): names from the ELF symbol tables,
  /// file, line and inlined calls from one `llvm-symbolizer` run per report for the modules
  /// that carry DWARF (docs/next-launch.md gives its cost). A backlog's brief processing reads
  /// no module file at all.
  public var symbolicatorOptions = PostMortemProcessor.defaultSymbolication
  /// Whether a session that vanished without a crash record becomes a report (`detectOOM`).
  /// When false such sessions are still counted (and their files removed), but not reported.
  public var reportsAbnormalTerminations = true
  /// Whether reports name the machine (`host.name`); false leaves it out of every report made.
  public var reportsHostName = true
  /// What is scrubbed from the reports of sessions that left no rules of their own in their
  /// session file (SessionMetadata.redaction): those that left no file, or one written before
  /// redaction existed. Default: `Redaction()` (the default keys, home directories).
  public var redaction = Redaction()
  /// Asked before a report is stored (the client's `shouldProcess`); false skips it, and the
  /// session's files are removed as processed.
  public var shouldStore: @Sendable (CrashReport) -> Bool = { _ in true }
  /// Called once per ended session, after its report (if any) is stored and before its files are
  /// removed, so that what it counts survives a process that dies during the run. A process
  /// that dies between this call and the removal leaves the session to the next run, which calls
  /// this again for it: count by session id.
  public var sessionEnded: @Sendable (PreviousSession) -> Void = { _ in }
  /// Sessions left to wait for a full (background) run; beyond it `processBacklog` processes the
  /// oldest briefly. Each waiting session holds its ring (1 MiB by default) and crash record.
  public var maxWaitingSessions = defaultMaxWaitingSessions
  /// `maxWaitingSessions` unless set: what CrumbsClient.start compares the rings it listed with.
  public static let defaultMaxWaitingSessions = 4
  /// Reports of these sessions carry `crumbs.crash_loop.count` (CrashLoopStep.attributeKey) with
  /// the given count: the place of the session in the crash loop its client saw at start.
  public var crashLoopCounts: [SessionID: Int] = [:]
  /// Most sessions one `processBacklog` call processes (it runs on the app's thread at start).
  /// Two: a crash loop adds one session per launch, so the backlog shrinks.
  public var maxBriefPerCall = 2

  /// ELF symbols, simplified Swift names, and file, line and inlined calls for the frames in
  /// modules that carry DWARF (the app's own code), from `llvm-symbolizer` when it is on PATH:
  /// the same as `crumbs threads` prints for a live process.
  public static var defaultSymbolication: Symbolicator.Options {
    var options = Symbolicator.Options()
    options.nameStyle = .simplified
    return options
  }

  public init(directory: RingDirectory, store: ReportStore) {
    self.directory = directory
    self.store = store
  }

  /// Processes every leftover ring except `reportingSession`'s own, newest first (so that a
  /// process that lives only long enough for one report makes the newest one).
  /// `stopping` is asked before each session: once it says true, the rest are released
  /// untouched (`interrupted`), so a caller that must stop (a signal, a time slice) waits for
  /// one session's processing at most; what is left waits for the next run.
  public func run(reportingSession: SessionID? = nil, stopping: () -> Bool = { false }) -> PostMortemOutcome {
    var outcome = PostMortemOutcome()
    outcome.removedLeftovers = directory.removeAbandonedTemporaryFiles() + store.removeLeftovers()
    let (claimed, problems) = directory.claimLeftovers(excluding: reportingSession)
    outcome.problems += problems
    for (ring, _) in Self.byAge(claimed).reversed() {
      if outcome.interrupted || stopping() {
        outcome.interrupted = true
        ring.release()
        continue
      }
      record(process(ring, reportingSession: reportingSession, into: &outcome), into: &outcome)
    }
    outcome.sort()
    return outcome
  }

  /// Bounds the sessions waiting in rings/ (see the design comment); cheap when they are within
  /// `maxWaitingSessions`: one directory listing.
  public func processBacklog(reportingSession: SessionID? = nil) -> PostMortemOutcome {
    var outcome = PostMortemOutcome()
    guard directory.waitingRingCount(excluding: reportingSession) > maxWaitingSessions else { return outcome }
    let (claimed, problems) = directory.claimLeftovers(excluding: reportingSession)
    outcome.problems += problems
    let oldestFirst = Self.byAge(claimed)
    let brief = min(max(0, oldestFirst.count - max(0, maxWaitingSessions)), max(0, maxBriefPerCall))
    for (index, (ring, _)) in oldestFirst.enumerated() {
      guard index < brief else {
        ring.release()  // left for the full run
        continue
      }
      let note =
        "processed briefly: \(oldestFirst.count) sessions were waiting to be processed (a crash loop?), more "
        + "than \(maxWaitingSessions); this report leaves out the breadcrumb trail, symbol names (frames keep "
        + "module, offset and build ID) and the session's attachments"
      record(process(ring, reportingSession: reportingSession, brief: note, into: &outcome), into: &outcome)
    }
    outcome.sort()
    return outcome
  }

  /// Claimed rings with their creation time, oldest first (an unreadable header counts as oldest).
  static func byAge(_ claimed: [RingDirectory.ClaimedRing]) -> [(RingDirectory.ClaimedRing, UInt64)] {
    claimed.map { ring in
      (ring, (try? RingReader.readHeader(file: ring.path))?.header.createdWallNanoseconds ?? 0)
    }.sorted { $0.1 < $1.1 }
  }

  private func record(_ session: PreviousSession?, into outcome: inout PostMortemOutcome) {
    guard let session else { return }
    if session.parentSessionID != nil {
      outcome.forkedSessions.append(session)
    } else {
      outcome.sessions.append(session)
    }
  }

  /// Processes one claimed ring. With `brief` (the reason, put in the report's damage), only the
  /// crash record and the ring's header are read: no trail, no symbolication, no attachments.
  func process(
    _ claimed: RingDirectory.ClaimedRing, reportingSession: SessionID?, brief: String? = nil,
    into outcome: inout PostMortemOutcome
  ) -> PreviousSession? {
    var damage: [String] = []
    // The ring: unreadable ones are quarantined, but a crash record may still tell the story.
    var ring: RingContents?
    do {
      ring =
        try brief == nil ? RingReader.read(file: claimed.path) : RingReader.readHeader(file: claimed.path)
    } catch {
      damage.append("breadcrumb ring unreadable: \(error)")
      quarantine(claimed.path, reason: error.description, into: &outcome)
    }
    // The crash record, when the handler made one (an untouched one means "no crash").
    var record: CrashRecord?
    // Handlers replaced after install, as the record saw it happen (also without a crash).
    var replacedInRecord: [Int32] = []
    // A first chance that never returned to the crash handler, in a record without a crash: the
    // process ended inside the handler it gave the fault to (CrashReportBuilder.firstChanceEnd).
    var firstChanceEnd: CrashReportBuilder.FirstChanceEnd?
    if Syscall.fileExists(claimed.crashRecordPath) {
      do {
        let read = try CrashRecord.read(file: claimed.crashRecordPath)
        replacedInRecord = read.replacedSignals
        if read.status != .noCrash {
          record = read
        } else if let mark = read.firstChance, mark.inProgress > 0 {
          firstChanceEnd = .init(mark: mark, module: read.module(containing: mark.handler)?.path)
        }
      } catch {
        damage.append("crash record unreadable: \(error)")
        quarantine(claimed.crashRecordPath, reason: error.description, into: &outcome)
      }
    }
    guard ring != nil || record != nil else {
      claimed.release()
      return nil
    }
    // What the session said about itself; without it, the processor's own values.
    var metadata: SessionMetadata?
    // Whether this process wrote the session (see `runsOutsideTheApp`): else its attachments
    // are read confined to the Crumbs directory, as the session file's owner could read them.
    var confinement: ReportAttachments.Confinement?
    if Syscall.fileExists(claimed.sessionFilePath) {
      do {
        let read = try SessionMetadata.readWithOwner(file: claimed.sessionFilePath)
        metadata = read.metadata
        if runsOutsideTheApp || read.owner != Syscall.effectiveUserID() {
          confinement = ReportAttachments.Confinement(root: directory.path, owner: read.owner)
        }
      } catch {
        damage.append("session file unreadable: \(error.reason)")
        quarantine(claimed.sessionFilePath, reason: error.reason, into: &outcome)
      }
    }
    let sessionID = ring?.header.sessionID ?? record!.sessionID
    // Its hang reports held for a hang the end cut short: finished and released, whatever the end.
    if let header = ring?.header, header.ongoingHang != nil { finishHeldHangs(of: sessionID, header: header) }
    var session = PreviousSession(
      sessionID: sessionID, end: .clean, report: nil,
      receivedMemoryWarning: ring?.header.receivedMemoryWarning ?? false,
      startedWallNanoseconds: ring?.header.createdWallNanoseconds ?? record!.installWallNanoseconds,
      parentSessionID: ring?.header.parentSessionID)
    // The session file has what the client's checks saw; the record, a replacement right
    // before the end that no check came after.
    session.replacedCrashSignals = metadata?.replacedCrashSignals ?? []
    session.blockedPoolSeats = metadata?.blockedPoolSeats
    for name in replacedInRecord.map(SignalNames.name) where !session.replacedCrashSignals.contains(name) {
      session.replacedCrashSignals.append(name)
    }
    // The crash handler recorded a crash on this signal: whatever a check said of it, the crash
    // reached it, so it did not leave "no crash record" (what the problem below claims).
    if let crashed = record?.signal.number {
      session.replacedCrashSignals.removeAll { $0 == SignalNames.name(crashed) }
    }
    var identity = CrashReportBuilder(
      attributes: [:],
      appVersion: Self.appVersion(
        metadata: metadata, header: ring?.header, otherwise: appVersion), reportingSession: nil)
    identity.sessionResource = metadata?.resource
    identity.omitsHostName = !reportsHostName
    session.appVersion = identity.appVersion
    // Redacted (Redaction.swift) with the rules the session ran with, else the processor's: the
    // resource leaves the machine with its summary, the trail with its report.
    let redactor = (metadata?.redaction ?? redaction).redactor()
    session.resource = redactor.attributes(
      identity.resource(
        pid: ring?.header.pid ?? record!.pid,
        executable: ring?.header.executable ?? record?.modules.first?.path ?? "",
        appName: ring?.header.appName ?? "", ring: ring, measuredAt: "summary"))
    func end(_ session: PreviousSession) -> PreviousSession {
      var session = session
      session.crashLoopStep = CrashLoopStep(
        end: session.end, record: record, bootID: ring?.header.bootID ?? record?.bootID,
        parentSessionID: session.parentSessionID)
      if !session.replacedCrashSignals.isEmpty {
        outcome.problems.append(
          "session \(session.sessionID): another handler had replaced the crash handler for "
            + session.replacedCrashSignals.joined(separator: ", ")
            + "; a crash on those signals left no crash record")
      }
      // A forked child's session is not one of the app's sessions: not counted, no summary.
      if session.parentSessionID == nil { sessionEnded(session) }
      claimed.finish()
      return session
    }
    if record == nil, ring?.header.state == .clean {
      return end(session)
    }
    if record == nil, let header = ring?.header, header.state == .terminatedBySignal {
      session.endSignal = header.endSignal
      // Stopped during a hang (a liveness probe's SIGTERM), or ended by a resource limit
      // (SIGXCPU, SIGXFSZ): not an orderly stop, reported below.
      if header.ongoingHang == nil, !UncleanEndSigns.limitSignals.contains(header.endSignal ?? 0) {
        session.end = .terminatedBySignal
        return end(session)
      }
    }
    if record == nil, session.parentSessionID != nil, ring?.header.state != .crashed {
      // A forked child gone without a crash record: not reported (see the design comment).
      claimed.finish()
      session.end = .abnormalTermination
      return session
    }
    if var contents = ring, contents.slots.count > max(0, maxTrailEntries) {
      let total = contents.slots.count
      contents.slots.entries.removeFirst(total - max(0, maxTrailEntries))
      ring = contents
      damage.append(
        "the breadcrumb trail keeps the newest \(max(0, maxTrailEntries)) of the ring's \(total) breadcrumbs "
          + "(the processor's limit per report); \(total - max(0, maxTrailEntries)) older ones are left out")
    }
    // Redacted before the trail is encoded and the report built.
    ring = ring.map(redactor.contents)
    do {
      let trail = try ring.flatMap { try TrailAttachment.make($0.slots) }
      var builder = CrashReportBuilder(
        attributes: metadata?.attributes ?? attributes,
        appVersion: Self.appVersion(metadata: metadata, header: ring?.header, otherwise: appVersion),
        reportingSession: reportingSession)
      builder.sessionResource = metadata?.resource
      builder.omitsHostName = !reportsHostName
      builder.symbolicatorOptions = symbolicatorOptions
      if brief != nil {
        builder.symbolicatorOptions.readsModuleFiles = false
        builder.symbolicatorOptions.useLLVMSymbolizer = false
      }
      builder.replacedCrashSignals = session.replacedCrashSignals
      builder.firstChanceEnd = firstChanceEnd
      var report: CrashReport
      if let record {
        report = builder.crash(record: record, ring: ring, trailSize: trail?.bytes.count, damage: damage)
      } else if let ring, ring.header.state == .crashed {
        report = builder.crashWithoutRecord(
          ring: ring, trailSize: trail?.bytes.count,
          damage: damage + ["no crash record next to a ring marked crashed"])
      } else {
        report = builder.abnormalTermination(ring: ring!, trailSize: trail?.bytes.count)
        report.damage += damage
      }
      if let brief { report.damage.append(brief) }
      if let count = crashLoopCounts[sessionID] {
        report.attributes[CrashLoopStep.attributeKey] = .string(String(count))
      }
      redactor.report(&report)
      report.damage += redactor.problems
      session.end = report.kind == .crash ? .crash : .abnormalTermination
      if report.kind == .abnormalTermination {
        session.uncleanEndCause =
          UncleanEndCause(exceptionType: report.exceptionType)
          ?? (ring?.header.ongoingHang == nil ? nil : .hang)
      }
      if report.kind == .abnormalTermination && !reportsAbnormalTerminations {
        return end(session)
      }
      var files: [(name: String, bytes: [UInt8])] = trail.map { [($0.name, $0.bytes)] } ?? []
      if let metadata, brief == nil {
        let attached = ReportAttachments.readAfterTheFact(
          metadata.attachments, limit: attachmentSizeLimit, taken: files.map(\.name), confinement: confinement
        )
        report.attachments += attached.entries
        files += attached.files
        // A file the session named and this processor would not open is damage the report names:
        // the app asked for it, and it is not there.
        for entry in attached.entries {
          if let reason = entry.omittedReason, reason.hasPrefix("not read") {
            report.damage.append("attachment \(entry.name) left out: \(reason)")
          }
        }
        if metadata.omitted > 0 {
          report.damage.append(
            "\(metadata.omitted) attribute(s) or attachment(s) of the session did not fit in its "
              + "\(SessionMetadata.maxFileSize)-byte session file and are missing")
        }
      }
      guard shouldStore(report) else { return end(session) }
      session.report = try store.store(report, attachments: files)
      return end(session)
    } catch {
      outcome.problems.append("cannot store the report for \(claimed.path): \(error)")
      claimed.release()
      return nil
    }
  }

  /// The version a session is reported with: its session file's (even none: the file is the
  /// client's word), else its ring header's, else `otherwise` (see `appVersion`).
  static func appVersion(metadata: SessionMetadata?, header: RingHeaderInfo?, otherwise: String?) -> String? {
    if let metadata { return metadata.appVersion }
    if let recorded = header?.appVersion, !recorded.isEmpty { return recorded }
    return otherwise
  }

  private func quarantine(_ file: String, reason: String, into outcome: inout PostMortemOutcome) {
    do {
      outcome.quarantined.append(try directory.quarantine(file, reason: reason))
    } catch {
      outcome.problems.append("cannot quarantine \(file): \(error)")
    }
  }
}

extension PostMortemOutcome {
  /// Puts the sessions in the order they started.
  mutating func sort() {
    sessions.sort { $0.startedWallNanoseconds < $1.startedWallNanoseconds }
    forkedSessions.sort { $0.startedWallNanoseconds < $1.startedWallNanoseconds }
  }

  /// This outcome followed by `later`'s (two runs of one start: the backlog, then the full run).
  package mutating func append(_ later: PostMortemOutcome) {
    sessions += later.sessions
    forkedSessions += later.forkedSessions
    quarantined += later.quarantined
    problems += later.problems
    removedLeftovers += later.removedLeftovers
    sort()
  }
}

/// Evidence that a session without a crash record was ended by the OOM killer.
package enum OOMEvidence {
  package static func gather(_ contents: RingContents, cgroupRoot: String = "/sys/fs/cgroup") -> [String] {
    var evidence: [String] = []
    let header = contents.header
    // The count of another boot's cgroup means nothing in this one (a machine restart).
    if let atStart = header.cgroupOOMKillsAtStart, !header.cgroup.isEmpty,
      !header.isFromAnotherBoot,
      let now = SystemFacts.cgroupOOMKills(cgroup: header.cgroup, root: cgroupRoot), now > atStart
    {
      evidence.append("the cgroup's oom_kill count rose from \(atStart) to \(now) (\(header.cgroup))")
    }
    if header.receivedMemoryWarning {
      evidence.append("the session recorded memory-pressure warnings")
    }
    let slots = contents.slots
    let pressure = slots.entries.last {
      $0.type == .system && $0.level >= .warning && slots.value($0, key: "memory.pressure") != nil
    }
    if let last = pressure {
      evidence.append("last memory-pressure breadcrumb: \(slots.string(last.message))")
    }
    return evidence
  }
}
