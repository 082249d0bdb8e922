// ClosingSpanQueue.swift — the spans a death left open (ClosingSpans: each operation of the
// in-flight ledger with a trace id, ended at the death), queued once per ended session and
// sent over OTLP `/v1/traces` by the same outbox, under the same rules, as the session
// summaries (SessionSummaries.swift).
//
// Entry points, in call order:
//   ClosingSpanQueue.enqueue   by the run that counts the ended session (makePostMortemProcessor's
//                              sessionEnded, inside SessionMetricsFile.countEnd's lock, beside the
//                              summary: whichever of the next launch and `crumbs collect` claims
//                              the session queues its spans, once), from its stored report (so
//                              redacted), as `closing-spans/<time>-<session>.json`; at most
//                              `SessionSummaryQueue.maxQueued` files, the oldest deleted first
//   ClosingSpanQueue.events    SessionSummaryOutbox.queuedEvents: one traces event per file
//   SessionSummaryOutbox.remove  once one destination accepted it (2xx), or every one refused it
//                              for good (a collector without `/v1/traces` answers 404: dropped,
//                              never retried, and the logs and summaries go on as before)
//
// Why sent once: a file is queued only by the run that counts its session (counted session ids
// are kept under the metrics lock), and it is sent and removed by the uploader under the
// store's delivery lock, which the client's uploader and the collector's share: two processes
// never send the same file. At least once: a file stays until a destination takes it (a
// process killed between the server's 2xx and the removal sends it again: a backend sees the
// same span ids twice, as with any at-least-once export). Consent, the `disabled` switch,
// hooks, rate limit, 429 pauses and retry policy are the summaries' (the outbox's).
//
// The folder is written by the app and read by whoever delivers (the collector may be root):
// opened beneath the Crumbs directory without following a link, files read as regular files of
// the directory's owner, bounded, without blocking. Not signal-safe.

import CrumbsPlatform
import FoundationEssentials

enum ClosingSpanQueue {
  static func folder(_ directory: String) -> String { CrumbsDirectory(directory).path(.closingSpans) }

  /// The folder, opened beneath the Crumbs directory with no link followed; nil when missing.
  static func open(_ directory: String) -> Int32? {
    try? Syscall.openDirectory(folder(directory), beneath: directory)
  }

  /// Spans kept per death: a ledger larger than this (65536 at most) sends its oldest ones.
  static let maxSpansPerDeath = 4096
  /// The largest file read back (a 4096-span file of 128-byte names and full attributes).
  static let maxFileBytes = 16 << 20

  /// Queues the spans `session`'s report leaves open; nothing when it has none to close.
  static func enqueue(_ session: PreviousSession, directory: String) {
    guard let report = session.report?.report, var spans = ClosingSpans(report: report) else { return }
    spans.operations = Array(spans.operations.prefix(maxSpansPerDeath))
    guard (try? Syscall.makeDirectory(folder(directory))) != nil, let queue = open(directory) else { return }
    defer { Syscall.close(queue) }
    let id = session.sessionID.description
    let queued = (try? Syscall.directoryEntries(of: queue, path: folder(directory))) ?? []
    // A run killed after counting a session and before removing its files counts it again.
    guard !queued.contains(where: { $0.hasSuffix("-" + id + ".json") }) else { return }
    let time = String(SystemClock.wallNanoseconds())
    let name = String(repeating: "0", count: max(0, 20 - time.count)) + time + "-" + id + ".json"
    // Without fsync, as the summaries: a power loss may lose the spans, never tear them.
    if let bytes = try? JSONEncoder().encode(spans) {
      try? Syscall.writeFileAtomically(
        named: name, in: queue, Array(bytes), durable: false, path: folder(directory) + "/" + name)
    }
    SessionSummaryQueue.trim(queue, path: folder(directory))
  }

  /// The queued spans as traces events, oldest first. Unreadable files are moved aside with the
  /// reason (deleted only by the trim, as the oldest).
  static func events(directory: String) -> [OutboxEvent] {
    guard let queue = open(directory) else { return [] }
    defer { Syscall.close(queue) }
    let path = folder(directory)
    let names = ((try? Syscall.directoryEntries(of: queue, path: path)) ?? []).filter {
      $0.hasSuffix(".json")
    }
    var events: [OutboxEvent] = []
    for name in names.sorted() {
      guard
        let bytes = try? Syscall.readFile(
          named: name, in: queue, limit: maxFileBytes, path: path + "/" + name,
          owner: Syscall.status(of: ".", in: queue)?.owner),
        let spans = try? JSONDecoder().decode(ClosingSpans.self, from: Data(bytes))
      else {
        try? Syscall.writeFileAtomically(
          named: name + ".reason", in: queue, Array("unreadable closing spans\n".utf8),
          path: path + "/" + name + ".reason")
        try? Syscall.rename(
          named: name, in: queue, to: name + ".unreadable", in: queue, path: path + "/" + name)
        continue
      }
      // The key is the file's name (with a prefix no summary's name has): `remove` finds it.
      events.append(OutboxEvent(id: spans.reportID, key: keyPrefix + name, traces: spans.batch()))
    }
    return events
  }

  /// An event key's prefix: the event is one of this queue's files.
  static let keyPrefix = "closing-spans:"

  /// Removes the file of `event` (one of `events`); false for any other event.
  static func remove(_ event: OutboxEvent, directory: String) -> Bool {
    guard event.traces != nil, event.key.hasPrefix(keyPrefix) else { return false }
    let name = String(event.key.dropFirst(keyPrefix.count))
    guard !name.isEmpty, !name.utf8.contains(UInt8(ascii: "/")), let queue = open(directory) else {
      return true
    }
    defer { Syscall.close(queue) }
    Syscall.removeTree(named: name, in: queue)
    return true
  }
}
