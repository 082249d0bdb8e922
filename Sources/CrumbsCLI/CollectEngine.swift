// CollectEngine.swift — what `crumbs collect` does to one Crumbs directory, once: the pass the
// watcher repeats. Nothing here is the collector's own idea: the processor is the client's
// (CrumbsConfiguration.makePostMortemProcessor: claim, report, store, count, queue the summary),
// the uploader is the client's (ReportUploader: the store's limits, the retry policy, the
// delivery lock that keeps one deliverer per store), and the session summaries leave through
// the same outbox (SessionSummaryOutbox).
//
// Entry points, in call order:
//   CollectEngine(directories:destinations:transport:summaryResource:signals:)
//   collectOnce()                    one-shot: pass(index) for every directory, round by round
//                                    until each is done; true when all was delivered
//   pass(index)                      open the directory if it has become a Crumbs directory
//                                    (CollectedDirectory.open), process every ended session
//                                    (PostMortemProcessor.run), deliver, print what happened
//
// Stopping and sharing: a pass asks, before each session and each delivery attempt, whether
// SIGTERM/SIGINT is pending (a poll of the signalfd) or its time slice (`sliceNanoseconds`) is used up;
// the transport gives up a request in flight once the signal is pending (CurlTransport.abandons,
// asked at least once a second). So the collector stops within one session's processing or a
// second of a request, whatever it was doing, and a directory with a long backlog (many or
// large rings) is processed a slice at a time, in turn with the others: its bad input delays
// the others by a slice at most. What a pass did not get to stays as it was (claimed rings are
// released, never half-processed: a report is stored by a rename, a ring removed only after
// its report) and the next pass takes it up (`CollectPass.unfinished`).
//
// Whose files: everything a pass creates in a directory (reports/ and its folders, the session
// starts, metrics, quarantine) must stay usable by the app that owns it, whose own next start
// moves and deletes them. So a pass runs as the directory's owner: as is when the collector is
// that uid; with the calling thread's filesystem uid and gid switched to the directory's owner
// and group when it runs as root (Syscall.setFilesystemIdentity: what it creates is the
// owner's, and what it opens is checked as the owner's, never with root's privileges); and not
// at all, said once, when it runs as any other uid: it would leave files the owner cannot use.
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

  /// Whether the refusal to work as another uid here was said already (said once).
  var refusalSaid = false

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
  /// The pass stopped early (a signal, or its slice was used up): more is left to do.
  var unfinished = false
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
    // Round by round, each directory a slice at a time, until every one is done.
    var left = Array(directories.indices)
    while !left.isEmpty {
      var unfinished: [Int] = []
      for index in left {
        if stopRequested { return false }
        let (done, passed) = collectOnce(index)
        if !passed { ok = false }
        if !done { unfinished.append(index) }
      }
      left = unfinished
    }
    return ok
  }

  /// One slice of the one-shot run on directory `index`: whether it is done, and whether
  /// everything in it was processed and delivered.
  private func collectOnce(_ index: Int) -> (done: Bool, ok: Bool) {
    let directory = directories[index]
    guard Syscall.isDirectory(directory.path) else {
      printError("crumbs collect: no such directory: \(directory.path)")
      return (true, false)
    }
    guard Syscall.isDirectory(directory.ringsPath) else {
      printError("crumbs collect: \(directory.path) is not a Crumbs directory: it has no rings/ folder")
      return (true, false)
    }
    let pass = pass(index, quiet: false)
    if pass.unfinished { return (false, true) }
    return (true, !(pass.failed || pass.pending > 0 || pass.dropped > 0 || pass.lockBusy))
  }

  /// Whether SIGTERM or SIGINT is pending (left pending: the watcher reads it).
  var stopRequested: Bool { Self.signalPending(signals) }

  /// Whether the signalfd `signals` has a signal to read (one poll, nothing read).
  static func signalPending(_ signals: Int32) -> Bool {
    var descriptor = [pollfd(fd: signals, events: Int16(POLLIN), revents: 0)]
    try? Syscall.poll(&descriptor, timeoutMilliseconds: 0)
    return descriptor[0].revents & Int16(POLLIN) != 0
  }

  /// How long one pass works on one directory before it yields to the others (see the file
  /// comment): one session's processing or one request more, at most.
  static let sliceNanoseconds: UInt64 = 2_000_000_000

  /// Processes and delivers directory `index` (see the file comment). `quiet` prints nothing
  /// when nothing happened (a watcher's passes).
  func pass(_ index: Int, quiet: Bool) -> CollectPass {
    let directory = directories[index]
    guard let owner = Syscall.owner(ofPath: directory.path) else { return pass(directory, quiet: quiet) }
    let me = Syscall.effectiveUserID()
    if owner.uid == me { return pass(directory, quiet: quiet) }
    var result = CollectPass()
    guard me == 0 else {
      if !directory.refusalSaid {
        printError(
          "crumbs collect: \(directory.path) belongs to uid \(owner.uid): the collector (uid \(me)) would "
            + "leave files there that the app cannot use; run it as uid \(owner.uid), or as root (which "
            + "works there as uid \(owner.uid))")
        directory.refusalSaid = true
      }
      result.failed = true
      return result
    }
    let before = Syscall.filesystemIdentity()
    do {
      try Syscall.setFilesystemIdentity(uid: owner.uid, gid: owner.gid)
    } catch {
      printError("crumbs collect: \(directory.path): cannot work as its owner, uid \(owner.uid): \(error)")
      result.failed = true
      return result
    }
    defer {
      do {
        try Syscall.setFilesystemIdentity(uid: before.uid, gid: before.gid)
      } catch {
        // Never go on as another directory's owner.
        printError("crumbs collect: cannot switch back from uid \(owner.uid): \(error)")
        exit(1)
      }
    }
    return pass(directory, quiet: quiet)
  }

  /// The pass itself, as whoever the caller made this thread.
  private func pass(_ directory: CollectedDirectory, quiet: Bool) -> CollectPass {
    var result = CollectPass()
    if let problem = directory.open(engine: self) {
      printError("crumbs collect: \(problem)")
      result.failed = true
      return result
    }
    guard let processor = directory.processor, let uploader = directory.uploader else { return result }
    // The slice ends a pass only after its first session: a pass always gets something done.
    let deadline = SystemClock.monotonicNanoseconds() &+ Self.sliceNanoseconds
    var asked = 0
    var sliceUsed = false
    let stopping = {
      if self.stopRequested { return true }
      asked += 1
      sliceUsed = sliceUsed || (asked > 1 && SystemClock.monotonicNanoseconds() >= deadline)
      return sliceUsed
    }
    var outcome = processor.run(stopping: stopping)
    result.unfinished = outcome.interrupted
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
    let delivery = uploader.deliverPending(stopping: stopping)
    result.unfinished = result.unfinished || sliceUsed || stopRequested
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
