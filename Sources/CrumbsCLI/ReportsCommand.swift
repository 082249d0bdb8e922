// `crumbs reports send|list|show` and `crumbs report decode`: the report store from the command
// line. `send` runs one delivery pass (ReportUploader.deliverPendingNow) with a progress line
// per attempt; the store keeps the attempt state, so a later `send` or the app continues it.

import ArgumentParser
import Crumbs
import Foundation
import Synchronization

struct ReportsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "reports",
    abstract: "List, show and send the stored reports.",
    subcommands: [ReportsSendCommand.self, ReportsListCommand.self, ReportsShowCommand.self])
}

struct ReportCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "report",
    abstract: "Work with one report file.",
    subcommands: [ReportDecodeCommand.self])
}

struct StoreOptions: ParsableArguments {
  @Option(help: "The Crumbs directory (holding reports/).")
  var dir: String = "crumbs-demo"

  func openStore() throws -> ReportStore {
    do {
      return try ReportStore(directory: absolute(dir))
    } catch {
      printError("crumbs: cannot open the report store in \(dir): \(error)")
      throw ExitCode.failure
    }
  }
}

struct ReportsSendCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "send",
    abstract: "Send the pending reports (one pass: each is tried once, failures stay pending).")

  @OptionGroup var store: StoreOptions

  @Option(help: "OTLP/HTTP base URL (POST {URL}/v1/logs), e.g. http://localhost:4318.")
  var otlp: String?

  @Option(
    help:
      "Backtrace endpoint (POST {URL}/post?format=json&token=T), or a full submission URL without --token.")
  var backtrace: String?

  @Option(help: "Backtrace submission token (never printed).")
  var token: String?

  @Option(name: .customLong("header"), help: "An extra header, 'Name: value' (repeatable).")
  var headers: [String] = []

  @Option(
    name: .customLong("secret-header"),
    help: "A header whose value is never printed, e.g. 'Authorization: Bearer …'.")
  var secretHeaders: [String] = []

  @Flag(help: "OTLP/JSON instead of protobuf.")
  var otlpJSON = false

  @Flag(help: "Also send each breadcrumb as its own OTLP log record.")
  var breadcrumbRecords = false

  @Option(help: "Seconds to wait for a server.")
  var timeout: Double = 30

  @Option(help: "Attempts per report before it is dropped.")
  var retryLimit: Int = 3

  func validate() throws {
    guard (otlp == nil) != (backtrace == nil) else {
      throw ValidationError("give exactly one destination: --otlp URL or --backtrace URL [--token T]")
    }
    for header in headers + secretHeaders where HTTPHeader(parsing: header) == nil {
      throw ValidationError("a header is 'Name: value'")
    }
  }

  func run() throws {
    let reportStore = try store.openStore()
    let extra =
      headers.compactMap { HTTPHeader(parsing: $0) }
      + secretHeaders.compactMap { HTTPHeader(parsing: $0, isSecret: true) }
    let destination: any ReportDestination
    if let otlp {
      destination = OTLPDestination(
        endpoint: otlp, headers: extra, encoding: otlpJSON ? .json : .protobuf,
        breadcrumbsAsLogRecords: breadcrumbRecords)
    } else if let token {
      destination = BacktraceDestination(endpoint: backtrace!, token: token, headers: extra)
    } else {
      destination = BacktraceDestination(submissionURL: backtrace!, headers: extra)
    }
    var settings = DeliverySettings()
    settings.honoursSchedule = false
    settings.retryLimit = retryLimit
    let pending = reportStore.list(.pending).reports.count
    guard pending > 0 else {
      print("no pending reports in \(reportStore.path)")
      return
    }
    let progress = SendProgress(total: pending)
    let uploader = ReportUploader(
      store: reportStore, destinations: [destination], settings: settings,
      transport: URLSessionTransport(timeout: timeout), delegate: progress)
    let pass = uploader.deliverPendingNow()
    if pass.lockBusy {
      printError("crumbs reports send: another process is delivering from this store; try again later")
      throw ExitCode.failure
    }
    for eviction in pass.evictions { print("evicted \(eviction.reportID): \(eviction.reason)") }
    let sent = pass.finished.filter { $0.state == .sent }.count
    let dropped = pass.finished.filter { $0.state == .dropped }.count
    let left = reportStore.list(.pending).reports.count
    print("\(sent) sent, \(dropped) dropped, \(left) still pending")
    if left > 0 || dropped > 0 { throw ExitCode.failure }
  }
}

/// Prints `[2/5] sent 3f2c1a0b… → 200` as each attempt ends.
final class SendProgress: ReportUploaderDelegate {
  let total: Int
  private let done = Mutex(0)

  init(total: Int) { self.total = total }

  func serverDidRespond(_ result: DeliveryResult) {
    line(result, verb: result.outcome.isDelivered ? "sent" : "failed", answer: "\(result.status ?? 0)")
  }

  func didFailSending(_ report: CrashReport, result: DeliveryResult) {
    // HTTP answers were printed by serverDidRespond; this covers no answer at all.
    guard result.status == nil else { return }
    line(result, verb: "failed", answer: "")
  }

  private func line(_ result: DeliveryResult, verb: String, answer: String) {
    let index = done.withLock { count in
      count += 1
      return count
    }
    var text = "[\(index)/\(total)] \(verb) \(result.reportID.prefix(8))… → "
    switch result.outcome {
    case .delivered: text += answer
    case .willRetry(let reason, _): text += "\(reason) (stays pending, attempt \(result.attempts))"
    case .throttled(let until):
      text +=
        "429, server asks to wait \(max(0, Int64(until / 1_000_000_000) - Int64(Date().timeIntervalSince1970)))s"
    case .dropped(let reason): text += "\(reason) (dropped)"
    case .limitReached: text += "rate limit"
    }
    // Unbuffered, so a pipe sees each line as the attempt ends.
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
  }
}

