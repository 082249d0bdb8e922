// SessionMetrics.swift — how many sessions this install (Crumbs directory) had, and how they
// ended, counted so that neither a process that exits at once nor two processes starting
// together lose a count.
//
// Two files in the Crumbs directory, both changed only under an exclusive flock of the first:
//   session-starts         one line, 20 decimal digits: sessions started. CrumbsClient.start adds
//                          one on the caller's thread — open, flock, pread, pwrite, close; no
//                          parsing beyond one number — so a session is counted before start
//                          returns, however soon the process ends.
//   session-metrics.json   the install id, the ended sessions by kind, and the ids of the last
//                          sessions counted. The post-mortem run adds each ended session before
//                          it deletes that session's files (PostMortemProcessor.sessionEnded),
//                          and skips one already counted: a run killed between the two leaves
//                          the session to the next run, which must not count it twice. Also
//                          per release (the session's own `service.version`), the ended
//                          sessions by end since the release was first counted (ReleaseCounts:
//                          at most `maxReleases`, the least recently counted forgotten first),
//                          and a revision raised at each count, with the revision last exported
//                          as metrics (SessionMetricsExport.swift).
//
// The summary of a session is queued under the same lock, only by the run that counts it
// (countEnd's `queue`): a session processed twice (a run killed before it removed the files, or
// the client and `crumbs collect`) is counted and summarized once.
//
// Entry points, in call order:
//   SessionMetricsFile.countStart(directory:)      the caller's thread, in CrumbsClient.start
//   SessionMetricsFile.countEnd(_:directory:)      the background thread, once per ended session
//   SessionMetricsFile.read(directory:)            the background thread, after the run
//
// The JSON is replaced atomically but without fsync (the lock stays short, and a start waiting
// for it stays cheap): a power loss may undo the last counts, never tear the file. One that
// cannot be read (damaged, foreign) is moved to quarantine/ with its reason and the counts
// start again, with a new install id; the problem is named
// (CrumbsDirectory.quarantine(damaged:)). Not signal-safe.

import CrumbsPlatform
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// Counts over all sessions of this install, persisted in `session-starts` and
/// `session-metrics.json`.
public struct SessionMetrics: Codable, Sendable, Equatable {
  /// Random, made once per install (Crumbs directory) and kept.
  public var installID: String
  /// Sessions started, this one included (counted in `start`, before it returns).
  public var sessions: Int = 0
  public var crashedSessions: Int = 0
  public var abnormalSessions: Int = 0
  public var cleanSessions: Int = 0
  /// Ended sessions per release (`service.version`; "" for sessions that recorded none).
  public var releases: [String: ReleaseCounts] = [:]
  /// Share of ended sessions with no crash and no abnormal end.
  public var crashFreeRate: Double {
    // Doubles: the counts come from a file that may be damaged, and must not overflow a sum.
    let ended = Double(crashedSessions) + Double(abnormalSessions) + Double(cleanSessions)
    return ended == 0 ? 1 : Double(cleanSessions) / ended
  }
}

/// How the ended sessions of one release (`service.version`) ended, counted since
/// `firstCountedUnixNano`: cumulative, never lowered (the values of the `crumbs.sessions` sum).
public struct ReleaseCounts: Codable, Sendable, Equatable {
  public var clean = 0
  public var crashed = 0
  public var abnormal = 0
  /// Stopped by a terminating signal the app did not handle (SIGTERM…): not a crash.
  public var terminatedBySignal = 0
  /// Ended during a hang (killed while its watchdog saw one going on, UncleanEndCause.hang):
  /// not counted in `abnormal` too. A hang the session outlived is a report, not an end.
  public var hang = 0
  /// When this release's first session was counted (the sums' start time).
  public var firstCountedUnixNano: UInt64 = 0
  /// When its last session was counted (which releases are kept).
  public var lastCountedUnixNano: UInt64 = 0
  /// The resource of the last session counted, without what is its process's alone
  /// (`process.pid`, …): the metrics' resource, the same from one request to the next.
  public var resource: [String: String] = [:]

  public init() {}

  /// Ended sessions of the release.
  public var ended: Int {
    clean.saturatingAdd(crashed).saturatingAdd(abnormal).saturatingAdd(terminatedBySignal).saturatingAdd(hang)
  }
  /// The ended sessions by how they ended, each end named as every metric of them names it
  /// (`crumbs.session.end` of OTLP, `end` of swift-metrics): the ends part the sessions.
  package var byEnd: [(end: String, count: Int)] {
    [
      ("clean", clean), ("crashed", crashed), ("abnormal", abnormal),
      ("terminated_by_signal", terminatedBySignal), ("hang", hang),
    ]
  }
  /// Share of them with no crash, no abnormal end and no end in a hang (1 with none).
  public var crashFreeRate: Double {
    let ended = Double(clean) + Double(crashed) + Double(abnormal) + Double(terminatedBySignal) + Double(hang)
    return ended == 0 ? 1 : (Double(clean) + Double(terminatedBySignal)) / ended
  }
}

