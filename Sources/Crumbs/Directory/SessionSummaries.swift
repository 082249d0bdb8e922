// SessionSummaries.swift — error-free session metrics, sent as events.
//
// Entry points, in call order:
//   SessionSummaryQueue.enqueue      as each ended session is counted (before its files are
//                                    removed; only by the run that counts it, so once), its
//                                    summary (how it ended, the session's own `service.version`
//                                    and resource, its release's counts and the install's),
//                                    written to `session-summaries/<time>-<session>.json`;
//                                    at most `maxQueued` are kept, the oldest deleted first (with no
//                                    OTLP destination nothing drains the queue)
//   UploaderBridge.queuedEvents      the client's DeliveryOutbox (a SessionSummaryOutbox, the one
//                                    `crumbs collect` hands its uploader too): the client's ReportUploader,
//                                    after each pass's reports, sends each queued summary as one
//                                    OTLP log record, event name `crumbs.session.summary`, with
//                                    the ended session's resource (whoever delivers it), to
//                                    every OTLP destination, with the reports' hooks
//                                    (willSendRequest, serverDid…), rate limit, 429 pauses and
//                                    retry policy (ReportUploader+Outbox.swift)
//   UploaderBridge.remove            once one destination accepted it (2xx), or every one
//                                    refused it for good; kept for later otherwise
//
// Summaries carry no crash data, but they still leave the machine: with a consent handler set
// and no standing consent, or in a directory turned off, they stay queued (the directory's
// answer, CrumbsDirectory.delivery, asked by UploaderBridge.shouldSend(event:) in
// CrumbsClient+Hooks.swift, which asks the app's delegate too, and by the collector).
//
// The folder is written by the app and read, trimmed and emptied by whoever delivers (the
// collector may be root): it is opened beneath the Crumbs directory without following a link
// (`open(_:)`), and every read, write, rename and removal works in that descriptor, so a folder
// swapped for a symbolic link trims nothing elsewhere. Not signal-safe.

import CrumbsPlatform
import FoundationEssentials

/// How one session ended, with the install's counts at the time it was processed.
public struct SessionSummary: Codable, Sendable, Equatable {
  public var sessionID: String
  public var installID: String
  public var end: SessionEnd
  public var startedUnixNano: UInt64
  public var processedUnixNano: UInt64
  public var sessions: Int
  public var crashedSessions: Int
  public var abnormalSessions: Int
  public var cleanSessions: Int
  public var crashFreeRate: Double
  /// With `end == .abnormalTermination`: the cause the report named (a machine restart, a
  /// shutdown not finished after SIGTERM, a resource limit, the OOM killer), when known; sent as
  /// `crumbs.session.end_cause`.
  public var endCause: UncleanEndCause? = nil
  /// The ended session's own `service.version` (nil: it recorded none).
  public var serviceVersion: String? = nil
  /// The ended session's own resource (PreviousSession.resource); nil in summaries queued by an
  /// earlier version, which go with the delivering process's.
  public var resource: [String: String]? = nil
  /// Its release's counts, this session included (SessionMetrics.releases).
  public var release: ReleaseCounts? = nil
  /// Pool seats found blocked in a system call past the hang threshold during the session
  /// (`crumbs.session.pool_seats_blocked`); nil when none was.
  public var blockedPoolSeats: Int? = nil
}

enum SessionSummaryQueue {
  static let eventName = "crumbs.session.summary"

  static func folder(_ directory: String) -> String { CrumbsDirectory(directory).path(.sessionSummaries) }

  /// The folder, opened beneath the Crumbs directory `directory` with no link followed; nil when
  /// it is missing or not a folder. The caller closes it.
  static func open(_ directory: String) -> Int32? {
    try? Syscall.openDirectory(folder(directory), beneath: directory)
  }

  /// Summaries kept waiting for a server (a few hundred bytes each); the oldest go first.
  static let maxQueued = 100

  /// Queues a summary per ended session, as `<processed time, 20 digits>-<session>.json` (so
  /// that names sort oldest first); a session already queued is not queued again.
  static func enqueue(_ sessions: [PreviousSession], metrics: SessionMetrics, directory: String) {
    guard !sessions.isEmpty, (try? Syscall.makeDirectory(folder(directory))) != nil,
      let queue = open(directory)
    else { return }
    defer { Syscall.close(queue) }
    let now = SystemClock.wallNanoseconds()
    let queued = (try? Syscall.directoryEntries(of: queue, path: folder(directory))) ?? []
    for session in sessions {
      let summary = SessionSummary(
        sessionID: session.sessionID.description, installID: metrics.installID, end: session.end,
        startedUnixNano: session.startedWallNanoseconds, processedUnixNano: now,
        sessions: metrics.sessions, crashedSessions: metrics.crashedSessions,
        abnormalSessions: metrics.abnormalSessions, cleanSessions: metrics.cleanSessions,
        crashFreeRate: metrics.crashFreeRate, endCause: session.uncleanEndCause,
        serviceVersion: session.appVersion, resource: session.resource,
        release: metrics.releases[session.appVersion ?? ""], blockedPoolSeats: session.blockedPoolSeats)
      // A run killed after counting a session and before removing its files counts it again.
      guard !queued.contains(where: { $0.hasSuffix(summary.sessionID + ".json") }) else { continue }
      let time = String(now)
      let name =
        String(repeating: "0", count: max(0, 20 - time.count)) + time + "-" + summary.sessionID + ".json"
      // Without fsync (this may run on the app's thread at start, see processBacklog): a power
      // loss may lose a summary, never tear one.
      if let bytes = try? JSONEncoder().encode(summary) {
        try? Syscall.writeFileAtomically(
          named: name, in: queue, Array(bytes), durable: false, path: folder(directory) + "/" + name)
      }
    }
    trim(queue, path: folder(directory))
  }

