// HangFacts.swift — how a hang is told, the one statement for the reports made while it lives
// (the client's watchdog: `hang` reports) and those made after the process ended during it (the
// next launch: CrashReportBuilder+Hang.swift): attribute keys and the stalled thread's top
// frames. Durations in words are OngoingHang.durationText's ("7.3 s", "31 s", "12 min 5 s").
// Not signal-safe.

import CrumbsRecorder

package enum HangFacts {
  /// The stalled watch's name (`concurrency-pool`, `main-queue`, a heartbeat's name).
  package static let watchKey = "crumbs.hang.watch"
  /// How long the watch was silent, integer milliseconds (as `crumbs.process.uptime_ms`): so far
  /// while it goes on, all of it once it ended; at least this long when the process ended.
  package static let durationKey = "crumbs.hang.duration_ms"
  /// When the watch last showed life (ISO 8601).
  package static let sinceKey = "crumbs.hang.since"
  /// The stalled thread's top frames ("f ← g ← h"), when known.
  package static let framesKey = "crumbs.hang.frames"
  /// The threshold it was silent past, integer milliseconds (`hang` reports).
  package static let thresholdKey = "crumbs.hang.threshold_ms"
  /// "true" while the hang goes on (a `hang` report stored during it), "false" once it ended.
  package static let ongoingKey = "crumbs.hang.ongoing"
  /// The operation a hang of an operation is of: its name as last set (`hangs.operationThreshold`).
  package static let operationKey = "crumbs.hang.operation"
  /// That operation's trace id and span id, when it was begun with them.
  package static let operationTraceIDKey = "crumbs.hang.operation.trace_id"
  package static let operationSpanIDKey = "crumbs.hang.operation.span_id"
  /// The thread that began it (a kernel tid).
  package static let operationThreadKey = "crumbs.hang.operation.thread_id"
  /// The wait-for graph's verdict over the captured threads: "deadlock" (a cycle of threads,
  /// each waiting for a lock the next holds) or "chain" (waits ending at a thread that waits
  /// for nobody named). Absent when no thread waited for a named owner.
  package static let verdictKey = "crumbs.hang.verdict"
  /// The verdict's threads in wait order, kernel tids joined by ",".
  package static let verdictThreadsKey = "crumbs.hang.verdict.threads"
  /// The locks they wait for ("0x…", joined by ","; where each lock begins): the i-th thread's.
  package static let verdictLocksKey = "crumbs.hang.verdict.locks"
  /// Where each waiting thread asked for its lock (its first function outside libc), in the
  /// order of the threads, joined by " | ".
  package static let verdictSitesKey = "crumbs.hang.verdict.sites"
  /// In a chain: what its last thread does, under its first app frame ("sleeping in
  /// clock_nanosleep under Worker.backoff()", "running").
  package static let verdictEndKey = "crumbs.hang.verdict.end"
  /// The kind of each lock of `verdictLocksKey` (`mutex`, `pi_mutex`, `rwlock`), joined by ",".
  package static let verdictLockKindsKey = "crumbs.hang.verdict.lock_kinds"
  /// A `hang` report's exception type.
  package static let exceptionType = "Hang"

  /// `nanoseconds` as the attributes' integer milliseconds.
  package static func milliseconds(_ nanoseconds: UInt64) -> String { String(nanoseconds / 1_000_000) }

  /// `nanoseconds` in words ("7.3 s").
  package static func text(_ nanoseconds: UInt64) -> String { OngoingHang.durationText(nanoseconds) }

  /// The functions a stalled thread was in, innermost first, joined by " ← ": at most `limit`,
  /// after the C library's own frames (the blocking call's wrappers) that lead the stack.
  package static func topFrames(_ frames: [CrashReport.Frame], limit: Int = 4) -> String {
    let named = frames.compactMap { frame -> (function: String, inLibC: Bool)? in
      guard let function = frame.function else { return nil }
      let file = frame.module.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? ""
      return (function, file.hasPrefix("libc.so") || file.hasPrefix("libc-") || file.hasPrefix("ld-linux"))
    }
    let fromApp = named.drop { $0.inLibC }
    let chosen = fromApp.isEmpty ? named[...] : fromApp
    return chosen.prefix(limit).map(\.function).joined(separator: " ← ")
  }

  /// Where each waiting thread of `verdict` asked for its lock: its first frame in the app's
  /// own code (`appFrame`, with `executable`), else its first frame outside libc (`topFrames`
  /// with one frame: a lock taken inside a library, or no executable given), "?" for a thread
  /// without named frames; one a lock.
  package static func lockSites(
    _ verdict: WaitVerdict, threads: [CrashReport.Thread], executable: String? = nil
  )
    -> [String]
  {
    verdict.threads.prefix(verdict.locks.count).map { tid in
      let thread = threads.first { $0.id == Int(tid) }
      let site =
        thread.flatMap { thread in executable.flatMap { appFrame(thread.frames, executable: $0) } }
        ?? thread.map { topFrames($0.frames, limit: 1) } ?? ""
      return site.isEmpty ? "?" : site
    }
  }

  /// `verdict` as the report's attributes (verdictKey and the keys beside it), with the lock
  /// sites `lockSites` found in `threads`.
  package static func verdictAttributes(
    _ verdict: WaitVerdict, threads: [CrashReport.Thread], executable: String? = nil
  ) -> [String: String] {
    var attributes = [
      verdictKey: verdict.kind.rawValue,
      verdictThreadsKey: verdict.threads.map(String.init).joined(separator: ","),
      verdictLocksKey: verdict.locks.map { "0x" + String($0, radix: 16) }.joined(separator: ","),
      verdictSitesKey: lockSites(verdict, threads: threads, executable: executable).joined(separator: " | "),
    ]
    if let end = verdict.endText { attributes[verdictEndKey] = end }
    if !verdict.lockKinds.isEmpty {
      attributes[verdictLockKindsKey] = verdict.lockKinds.map(\.rawValue).joined(separator: ",")
    }
    return attributes
  }

  /// The first frame of `frames` in the app's own code: in `executable` (the main program's
  /// path, as frames name their module), named, not an inlined call; nil when none is.
  package static func appFrame(_ frames: [CrashReport.Frame], executable: String) -> String? {
    frames.first { $0.module == executable && $0.function != nil && !$0.isInlined }?.function
  }

  /// `verdict` with its chain's end named by the last thread's first app frame (`appFrame`),
  /// when `threads` has one.
  package static func namingEnd(_ verdict: WaitVerdict, threads: [CrashReport.Thread], executable: String)
    -> WaitVerdict
  {
    guard verdict.kind == .chain, let last = verdict.threads.last,
      let thread = threads.first(where: { $0.id == Int(last) })
    else { return verdict }
    var named = verdict
    named.endFrame = appFrame(thread.frames, executable: executable)
    return named
  }
}
