// CollectEngine.swift — what `crumbs collect` does to one Crumbs directory, once: the pass the
// watcher repeats. Nothing here is the collector's own idea: the processor is the client's
// (CrumbsConfiguration.makePostMortemProcessor: claim, report, store, count, queue the summary),
// the uploader is the client's (ReportUploader: the store's limits, the retry policy, the
// delivery lock that keeps one deliverer per store), and the session summaries leave through
// the same outbox (SessionSummaryOutbox).
//
// Entry points, in call order:
//   CollectEngine(directories:destinations:transport:summaryResource:signals:)
//   collectOnce()                    one-shot: pass(index) for every directory; true when all
//                                    was delivered
//   pass(index)                      open the directory if it has become a Crumbs directory
//                                    (CollectedDirectory.open), process every ended session
//                                    (PostMortemProcessor.run), deliver (between attempts it
//                                    stops once SIGTERM/SIGINT is pending), print what happened
//
// A directory whose app turned Crumbs off (`setEnabled(false)`: the `disabled` file) is still
// processed, as the client processes it, but nothing is sent from it. The app's consent handler
// lives in the app: the collector cannot ask it, so from a directory whose app configured one
// (ConsentFile: `required`) it sends nothing — reports stay pending, summaries queued — until
// the user's standing consent (`always`) is recorded there (docs/collector.md).
// Not signal-safe (an ordinary command-line program).

import Crumbs
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// One directory the collector looks after; opened once it is a Crumbs directory (has rings/).
final class CollectedDirectory {
  let path: String
  private(set) var processor: PostMortemProcessor?
  private(set) var uploader: ReportUploader?

  init(path: String) { self.path = path }

  var ringsPath: String { path + "/rings" }
  var isOpen: Bool { processor != nil }

  /// Opens the directory's rings and store when rings/ exists (a client has run there); nil on
  /// success or when there is nothing to open yet, the error in words otherwise.
  func open(engine: CollectEngine) -> String? {
    guard processor == nil else { return nil }
    guard Syscall.isDirectory(ringsPath) else { return nil }
    do {
      let rings = try RingDirectory(path: path)
      let store = try ReportStore(directory: path)
      let configuration = CrumbsConfiguration(directory: path)
      var made = configuration.makePostMortemProcessor(directory: rings, store: store) { problem in
        printError("crumbs collect: \(problem)")
      }
      // The collector wrote none of the sessions it processes: their attachments are read
      // confined to the Crumbs directory (ReportAttachments.swift), whatever its user.
      made.runsOutsideTheApp = true
      processor = made
      uploader = ReportUploader(
        store: store, destinations: engine.destinations, settings: configuration.database,
        transport: engine.transport,
        outbox: SessionSummaryOutbox(directory: path, resource: engine.summaryResource))
      return nil
    } catch {
      return "cannot open \(path): \(error)"
    }
  }
}

/// What one pass did.
struct CollectPass {
  var processed = 0
  var reports = 0
  var delivered = 0
  var dropped = 0
  var pending = 0
  var lockBusy = false
  /// Wall-clock nanoseconds when a pending report is next due, if one waits.
  var nextDueUnixNano: UInt64?
  var failed = false
}

final class CollectEngine {
  let directories: [CollectedDirectory]
  let destinations: [any ReportDestination]
  let transport: any HTTPTransport
  let summaryResource: [String: String]
  /// The signalfd of SIGTERM/SIGINT: polled (not read) between delivery attempts.
  let signals: Int32

  init(
    directories: [String], destinations: [any ReportDestination], transport: any HTTPTransport,
    summaryResource: [String: String], signals: Int32
  ) {
    self.directories = directories.map(CollectedDirectory.init)
    self.destinations = destinations
    self.transport = transport
    self.summaryResource = summaryResource
    self.signals = signals
  }

