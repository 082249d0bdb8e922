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
//                          the session to the next run, which must not count it twice.
//
// Entry points, in call order:
//   SessionMetricsFile.countStart(directory:)      the caller's thread, in CrumbsClient.start
//   SessionMetricsFile.countEnd(_:directory:)      the background thread, once per ended session
//   SessionMetricsFile.read(directory:)            the background thread, after the run
//
// The JSON is replaced atomically but without fsync (the lock stays short, and a start waiting
// for it stays cheap): a power loss may undo the last counts, never tear the file. Not
// signal-safe.

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
  /// Share of ended sessions with no crash and no abnormal end.
  public var crashFreeRate: Double {
    // Doubles: the counts come from a file that may be damaged, and must not overflow a sum.
    let ended = Double(crashedSessions) + Double(abnormalSessions) + Double(cleanSessions)
    return ended == 0 ? 1 : Double(cleanSessions) / ended
  }
}

package enum SessionMetricsFile {
  /// Session ids remembered as counted: more than one run can leave unfinished.
  static let rememberedSessions = 256

  static func startsPath(_ directory: String) -> String { directory + "/session-starts" }
  package static func metricsPath(_ directory: String) -> String { directory + "/session-metrics.json" }

  /// What `session-metrics.json` holds.
  private struct Stored: Codable {
    var installID: String
    var sessions = 0
    var crashedSessions = 0
    var abnormalSessions = 0
    var cleanSessions = 0
    var countedSessionIDs: [String]? = []

    init(installID: String) { self.installID = installID }

    var metrics: SessionMetrics {
      SessionMetrics(
        installID: installID, sessions: sessions, crashedSessions: crashedSessions,
        abnormalSessions: abnormalSessions, cleanSessions: cleanSessions)
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

  /// Counts how `session` ended, unless it was counted already; returns the metrics after it.
  @discardableResult
  static func countEnd(_ session: PreviousSession, directory: String) throws(SystemCallError)
    -> SessionMetrics
  {
    try locked(directory) { (fd, path) throws(SystemCallError) in
      var stored = load(directory)
      stored.sessions = try startCount(fd, path: path)
      let id = session.sessionID.description
      var counted = stored.countedSessionIDs ?? []
      guard !counted.contains(id) else { return stored.metrics }
      switch session.end {
      case .clean, .terminatedBySignal: stored.cleanSessions = stored.cleanSessions.saturatingAdd(1)
      case .crash: stored.crashedSessions = stored.crashedSessions.saturatingAdd(1)
      case .abnormalTermination: stored.abnormalSessions = stored.abnormalSessions.saturatingAdd(1)
      }
      counted.append(id)
      stored.countedSessionIDs = Array(counted.suffix(rememberedSessions))
      let bytes = try? JSONEncoder().encode(stored)
      try Syscall.writeFileAtomically(metricsPath(directory), Array(bytes ?? Data()), durable: false)
      return stored.metrics
    }
  }

  /// The metrics now (a new install id is made, and kept, the first time).
  package static func read(directory: String) throws(SystemCallError) -> SessionMetrics {
    try locked(directory) { (fd, path) throws(SystemCallError) in
      var stored = load(directory)
      stored.sessions = try startCount(fd, path: path)
      if !Syscall.fileExists(metricsPath(directory)), let bytes = try? JSONEncoder().encode(stored) {
        try Syscall.writeFileAtomically(metricsPath(directory), Array(bytes), durable: false)
      }
      return stored.metrics
    }
  }

  /// `session-metrics.json`, or a fresh one when missing or unreadable.
  private static func load(_ directory: String) -> Stored {
    (try? Syscall.readFile(metricsPath(directory), limit: 1 << 20)).flatMap {
      try? JSONDecoder().decode(Stored.self, from: Data($0))
    } ?? Stored(installID: SessionID().description)
  }

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
    let path = startsPath(directory)
    return try lock.withLock(path: path) { fd throws(SystemCallError) -> Result in try body(fd, path) }
  }
}
