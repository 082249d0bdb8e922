// HangFacts.swift — how a hang is told, the one statement for the reports made while it lives
// (the client's watchdog) and those made after a kill during it (the next launch): attribute
// keys, the duration in words, and the stalled thread's top frames. Not signal-safe.

package enum HangFacts {
  /// The stalled watch's name (`concurrency-pool`, `main-queue`, a heartbeat's name).
  package static let watchKey = "crumbs.hang.watch"
  /// Seconds the watch was silent: so far while it goes on, all of it once it ended.
  package static let durationKey = "crumbs.hang.duration_s"
  /// The threshold it was silent past, in seconds.
  package static let thresholdKey = "crumbs.hang.threshold_s"
  /// "true" while the hang goes on (a report stored during it), "false" once it ended.
  package static let ongoingKey = "crumbs.hang.ongoing"
  /// The report's exception type.
  package static let exceptionType = "Hang"

  /// `nanoseconds` as seconds with one decimal ("7.3"), rounded to the nearest tenth.
  package static func seconds(_ nanoseconds: UInt64) -> String {
    let tenths = nanoseconds / 100_000_000 + (nanoseconds % 100_000_000 >= 50_000_000 ? 1 : 0)
    return "\(tenths / 10).\(tenths % 10)"
  }

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
}