  /// Deletes the oldest entries beyond `maxQueued` (by name: the time they were made; names of
  /// an earlier version, without it, count as oldest), unreadable ones set aside included.
  static func trim(_ directory: String) {
    guard let queue = open(directory) else { return }
    defer { Syscall.close(queue) }
    trim(queue, path: folder(directory))
  }

  /// `trim` in the open folder `queue` (at `path`, for messages).
  static func trim(_ queue: Int32, path: String) {
    let names = (try? Syscall.directoryEntries(of: queue, path: path)) ?? []
    guard names.count > maxQueued else { return }
    func age(_ name: String) -> String {
      let stamp = name.utf8.prefix(21)
      let timed =
        stamp.count == 21 && stamp.last == UInt8(ascii: "-")
        && stamp.dropLast().allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
      return timed ? name : ""
    }
    for name in names.sorted(by: { (age($0), $0) < (age($1), $1) }).prefix(names.count - maxQueued) {
      Syscall.removeTree(named: name, in: queue)
    }
  }

  /// The queued summaries as events, oldest first, each a batch with its session's resource
  /// (`resource` for those queued without one: an earlier version's). Unreadable
  /// ones are moved aside with the reason (deleted only by `trim`, as the oldest).
  static func events(directory: String, resource: [String: String]) -> [OutboxEvent] {
    guard let queue = open(directory) else { return [] }
    defer { Syscall.close(queue) }
    let names = ((try? Syscall.directoryEntries(of: queue, path: folder(directory))) ?? []).filter {
      $0.hasSuffix(".json")
    }
    var events: [OutboxEvent] = []
    for name in names.sorted() {
      let path = folder(directory) + "/" + name
      // A regular file of the app's user, opened without following a link or blocking.
      guard
        let bytes = try? Syscall.readFile(
          named: name, in: queue, limit: 1 << 16, path: path, owner: Syscall.status(of: ".", in: queue)?.owner
        ),
        let summary = try? JSONDecoder().decode(SessionSummary.self, from: Data(bytes))
      else {
        try? Syscall.writeFileAtomically(
          named: name + ".reason", in: queue, Array("unreadable session summary\n".utf8),
          path: path + ".reason")
        try? Syscall.rename(named: name, in: queue, to: name + ".unreadable", in: queue, path: path)
        continue
      }
      // Like the session's reports: its id names the process (OTLPDestination.resource).
      var sessionResource = summary.resource ?? resource
      if summary.resource != nil, sessionResource["service.instance.id"] == nil {
        sessionResource["service.instance.id"] = summary.sessionID
      }
      // The file's name is the event's key: `remove` finds it again.
      events.append(
        OutboxEvent(
          id: summary.sessionID, key: name,
          batch: OTLPLogBatch(
            resource: OTLPDestination.resourceAttributes(sessionResource), scopeName: "crumbs",
            scopeVersion: CrumbsVersion.string, records: [record(summary)])))
    }
    return events
  }

  static func record(_ summary: SessionSummary) -> OTLPLogRecord {
    OTLPLogRecord(
      timeUnixNano: summary.processedUnixNano, observedTimeUnixNano: summary.processedUnixNano,
      severity: summary.end == .clean || summary.end == .terminatedBySignal ? .info : .error,
      body: .string("session \(summary.sessionID) ended: \(summary.end.rawValue)"),
      attributes: [
        OTLPAttribute("session.id", .string(summary.sessionID)),
        OTLPAttribute("crumbs.install.id", .string(summary.installID)),
        OTLPAttribute("crumbs.session.end", .string(summary.end.rawValue)),
        OTLPAttribute("crumbs.session.start_unix_nano", .int(Int64(clamping: summary.startedUnixNano))),
        OTLPAttribute("crumbs.sessions", .int(Int64(summary.sessions))),
        OTLPAttribute("crumbs.sessions.crashed", .int(Int64(summary.crashedSessions))),
        OTLPAttribute("crumbs.sessions.abnormal", .int(Int64(summary.abnormalSessions))),
        OTLPAttribute("crumbs.sessions.clean", .int(Int64(summary.cleanSessions))),
        OTLPAttribute("crumbs.sessions.crash_free_rate", .double(summary.crashFreeRate)),
      ] + (summary.endCause.map { [OTLPAttribute("crumbs.session.end_cause", .string($0.rawValue))] } ?? [])
        + (summary.blockedPoolSeats.map {
          [OTLPAttribute("crumbs.session.pool_seats_blocked", .int(Int64($0)))]
        } ?? [])
        + releaseAttributes(summary),
      eventName: eventName)
  }
}

extension SessionSummaryQueue {
  /// The release's counts on a summary (`crumbs.release.*`): the ended sessions of the
  /// session's `service.version` by end, this one included, since the release was first counted.
  static func releaseAttributes(_ summary: SessionSummary) -> [OTLPAttribute] {
    guard let release = summary.release else { return [] }
    return [
      OTLPAttribute("crumbs.release.sessions.clean", .int(Int64(release.clean))),
      OTLPAttribute("crumbs.release.sessions.crashed", .int(Int64(release.crashed))),
      OTLPAttribute("crumbs.release.sessions.abnormal", .int(Int64(release.abnormal))),
      OTLPAttribute("crumbs.release.sessions.terminated_by_signal", .int(Int64(release.terminatedBySignal))),
      OTLPAttribute("crumbs.release.sessions.hang", .int(Int64(release.hang))),
      OTLPAttribute("crumbs.release.crash_free_rate", .double(release.crashFreeRate)),
    ]
  }
}
