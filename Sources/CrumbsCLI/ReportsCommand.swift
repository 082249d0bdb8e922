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

struct ReportsSendCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "send",
    abstract: "Send the pending reports (one pass: each is tried once, failures stay pending).",
    discussion: """
      Destination: --otlp URL or --backtrace URL, else the environment's, as the client reads it \
      (CRUMBS_OTLP_ENDPOINT, CRUMBS_BACKTRACE_URL, OTEL_EXPORTER_OTLP_*). With CRUMBS_DISABLED set, \
      nothing is sent (exit 1). \
      The Backtrace token comes from --token-file, CRUMBS_BACKTRACE_TOKEN_FILE or \
      CRUMBS_BACKTRACE_TOKEN, secret headers from \
      --header-file or CRUMBS_SECRET_HEADERS (one 'Name: value' per line). --token and \
      --secret-header still work but are discouraged: a command line shows in ps and the shell's \
      history. Exit 0 when every pending report was delivered (or none was pending), 1 when one \
      stayed pending or was dropped.
      """)

  @OptionGroup var store: StoreOptions

  @OptionGroup var destination: DestinationOptions

  @Flag(help: "OTLP/JSON instead of protobuf.")
  var otlpJSON = false

  @Flag(help: "Also send each breadcrumb as its own OTLP log record.")
  var breadcrumbRecords = false

  @Option(help: "Attempts per report before it is dropped.")
  var retryLimit: Int = 3

  @Flag(help: "Print one JSON object with every result instead of progress lines.")
  var json = false

  func validate() throws { try destination.validate() }

  func run() throws {
    let reportStore = try store.openStore(command: "reports send")
    let environment = CrumbsEnvironment.cli
    if environment.isDisabled {
      throw fail("reports send", "CRUMBS_DISABLED is set: nothing sent (unset it to send)")
    }
    let targets = try destinations(environment)
    guard !targets.isEmpty else {
      throw fail("reports send", DestinationOptions.noDestination, CLIExit.usage)
    }
    var settings = DeliverySettings()
    settings.honoursSchedule = false
    settings.retryLimit = retryLimit
    let pending = reportStore.list(.pending).reports.count
    guard pending > 0 else {
      if json {
        print(SendSummary(results: [], evictions: [], sent: 0, dropped: 0, pending: 0).json())
      } else {
        print("no pending reports in \(reportStore.path)")
      }
      return
    }
    let progress = SendProgress(total: pending, printsLines: !json)
    let uploader = ReportUploader(
      store: reportStore, destinations: targets, settings: settings,
      transport: DeliveryTransport(timeout: destination.timeout), delegate: progress)
    let pass = uploader.deliverPendingNow()
    if pass.lockBusy {
      throw fail("reports send", "another process is delivering from this store; try again later")
    }
    // Nothing was attempted: one line on what is missing and how to install it.
    if let missing = pass.missingTransport { printError("crumbs reports send: \(missing)") }
    let summary = SendSummary(
      results: progress.results, evictions: pass.evictions.map { ($0.reportID, $0.reason) },
      sent: pass.finished.filter { $0.state == .sent }.count,
      dropped: pass.finished.filter { $0.state == .dropped }.count,
      pending: reportStore.list(.pending).reports.count, missingTransport: pass.missingTransport)
    if json {
      print(summary.json())
    } else {
      for eviction in pass.evictions { print("evicted \(eviction.reportID): \(eviction.reason)") }
      print("\(summary.sent) sent, \(summary.dropped) dropped, \(summary.pending) still pending")
    }
    if summary.pending > 0 || summary.dropped > 0 { throw CLIExit.failure }
  }

  /// The flag's destination as the flags shape it, else the environment's, resolved as the
  /// client resolves them (its problems printed).
  func destinations(_ environment: CrumbsEnvironment) throws -> [any ReportDestination] {
    let extra = try destination.allHeaders(command: "reports send")
    if let otlp = destination.otlp {
      return [
        OTLPDestination(
          endpoint: otlp, headers: extra, encoding: otlpJSON ? .json : .protobuf,
          breadcrumbsAsLogRecords: breadcrumbRecords)
      ]
    }
    if let backtrace = destination.backtrace {
      if let token = try destination.backtraceToken(command: "reports send") {
        return [BacktraceDestination(endpoint: backtrace, token: token, headers: extra)]
      }
      return [BacktraceDestination(submissionURL: backtrace, headers: extra)]
    }
    environment.printProblems(command: "reports send")
    return CrumbsConfiguration().resolvedDestinations(environment)
  }
}