  /// One pass over every directory; true when every report was delivered and every directory
  /// processed.
  func collectOnce() -> Bool {
    var ok = true
    for index in directories.indices {
      if stopRequested { return false }
      let directory = directories[index]
      guard Syscall.isDirectory(directory.path) else {
        printError("crumbs collect: no such directory: \(directory.path)")
        ok = false
        continue
      }
      guard Syscall.isDirectory(directory.ringsPath) else {
        printError("crumbs collect: \(directory.path) is not a Crumbs directory: it has no rings/ folder")
        ok = false
        continue
      }
      let pass = pass(index, quiet: false)
      if pass.failed || pass.pending > 0 || pass.dropped > 0 || pass.lockBusy { ok = false }
    }
    return ok
  }

  /// Whether SIGTERM or SIGINT is pending (left pending: the watcher reads it).
  var stopRequested: Bool {
    var descriptor = [pollfd(fd: signals, events: Int16(POLLIN), revents: 0)]
    try? Syscall.poll(&descriptor, timeoutMilliseconds: 0)
    return descriptor[0].revents & Int16(POLLIN) != 0
  }

  /// Processes and delivers directory `index` (see the file comment). `quiet` prints nothing
  /// when nothing happened (a watcher's passes).
  func pass(_ index: Int, quiet: Bool) -> CollectPass {
    let directory = directories[index]
    var result = CollectPass()
    if let problem = directory.open(engine: self) {
      printError("crumbs collect: \(problem)")
      result.failed = true
      return result
    }
    guard let processor = directory.processor, let uploader = directory.uploader else { return result }
    var outcome = processor.run()
    // The directory's own state files the collector writes too (counts, crash-loop tally).
    outcome.removedLeftovers += CrumbsConfiguration(directory: directory.path).removeAbandonedTemporaryFiles()
    for problem in outcome.problems { printError("crumbs collect: \(directory.path): \(problem)") }
    for file in outcome.quarantined {
      printError("crumbs collect: quarantined \(file.originalPath): \(file.reason)")
    }
    let sessions = outcome.sessions + outcome.forkedSessions
    result.processed = sessions.count
    result.reports = outcome.reports.count
    var ends: [String: Int] = [:]
    for session in sessions { ends[session.end.rawValue, default: 0] += 1 }
    var line = "\(directory.path): "
    if !sessions.isEmpty {
      line +=
        "\(sessions.count) session(s) ended ("
        + ends.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ") + "), "
        + "\(outcome.reports.count) report(s) stored; "
    }
    if Syscall.fileExists(directory.path + "/disabled") {
      result.pending = 0
      if !quiet || !sessions.isEmpty { print(line + "not sent: the app turned Crumbs off in this directory") }
      flushStandardOutput()
      return result
    }
    if ConsentFile.state(directory.path) == .required {
      result.pending = 0
      if !quiet || !sessions.isEmpty {
        print(line + "not sent: the app asks for consent and the user gave no standing consent")
      }
      flushStandardOutput()
      return result
    }
    let delivery = uploader.deliverPending(stopping: { self.stopRequested })
    result.lockBusy = delivery.lockBusy
    result.delivered = delivery.finished.filter { $0.state == .sent }.count
    result.dropped = delivery.finished.filter { $0.state == .dropped }.count
    result.pending = uploader.store.list(.pending).reports.count
    result.nextDueUnixNano = delivery.nextDueUnixNano
    if let missing = delivery.missingTransport { printError("crumbs collect: \(missing)") }
    for result in delivery.results where !result.outcome.isDelivered {
      printError("crumbs collect: \(result.reportID.prefix(8))… \(result.destination): \(result)")
    }
    let happened = !sessions.isEmpty || !delivery.results.isEmpty || !delivery.events.isEmpty
    if !quiet || happened {
      line += "\(result.delivered) sent, \(result.dropped) dropped, \(result.pending) pending"
      if !delivery.events.isEmpty { line += ", \(delivery.events.count) session summary request(s)" }
      if delivery.lockBusy { line += " (another process is delivering from this store)" }
      print(line)
      flushStandardOutput()
    }
    return result
  }
}

/// stdout is a pipe or a journal under a service manager: each line goes out as it is printed.
func flushStandardOutput() { fflush(nil) }
