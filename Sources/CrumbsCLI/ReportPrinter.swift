// Human-readable reports for the terminal (colours only on a terminal).

import Crumbs
import Foundation

/// ANSI styling, or none.
struct TerminalStyle {
  var enabled: Bool
  func wrap(_ text: String, _ code: String) -> String { enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
  func bold(_ text: String) -> String { wrap(text, "1") }
  func dim(_ text: String) -> String { wrap(text, "2") }
  func red(_ text: String) -> String { wrap(text, "1;31") }
  func yellow(_ text: String) -> String { wrap(text, "33") }
  func cyan(_ text: String) -> String { wrap(text, "36") }
}

struct ReportPrinter {
  var style: TerminalStyle
  var breadcrumbLimit = 15
  /// Frames shown per thread other than the crashing one (the report has them all).
  var threadFrameLimit = 4

  /// A frame's lines of source, numbered, its own line marked `>`.
  func sourceLines(_ source: CrashReport.SourceLines, line: Int?) -> [String] {
    let last = source.startLine + max(0, source.lines.count - 1)
    let width = String(last).count
    var out = source.lines.enumerated().map { offset, text in
      let number = source.startLine + offset
      let label = String(repeating: " ", count: width - String(number).count) + String(number)
      let row = (number == line ? "> " : "  ") + label + " | " + text
      return "      " + (number == line ? style.bold(row) : style.dim(row))
    }
    if source.newerThanModule == true {
      out.append("      " + style.yellow("(the source file changed after the executable was built)"))
    }
    return out
  }