/// What `reports send --json` prints: one object.
struct SendSummary {
  var results: [DeliveryResult]
  var evictions: [(id: String, reason: String)]
  var sent: Int
  var dropped: Int
  var pending: Int
  /// Why nothing could be sent (libcurl missing), when that was so.
  var missingTransport: String? = nil

  func json() -> String {
    let objects: [[String: Any]] = results.map { result in
      var object: [String: Any] = [
        "report.id": result.reportID, "destination": result.destination, "attempts": result.attempts,
      ]
      if let status = result.status { object["status"] = status }
      switch result.outcome {
      case .delivered: object["outcome"] = "delivered"
      case .willRetry(let reason, let next):
        object["outcome"] = "will_retry"
        object["reason"] = reason
        if next > 0 { object["next_attempt"] = ISO8601.string(nanoseconds: next) }
      case .throttled(let until):
        object["outcome"] = "throttled"
        object["until"] = ISO8601.string(nanoseconds: until)
      case .dropped(let reason):
        object["outcome"] = "dropped"
        object["reason"] = reason
      case .limitReached: object["outcome"] = "limit_reached"
      }
      return object
    }
    var summary: [String: Any] = [
      "sent": sent, "dropped": dropped, "pending": pending, "results": objects,
      "evicted": evictions.map { ["report.id": $0.id, "reason": $0.reason] },
    ]
    if let missingTransport { summary["missing_transport"] = missingTransport }
    let data =
      (try? JSONSerialization.data(
        withJSONObject: summary, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
    return String(decoding: data, as: UTF8.self)
  }
}

/// Prints `[2/5] sent 3f2c1a0b… → 200` as each attempt ends.
/// Also keeps every result, for `--json`.
final class SendProgress: ReportUploaderDelegate {
  let total: Int
  let printsLines: Bool
  private let done = Mutex<[DeliveryResult]>([])

  init(total: Int, printsLines: Bool = true) {
    self.total = total
    self.printsLines = printsLines
  }

  var results: [DeliveryResult] { done.withLock { $0 } }

  func serverDidRespond(_ result: DeliveryResult) {
    line(result, verb: result.outcome.isDelivered ? "sent" : "failed", answer: "\(result.status ?? 0)")
  }

  func didFailSending(_ report: CrashReport, result: DeliveryResult) {
    // HTTP answers were printed by serverDidRespond; this covers no answer at all.
    guard result.status == nil else { return }
    line(result, verb: "failed", answer: "")
  }

  private func line(_ result: DeliveryResult, verb: String, answer: String) {
    let index = done.withLock { results in
      results.append(result)
      return results.count
    }
    guard printsLines else { return }
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
    let reportStore = try store.openStore(command: "reports list", readOnly: true)
    let states = state == "all" ? ReportState.allCases : [ReportState(rawValue: state)!]
    let reports = states.flatMap { reportStore.list($0).reports }
    // Pending reports that nothing on this machine can send: say so, on stderr (stdout may be
    // parsed), in one line with how to install what is missing.
    if reports.contains(where: { $0.state == .pending }), let missing = CurlTransport.missingTransport() {
      printError("crumbs reports list: \(missing)")
    }
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

  @Flag(
    help: """
      Name the frames again here, with file, line and source lines where the files are on this \
      machine, and with DEBUGINFOD_URLS set, debug files fetched by build ID (the stored report \
      is not changed; `crumbs symbolicate` rewrites it).
      """)
  var symbolicate = false

  @Option(name: .customLong("symbols"), help: "With --symbolicate: a directory of symbol files (repeatable).")
  var symbolDirectories: [String] = []

  @Option(help: "With --symbolicate: where llvm-symbolizer is (default: PATH, then beside swift).")
  var llvmSymbolizer: String?

  @OptionGroup var color: ColorOptions

  func run() throws {
    let reportStore = try store.openStore(command: "reports show", readOnly: true)
    var stored = try store.load(id, from: reportStore, command: "reports show")
    if symbolicate {
      if json {
        throw fail("reports show", "--json prints the stored bytes: without --symbolicate", CLIExit.usage)
      }
      var options = PostMortemProcessor.defaultSymbolication
      options.symbolDirectories = symbolDirectories.map(absolute)
      options.useLLVMSymbolizer = true
      options.readsInstalledDebugFiles = true
      options.llvmSymbolizerPath = llvmSymbolizer
      allowFetching(&options, store: reportStore)
      stored.report = stored.report.symbolicated(with: options)
    }
    if json {
      print(String(decoding: try stored.readFile("report.json", limit: 64 << 20), as: UTF8.self))
      return
    }
    let style = color.style
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