package enum SessionMetricsFile {
  /// Releases counted at once (each a few hundred bytes); the least recently counted go first,
  /// and one counted again later starts anew (a new start time: a reset of its sums).
  static let maxReleases = 16
  /// Resource attributes of one process, left out of the metrics' resource so that it names the
  /// same series in every request.
  static let perProcessKeys: Set<String> = [
    "process.pid", "process.parent_pid", "crumbs.resource.measured_at", "crumbs.session.parent_id",
  ]

  /// Session ids remembered as counted: more than one run can leave unfinished.
  static let rememberedSessions = 256

  private static func metricsPath(_ directory: String) -> String {
    CrumbsDirectory(directory).path(.sessionMetrics)
  }

  /// What `session-metrics.json` holds.
  private struct Stored: Codable {
    var installID: String
    var sessions = 0
    var crashedSessions = 0
    var abnormalSessions = 0
    var cleanSessions = 0
    var countedSessionIDs: [String]? = []
    var releases: [String: ReleaseCounts]? = [:]
    /// Raised at each count; `exportedRevision`: the last one a metrics request carried out.
    var revision: Int? = 0
    var exportedRevision: Int? = 0

    init(installID: String) { self.installID = installID }

    var metrics: SessionMetrics {
      SessionMetrics(
        installID: installID, sessions: sessions, crashedSessions: crashedSessions,
        abnormalSessions: abnormalSessions, cleanSessions: cleanSessions, releases: releases ?? [:])
    }
  }

  /// Adds this session to `session-starts`. Cheap enough for the caller's thread of `start`.
  package static func countStart(directory: String) throws(SystemCallError) {
    try locked(directory) { (fd, path) throws(SystemCallError) in
      let count = try startCount(fd, path: path)
      let digits = String(count.saturatingAdd(1))
      let line = String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "\n"
      try Syscall.write(fd, Array(line.utf8), at: 0, path: path)
    }
  }

  /// Counts how `session` ended, install-wide and for its release, unless it was counted
  /// already; then, still under the lock and before the counts are written, `queue` gets the
  /// metrics after it (to queue its summary: a kill in between leaves the session uncounted,
  /// and its summary queued, which the next run does not queue again). Returns
  /// the metrics after it.
  @discardableResult
  static func countEnd(
    _ session: PreviousSession, directory: String, problem: (String) -> Void = { _ in },
    queue: (SessionMetrics) -> Void = { _ in }
  ) throws(SystemCallError) -> SessionMetrics {
    try locked(directory) { (fd, path) throws(SystemCallError) in
      var stored = load(directory, problem: problem)
      stored.sessions = try startCount(fd, path: path)
      let id = session.sessionID.description
      var counted = stored.countedSessionIDs ?? []
      guard !counted.contains(id) else { return stored.metrics }
      switch session.end {
      case .clean, .terminatedBySignal: stored.cleanSessions = stored.cleanSessions.saturatingAdd(1)
      case .crash: stored.crashedSessions = stored.crashedSessions.saturatingAdd(1)
      case .abnormalTermination: stored.abnormalSessions = stored.abnormalSessions.saturatingAdd(1)
      }
      count(session, into: &stored)
      counted.append(id)
      stored.countedSessionIDs = Array(counted.suffix(rememberedSessions))
      queue(stored.metrics)
      let bytes = try? JSONEncoder().encode(stored)
      try Syscall.writeFileAtomically(metricsPath(directory), Array(bytes ?? Data()), durable: false)
      return stored.metrics
    }
  }

  /// Adds `session` to its release's counts (see `maxReleases`) and raises the revision.
  private static func count(_ session: PreviousSession, into stored: inout Stored) {
    let now = SystemClock.wallNanoseconds()
    var releases = stored.releases ?? [:]
    let version = session.appVersion ?? ""
    var release = releases[version] ?? ReleaseCounts()
    if release.firstCountedUnixNano == 0 { release.firstCountedUnixNano = now }
    // A clock set back must not make a later point older than the start.
    release.lastCountedUnixNano = max(now, release.firstCountedUnixNano)
    switch session.end {
    case .clean: release.clean = release.clean.saturatingAdd(1)
    case .terminatedBySignal: release.terminatedBySignal = release.terminatedBySignal.saturatingAdd(1)
    case .crash: release.crashed = release.crashed.saturatingAdd(1)
    case .abnormalTermination where session.uncleanEndCause == .hang:
      release.hang = release.hang.saturatingAdd(1)
    case .abnormalTermination: release.abnormal = release.abnormal.saturatingAdd(1)
    }
    release.resource = session.resource.filter { !perProcessKeys.contains($0.key) }
    releases[version] = release
    while releases.count > maxReleases,
      let oldest = releases.min(by: {
        ($0.value.lastCountedUnixNano, $0.key) < ($1.value.lastCountedUnixNano, $1.key)
      })
    {
      releases[oldest.key] = nil
    }
    stored.releases = releases
    stored.revision = (stored.revision ?? 0).saturatingAdd(1)
  }

  /// The per-release counts to export, and their revision, when a count was made since the
  /// last export (`exported(revision:)`); nil otherwise.
  package static func unexported(directory: String)
    -> (releases: [String: ReleaseCounts], revision: Int, installID: String)?
  {
    try? locked(directory) { (_, _) throws(SystemCallError) -> ([String: ReleaseCounts], Int, String)? in
      let stored = load(directory)
      let revision = stored.revision ?? 0
      guard revision > stored.exportedRevision ?? 0, let releases = stored.releases, !releases.isEmpty else {
        return nil
      }
      return (releases, revision, stored.installID)
    }
  }

  /// Records that the counts as of `revision` went out (or will never go anywhere): a later
  /// export waits for a new count.
  package static func exported(revision: Int, directory: String) {
    _ = try? locked(directory) { (_, _) throws(SystemCallError) in
      var stored = load(directory)
      guard revision > stored.exportedRevision ?? 0 else { return }
      stored.exportedRevision = min(revision, stored.revision ?? 0)
      let bytes = try? JSONEncoder().encode(stored)
      try Syscall.writeFileAtomically(metricsPath(directory), Array(bytes ?? Data()), durable: false)
    }
  }

  /// The metrics now (a new install id is made, and kept, the first time; a damaged file is
  /// quarantined and `problem` hears it).
  package static func read(directory: String, problem: (String) -> Void = { _ in }) throws(SystemCallError)
    -> SessionMetrics
  {
    try locked(directory) { (fd, path) throws(SystemCallError) in
      var stored = load(directory, problem: problem)
      stored.sessions = try startCount(fd, path: path)
      if !Syscall.fileExists(metricsPath(directory)), let bytes = try? JSONEncoder().encode(stored) {
        try Syscall.writeFileAtomically(metricsPath(directory), Array(bytes), durable: false)
      }
      return stored.metrics
    }
  }

  /// `session-metrics.json`, or a fresh one when missing or unreadable. An unreadable one is
  /// moved to `quarantine/` with its reason (CrumbsDirectory.quarantine(damaged:)), never
  /// overwritten, and `problem` hears it. Called under the lock.
  private static func load(_ directory: String, problem: (String) -> Void = { _ in }) -> Stored {
    let file = metricsPath(directory)
    let damage: String
    do {
      let bytes = try Syscall.readFile(file, limit: maxFileSize + 1)
      if bytes.count > maxFileSize {
        damage = "larger than \(maxFileSize) bytes"
      } else {
        return try JSONDecoder().decode(Stored.self, from: Data(bytes))
      }
    } catch let error as SystemCallError where error.errno == .noSuchFileOrDirectory {
      return Stored(installID: SessionID().description)
    } catch {
      damage = "\(error)"
    }
    problem(CrumbsDirectory(directory).quarantine(damaged: file, what: "session metrics", damage: damage))
    return Stored(installID: SessionID().description)
  }

  /// A larger `session-metrics.json` is not ours (it holds a few hundred counted ids and the
  /// counts of at most `maxReleases` releases).
  static let maxFileSize = 1 << 20

  /// The number on the first line of `session-starts` (0 when empty, negative or not a number).
  private static func startCount(_ fd: Int32, path: String) throws(SystemCallError) -> Int {
    let bytes = try Syscall.read(fd, at: 0, count: 32, path: path)
    let digits = bytes.prefix { $0 != UInt8(ascii: "\n") }
    return max(0, Int(String(decoding: digits, as: UTF8.self)) ?? 0)
  }

  private static let lock = LockFile()

  /// Runs `body` with `session-starts` open and exclusively locked against other processes and
  /// this process's other threads (LockFile).
  private static func locked<Result>(
    _ directory: String, _ body: (Int32, String) throws(SystemCallError) -> Result
  ) throws(SystemCallError) -> Result {
    let path = CrumbsDirectory(directory).path(.sessionStarts)
    return try lock.withLock(path: path) { fd throws(SystemCallError) -> Result in try body(fd, path) }
  }
}