  func render(_ stored: StoredReport) -> String {
    let report = stored.report
    var lines: [String] = []
    lines.append(style.red("\(report.exceptionType)") + " — " + report.exceptionMessage)
    lines.append("")
    func row(_ name: String, _ value: String) {
      lines.append("  " + style.dim(name.padding(toLength: 10, withPad: " ", startingAt: 0)) + value)
    }
    row("report", "\(report.id)  (\(report.kind.rawValue), \(stored.state.rawValue))")
    let app = report.resource["service.name"] ?? "?"
    row("session", "\(report.sessionID)  (\(app), pid \(report.resource["process.pid"] ?? "?"))")
    row("time", "\(report.time)  (read \(report.observedTime))")
    if let thread = report.threadID {
      row("thread", "\(thread)" + (report.threadName.map { " \"\($0)\"" } ?? ""))
    }
    if report.kind == .hang, let watch = report.attributes[HangFacts.watchKey]?.text {
      let duration =
        report.attributes[HangFacts.durationKey].flatMap { UInt64($0.text) }.map {
          " for " + HangFacts.text($0 &* 1_000_000)
        } ?? ""
      let ongoing = report.attributes[HangFacts.ongoingKey] == "true" ? " (going on when stored)" : ""
      row("hang", "\(watch) silent\(duration)" + ongoing)
    }
    if let signal = report.signal, let sender = signal.senderPID {
      row("sender", "pid \(sender)" + (signal.senderUID.map { ", uid \($0)" } ?? ""))
    }
    if let duration = report.handlerDurationNanoseconds {
      row("handler", String(format: "%.3f ms in the signal handler", Double(duration) / 1e6))
    }
    row(
      "system",
      [report.resource["os.description"], report.resource["os.version"], report.resource["host.arch"]]
        .compactMap { $0 }.joined(separator: ", "))
    for item in report.evidence { row("evidence", item) }
    for item in report.damage { row("damage", style.yellow(item)) }

    lines.append("")
    lines.append(style.bold("Stack trace"))
    let stack = report.exceptionStacktrace.split(separator: "\n")
    for (position, text) in stack.enumerated() {
      lines.append("  " + text)
      // The stack text has a line per frame, in order: the frame's source lines go under it.
      if stack.count == report.frames.count, let source = report.frames[position].source {
        lines.append(contentsOf: sourceLines(source, line: report.frames[position].line))
      }
    }

    if let threads = report.threads {
      lines.append("")
      lines.append(
        style.bold("Threads")
          + style.dim(
            "  (\(threadSummary(threads, notRecorded: report.threadsNotRecorded, kind: report.kind)))"))
      for thread in threads {
        var heading = "  Thread \(thread.id)" + (thread.name.map { " \"\($0)\"" } ?? "")
        heading +=
          thread.crashed
          ? "  " + style.red("crashed") + style.dim(" (stack trace above)")
          : "  " + style.dim(thread.state.description)
        if let signal = thread.signal, !thread.crashed { heading += " " + style.red(signal) }
        if let reasons = thread.notSignalled, !reasons.isEmpty {
          heading += style.dim(
            " (not signalled: \(reasons.map(Self.notSignalledPhrase).joined(separator: ", ")))")
        }
        lines.append(heading)
        if thread.crashed { continue }
        // What it was blocked in at crash time, where jstack puts a thread's wait.
        if let wait = thread.wait { lines.append("    - " + wait.activity) }
        let shown = thread.frames.prefix(threadFrameLimit)
        lines.append(
          contentsOf: CrashReport.stacktrace(Array(shown)).split(separator: "\n").map { "    " + $0 })
        if thread.frames.count > shown.count {
          lines.append(style.dim("    … \(thread.frames.count - shown.count) more in the report"))
        }
      }
    }

    if let open = report.openOperations {
      lines.append("")
      lines.append(contentsOf: openOperationLines(open))
    }

    lines.append("")
    let trail = report.breadcrumbs
    lines.append(
      style.bold("Breadcrumbs")
        + style.dim(
          "  (\(trail.count) kept: \(trail.valid) valid, \(trail.torn) torn, \(trail.overwritten) overwritten by newer ones)"
        ))
    let crumbs = breadcrumbs(of: stored)
    let afterTheCrash = firstAfterTheCrash(crumbs, report: report)
    for (index, crumb) in crumbs.enumerated().suffix(breadcrumbLimit) {
      var text = "  " + line(for: crumb)
      if index >= afterTheCrash { text += "  " + style.yellow("[after the crash]") }
      lines.append(text)
    }
    if crumbs.count > breadcrumbLimit {
      lines.append(style.dim("  … \(crumbs.count - breadcrumbLimit) older in the attachment"))
    }

    lines.append("")
    lines.append(style.bold("Stored"))
    row("report", stored.reportPath)
    if let attachment = trail.attachment {
      row("trail", stored.attachmentPath(attachment) + style.dim("  (read it with: lz4 -dc FILE)"))
    }
    return lines.joined(separator: "\n")
  }