extension DeliveryResult.Outcome {
  var isDelivered: Bool {
    if case .delivered = self { return true }
    return false
  }
}

struct ReportsListCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "list", abstract: "List the stored reports, oldest first.")

  @OptionGroup var store: StoreOptions

  @Option(help: "pending, sent, dropped or all.")
  var state: String = "all"

  @Flag(help: "One JSON array.")
  var json = false

  func validate() throws {
    guard state == "all" || ReportState(rawValue: state) != nil else {
      throw ValidationError("--state is pending, sent, dropped or all")
    }
  }

  func run() throws {
    let reportStore = try store.openStore()
    let states = state == "all" ? ReportState.allCases : [ReportState(rawValue: state)!]
    let reports = states.flatMap { reportStore.list($0).reports }
    if json {
      let objects: [[String: Any]] = reports.map { stored in
        var object: [String: Any] = [
          "report.id": stored.report.id, "state": stored.state.rawValue, "kind": stored.report.kind.rawValue,
          "time": stored.report.time, "exception.type": stored.report.exceptionType,
          "exception.message": stored.report.exceptionMessage, "path": stored.path,
        ]
        let delivery = stored.deliveryState()
        if !delivery.destinations.isEmpty {
          object["delivery"] = delivery.destinations.mapValues { history -> [String: Any] in
            var entry: [String: Any] = ["attempts": history.attempts]
            if let outcome = history.outcome { entry["outcome"] = outcome.rawValue }
            if let error = history.lastError { entry["last_error"] = error }
            if let status = history.lastStatus { entry["last_status"] = status }
            return entry
          }
        }
        if let reason = stored.droppedReason() { object["dropped_reason"] = reason }
        return object
      }
      let data = try JSONSerialization.data(
        withJSONObject: objects, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
      print(String(decoding: data, as: UTF8.self))
      return
    }
    guard !reports.isEmpty else {
      print("no reports in \(reportStore.path)")
      return
    }
    for stored in reports {
      let attempts = stored.deliveryState().destinations.map { "\($0.key) ×\($0.value.attempts)" }.sorted()
        .joined(separator: ", ")
      var line =
        "\(stored.report.id)  \(stored.state.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(stored.report.time)  \(stored.report.exceptionType): \(stored.report.exceptionMessage)"
      if !attempts.isEmpty { line += "  [\(attempts)]" }
      if let reason = stored.droppedReason() { line += "  (\(reason))" }
      print(line)
    }
  }
}

struct ReportsShowCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "show", abstract: "Show one report (id or unique prefix).")

  @OptionGroup var store: StoreOptions

  @Argument(help: "The report id, or a unique prefix of it.")
  var id: String

  @Flag(help: "The stored report.json as it is.")
  var json = false

  func run() throws {
    let reportStore = try store.openStore()
    let stored: StoredReport
    do {
      stored = try reportStore.load(id: id)
    } catch {
      printError("crumbs reports show: \(error)")
      throw ExitCode.failure
    }
    if json {
      print(String(decoding: try stored.readFile("report.json", limit: 64 << 20), as: UTF8.self))
      return
    }
    let style = TerminalStyle(enabled: isatty(1) != 0)
    print(ReportPrinter(style: style).render(stored))
    let delivery = stored.deliveryState()
    if !delivery.destinations.isEmpty || stored.droppedReason() != nil {
      print("")
      print(style.bold("Delivery"))
      for (name, history) in delivery.destinations.sorted(by: { $0.key < $1.key }) {
        var line = "  \(name): \(history.attempts) attempt(s)"
        if let outcome = history.outcome { line += ", \(outcome.rawValue)" }
        if let error = history.lastError { line += ", last error: \(error)" }
        if history.outcome == nil, history.nextAttemptUnixNano > 0 {
          line += ", next attempt \(ISO8601.string(nanoseconds: history.nextAttemptUnixNano))"
        }
        print(line)
      }
      if let reason = stored.droppedReason() { print("  dropped: \(reason)") }
    }
  }
}

struct ReportDecodeCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "decode",
    abstract: "Print a report.json pretty-printed, or an .lz4 attachment decompressed.")

  @Argument(help: "A report.json, or an LZ4 attachment such as breadcrumbs.jsonl.lz4.")
  var file: String

  func run() throws {
    let bytes: [UInt8]
    do {
      bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
    } catch {
      printError("crumbs report decode: cannot read \(file)")
      throw ExitCode.failure
    }
    if bytes.starts(with: [0x04, 0x22, 0x4D, 0x18]) {
      do {
        FileHandle.standardOutput.write(Data(try LZ4Frame.decompress(bytes)))
      } catch {
        printError("crumbs report decode: \(file): \(error)")
        throw ExitCode.failure
      }
      return
    }
    do {
      _ = try ReportStore.decode(bytes)
      let object = try JSONSerialization.jsonObject(with: Data(bytes))
      let pretty = try JSONSerialization.data(
        withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
      print(String(decoding: pretty, as: UTF8.self))
    } catch {
      printError("crumbs report decode: \(file) is neither a report nor an LZ4 frame: \(error)")
      throw ExitCode.failure
    }
  }
}
