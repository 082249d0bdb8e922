// SessionSummaries.swift — error-free session metrics, sent as events.
//
// Entry points, in call order:
//   SessionSummaryQueue.enqueue      as each ended session is counted (before its files are
//                                    removed), its summary (how it ended + the install's running
//                                    counts), written to `session-summaries/<time>-<session>.json`;
//                                    at most `maxQueued` are kept, the oldest deleted first (with no
//                                    OTLP destination nothing drains the queue)
//   SessionSummaryQueue.deliver      each queued summary as one OTLP log record, event name
//                                    `crumbs.session.summary`, to every OTLP destination; removed
//                                    once one accepted it (2xx), kept for the next launch otherwise
//
// Summaries carry no crash data, but they still leave the machine: with a consent handler set
// and no standing consent they stay queued. Not signal-safe.

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
}

enum SessionSummaryQueue {
  static let eventName = "crumbs.session.summary"

  static func folder(_ directory: String) -> String { directory + "/session-summaries" }

  /// Summaries kept waiting for a server (a few hundred bytes each); the oldest go first.
  static let maxQueued = 100

  /// Queues a summary per ended session, as `<processed time, 20 digits>-<session>.json` (so
  /// that names sort oldest first); a session already queued is not queued again.
  static func enqueue(_ sessions: [PreviousSession], metrics: SessionMetrics, directory: String) {
    guard !sessions.isEmpty, (try? Syscall.makeDirectory(folder(directory))) != nil else { return }
    let now = SystemClock.wallNanoseconds()
    let queued = (try? Syscall.directoryEntries(folder(directory))) ?? []
    for session in sessions {
      let summary = SessionSummary(
        sessionID: session.sessionID.description, installID: metrics.installID, end: session.end,
        startedUnixNano: session.startedWallNanoseconds, processedUnixNano: now,
        sessions: metrics.sessions, crashedSessions: metrics.crashedSessions,
        abnormalSessions: metrics.abnormalSessions, cleanSessions: metrics.cleanSessions,
        crashFreeRate: metrics.crashFreeRate)
      // A run killed after counting a session and before removing its files counts it again.
      guard !queued.contains(where: { $0.hasSuffix(summary.sessionID + ".json") }) else { continue }
      let time = String(now)
      let name =
        String(repeating: "0", count: max(0, 20 - time.count)) + time + "-" + summary.sessionID + ".json"
      // Without fsync (this may run on the app's thread at start, see processBacklog): a power
      // loss may lose a summary, never tear one.
      if let bytes = try? JSONEncoder().encode(summary) {
        try? Syscall.writeFileAtomically(folder(directory) + "/" + name, Array(bytes), durable: false)
      }
    }
    trim(directory)
  }

  /// Deletes the oldest entries beyond `maxQueued` (by name: the time they were made; names of
  /// an earlier version, without it, count as oldest), unreadable ones set aside included.
  static func trim(_ directory: String) {
    let path = folder(directory)
    let names = (try? Syscall.directoryEntries(path)) ?? []
    guard names.count > maxQueued else { return }
    func age(_ name: String) -> String {
      let stamp = name.utf8.prefix(21)
      let timed =
        stamp.count == 21 && stamp.last == UInt8(ascii: "-")
        && stamp.dropLast().allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
      return timed ? name : ""
    }
    for name in names.sorted(by: { (age($0), $0) < (age($1), $1) }).prefix(names.count - maxQueued) {
      Syscall.removeTree(path + "/" + name)
    }
  }

  /// Sends the queued summaries; returns how many were delivered.
  @discardableResult
  static func deliver(
    directory: String, destinations: [OTLPDestination], resource: [String: String],
    transport: any HTTPTransport
  ) -> Int {
    guard !destinations.isEmpty else { return 0 }
    let names = ((try? Syscall.directoryEntries(folder(directory))) ?? []).filter { $0.hasSuffix(".json") }
    var delivered = 0
    for name in names {
      let path = folder(directory) + "/" + name
      guard let bytes = try? Syscall.readFile(path, limit: 1 << 16),
        let summary = try? JSONDecoder().decode(SessionSummary.self, from: Data(bytes))
      else {
        // Unreadable: moved aside with the reason (deleted only by `trim`, as the oldest).
        try? Syscall.writeFileAtomically(path + ".reason", Array("unreadable session summary\n".utf8))
        try? Syscall.rename(path, to: path + ".unreadable")
        continue
      }
      let batch = OTLPLogBatch(
        resource: OTLPDestination.resourceAttributes(resource),
        scopeName: "crumbs", scopeVersion: CrumbsVersion.string,
        records: [record(summary)])
      var accepted = false
      for destination in destinations {
        let request = destination.request(for: batch, id: summary.sessionID)
        if case .success(let response) = transport.send(request), (200..<300).contains(response.status),
          response.requestSent
        {
          accepted = true
        }
      }
      if accepted {
        _ = try? Syscall.unlink(path)
        delivered += 1
      }
    }
    return delivered
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
      ],
      eventName: eventName)
  }
}