  /// "Open operations (2 of 512 entries)" and one line each, oldest first: age at the death,
  /// name, kind, thread, trace id, attributes; the one begun on the crashing thread marked.
  func openOperationLines(_ open: CrashReport.OpenOperations, when: String = "at the death") -> [String] {
    var notes = ["\(open.operations.count) open \(when), \(open.capacity) entries"]
    if open.notHeld > 0 { notes.append("\(open.notHeld) not held: the ledger was full") }
    if open.unreadable > 0 { notes.append("\(open.unreadable) unreadable") }
    var lines = [style.bold("Open operations") + style.dim("  (" + notes.joined(separator: ", ") + ")")]
    if let damage = open.damage { lines.append("  " + style.yellow(damage)) }
    for operation in open.operations {
      var text =
        "  " + String(format: "%9.3f s", Double(operation.ageNanoseconds) / 1e9) + "  " + operation.name
      text += style.dim("  \(operation.kind), thread \(operation.threadID)")
      if let trace = operation.traceID { text += style.dim("  trace \(trace)") }
      if !operation.attributes.isEmpty {
        text += style.dim("  " + operation.attributes.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
      }
      if operation.onCrashingThread == true { text += "  " + style.red("[crashing thread]") }
      lines.append(text)
    }
    return lines
  }

  /// A `CrashReport.Thread.notSignalled` reason as a person reads it.
  static func notSignalledPhrase(_ reason: String) -> String {
    switch reason {
    case "seccomp": "under a seccomp filter"
    case "in_system_call": "blocked in a system call, walked where it waits"
    case "blocks_signals": "blocks the capture's signals"
    case "stopped": "stopped or traced"
    case "no_signal": "no capture signal available"
    default: reason
    }
  }

  /// "102 at crash time: 101 captured, 1 did not answer" ("… when the hang was seen" for a hang).
  func threadSummary(_ threads: [CrashReport.Thread], notRecorded: Int?, kind: CrashReport.Kind) -> String {
    let order: [CrashReport.Thread.State] = [
      .captured, .alsoCrashed, .noAnswer, .notAsked, .requesting, .unknown,
    ]
    let counts = order.compactMap { state -> (String, Int)? in
      let count = threads.filter { !$0.crashed && $0.state == state }.count
      return count > 0 ? (state.description, count) : nil
    }
    let when = kind == .hang ? "when the hang was seen" : "at crash time"
    var text = "\(threads.count + (notRecorded ?? 0)) \(when)"
    if !counts.isEmpty { text += ": " + counts.map { "\($0.1) \($0.0)" }.joined(separator: ", ") }
    if let notRecorded, notRecorded > 0 { text += ", \(notRecorded) not recorded (the record was full)" }
    return text
  }

  /// The trail's lines, decoded from the LZ4 attachment.
  func breadcrumbs(of stored: StoredReport) -> [[String: Any]] {
    guard let name = stored.report.breadcrumbs.attachment,
      let compressed = try? stored.readFile(name, limit: 256 << 20),
      let text = try? LZ4Frame.decompress(compressed)
    else { return [] }
    return text.split(separator: UInt8(ascii: "\n")).compactMap {
      try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any]
    }
  }

  /// Index of the first breadcrumb appended after the crash (`crumbs.count` when none was):
  /// the ones after the crash handler's own fatal breadcrumb (appended from the signal handler
  /// on the crashing thread), which other threads appended while the chained handlers ran.
  /// Without that breadcrumb (the handler could not append), the ones stamped after the crash
  /// time. The trail is oldest first.
  func firstAfterTheCrash(_ crumbs: [[String: Any]], report: CrashReport) -> Int {
    guard report.kind == .crash else { return crumbs.count }
    let fatal = crumbs.lastIndex { crumb in
      crumb["signal_handler"] as? Bool == true && crumb["level"] as? String == "fatal"
        && (report.threadID == nil || crumb["thread"] as? Int == report.threadID)
        && (crumb["message"] as? String ?? "").hasPrefix(report.exceptionType)
    }
    if let fatal { return fatal + 1 }
    // Same form as the trail's timestamps (microseconds, UTC), so the strings compare as times.
    let crashTime = ISO8601.string(nanoseconds: report.timeUnixNano, fractionDigits: 6)
    return crumbs.firstIndex { ($0["timestamp"] as? String ?? "") > crashTime } ?? crumbs.count
  }

  func line(for crumb: [String: Any]) -> String {
    let timestamp = (crumb["timestamp"] as? String).map { String($0.dropFirst(11).prefix(12)) } ?? "?"
    let level = crumb["level"] as? String ?? "?"
    let type = crumb["type"] as? String ?? "?"
    let message = crumb["message"] as? String ?? ""
    let attributes = (crumb["attributes"] as? [String: String] ?? [:]).sorted { $0.key < $1.key }
      .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    var levelText = level.padding(toLength: 7, withPad: " ", startingAt: 0)
    switch level {
    case "warning": levelText = style.yellow(levelText)
    case "error", "fatal": levelText = style.red(levelText)
    default: levelText = style.dim(levelText)
    }
    // The writing thread, so the breadcrumbs of requests served side by side read apart.
    let thread = (crumb["thread"] as? Int).map { style.dim("[\($0)]") + " " } ?? ""
    return style.dim(timestamp) + " " + levelText + " "
      + style.cyan(type.padding(toLength: 8, withPad: " ", startingAt: 0))
      + " " + thread + message + (attributes.isEmpty ? "" : style.dim("  " + attributes))
  }
}
