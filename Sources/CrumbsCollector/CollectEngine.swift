// CollectEngine.swift — what the collector (`crumbs collect`) does to one Crumbs directory,
// once: the pass the watcher repeats. A library (CrumbsCollector), so the collector runs and is
// tested without the command line: its lines and problems go to a CollectOutput, which the
// command prints. Nothing here is the collector's own idea: the processor is the client's
// (CrumbsConfiguration.makePostMortemProcessor: claim, report, store, count, queue the summary),
// the uploader is the client's (ReportUploader: the store's limits, the retry policy, the
// delivery lock that keeps one deliverer per store), and the session summaries leave through
// the same outbox (SessionSummaryOutbox).
//
// Entry points, in call order:
//   CollectEngine(directories:destinations:transport:summaryResource:signals:output:)
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
// Whether anything leaves a directory is the directory's answer, the client's too
// (CrumbsDirectory.delivery). One whose app turned Crumbs off (`setEnabled(false)`: the
// `disabled` file) is still processed, as the client processes it, but nothing is sent from it.
// The app's consent handler lives in the app: the collector cannot ask it, so from a directory
// whose app configured one (the `consent` file: `required`) it sends nothing — reports stay
// pending, summaries queued — until the user's standing consent (`always`) is recorded there
// (docs/collector.md). CRUMBS_DISABLED in the collector's own environment does what the
// `disabled` file does, for every directory (`turnedOffByEnvironment`).
// Not signal-safe (an ordinary program: the command line, or a test).

import Crumbs
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// Where the collector's lines go: `crumbs collect` prints them, a test keeps them.
package struct CollectOutput: Sendable {
  /// What a pass did, or what the watcher does ("watching 2 directories"): stdout.
  package var line: @Sendable (String) -> Void
  /// What went wrong, without the command's name: stderr.
  package var problem: @Sendable (String) -> Void

  package init(line: @escaping @Sendable (String) -> Void, problem: @escaping @Sendable (String) -> Void) {
    self.line = line
    self.problem = problem
  }
}

/// An error that ends the collector (the watch cannot be set up or polled), in words.
package struct CollectError: Error, CustomStringConvertible {
  package var description: String
}

/// One directory the collector looks after; opened once it is a Crumbs directory (has rings/).
package final class CollectedDirectory {
  package let path: String
  private(set) var processor: PostMortemProcessor?
  private(set) var uploader: ReportUploader?

  /// Whether the refusal to work as another uid here was said already (said once).
  var refusalSaid = false

  init(path: String) { self.path = path }

  var ringsPath: String { CrumbsDirectory(path).rings }
  var isOpen: Bool { processor != nil }

  /// Opens the directory's rings and store when rings/ exists (a client has run there); nil on
  /// success or when there is nothing to open yet, the error in words otherwise.
  func open(engine: CollectEngine) -> String? {
    guard processor == nil else { return nil }
    guard Syscall.isDirectory(ringsPath) else { return nil }
    do {
      let rings = try RingDirectory(path: path)
      let store = try ReportStore(directory: path)
      var configuration = CrumbsConfiguration(directory: path)
      // A person or a service runs the collector: it may fetch debug files (DEBUGINFOD_URLS).
      configuration.fetchesDebugFiles = true
      let output = engine.output
      var made = configuration.makePostMortemProcessor(directory: rings, store: store) { problem in
        output.problem(problem)
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
package struct CollectPass {
  package var processed = 0
  package var reports = 0
  package var delivered = 0
  package var dropped = 0
  package var pending = 0
  package var lockBusy = false
  /// Wall-clock nanoseconds when a pending report is next due, if one waits.
  package var nextDueUnixNano: UInt64?
  package var failed = false
  /// The pass stopped early (a signal, or its slice was used up): more is left to do.
  package var unfinished = false
}

package final class CollectEngine {
  package let directories: [CollectedDirectory]
  let destinations: [any ReportDestination]
  let transport: any HTTPTransport
  let summaryResource: [String: String]
  /// The signalfd of SIGTERM/SIGINT: polled (not read) between delivery attempts; nil: nothing
  /// stops a pass early but its slice.
  let signals: Int32?
  let output: CollectOutput
  /// CRUMBS_DISABLED is set where the collector runs: directories are processed, nothing is sent.
  package var turnedOffByEnvironment = false

  /// `directories` are taken as given (the command makes them absolute).
  package init(
    directories: [String], destinations: [any ReportDestination], transport: any HTTPTransport,
    summaryResource: [String: String], signals: Int32?, output: CollectOutput
  ) {
    self.directories = directories.map(CollectedDirectory.init)
    self.destinations = destinations
    self.transport = transport
    self.summaryResource = summaryResource
    self.signals = signals
    self.output = output
  }

  /// One pass over every directory; true when every report was delivered and every directory
  /// processed.
  package func collectOnce() -> Bool {
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
      output.problem("no such directory: \(directory.path)")
      return (true, false)
    }
    guard Syscall.isDirectory(directory.ringsPath) else {
      output.problem(
        "\(directory.path) is not a Crumbs directory: it has no \(CrumbsDirectory.ringsFolderName)/ folder")
      return (true, false)
    }
    let pass = pass(index, quiet: false)
    if pass.unfinished { return (false, true) }
    return (true, !(pass.failed || pass.pending > 0 || pass.dropped > 0 || pass.lockBusy))
  }

  /// Whether SIGTERM or SIGINT is pending (left pending: the watcher reads it).
  var stopRequested: Bool { signals.map(Self.signalPending) ?? false }

  /// Whether the signalfd `signals` has a signal to read (one poll, nothing read).
  package static func signalPending(_ signals: Int32) -> Bool {
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
        output.problem(
          "\(directory.path) belongs to uid \(owner.uid): the collector (uid \(me)) would "
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
      output.problem("\(directory.path): cannot work as its owner, uid \(owner.uid): \(error)")
      result.failed = true
      return result
    }
    defer {
      do {
        try Syscall.setFilesystemIdentity(uid: before.uid, gid: before.gid)
      } catch {
        // Never go on as another directory's owner: the process ends, whoever runs the collector.
        output.problem("cannot switch back from uid \(owner.uid): \(error)")
        exit(1)
      }
    }
    return pass(directory, quiet: quiet)
  }

  /// The pass itself, as whoever the caller made this thread.
  private func pass(_ directory: CollectedDirectory, quiet: Bool) -> CollectPass {
    var result = CollectPass()
    if let problem = directory.open(engine: self) {
      output.problem(problem)
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
    let crumbs = CrumbsDirectory(directory.path)
    outcome.removedLeftovers += crumbs.removeAbandonedTemporaryFiles()
    for problem in outcome.problems { output.problem("\(directory.path): \(problem)") }
    for file in outcome.quarantined {
      output.problem("quarantined \(file.originalPath): \(file.reason)")
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
    // The collector cannot ask the app's consent handler: the `consent` file stands for it.
    if turnedOffByEnvironment {
      if !quiet || !sessions.isEmpty { output.line(line + "not sent: CRUMBS_DISABLED is set") }
      return result
    }
    switch crumbs.delivery(consentHandlerSet: nil) {
    case .allowed: break
    case .turnedOff:
      result.pending = 0
      if !quiet || !sessions.isEmpty {
        output.line(line + "not sent: the app turned Crumbs off in this directory")
      }
      return result
    case .awaitingConsent:
      result.pending = 0
      if !quiet || !sessions.isEmpty {
        output.line(line + "not sent: the app asks for consent and the user gave no standing consent")
      }
      return result
    }
    let delivery = uploader.deliverPending(stopping: stopping)
    result.unfinished = result.unfinished || sliceUsed || stopRequested
    result.lockBusy = delivery.lockBusy
    result.delivered = delivery.finished.filter { $0.state == .sent }.count
    result.dropped = delivery.finished.filter { $0.state == .dropped }.count
    result.pending = uploader.store.list(.pending).reports.count
    result.nextDueUnixNano = delivery.nextDueUnixNano
    if let missing = delivery.missingTransport { output.problem(missing) }
    for result in delivery.results where !result.outcome.isDelivered {
      output.problem("\(result.reportID.prefix(8))… \(result.destination): \(result)")
    }
    let happened = !sessions.isEmpty || !delivery.results.isEmpty || !delivery.events.isEmpty
    if !quiet || happened {
      line += "\(result.delivered) sent, \(result.dropped) dropped, \(result.pending) pending"
      if !delivery.events.isEmpty { line += ", \(delivery.events.count) session summary request(s)" }
      if delivery.lockBusy { line += " (another process is delivering from this store)" }
      output.line(line)
    }
    return result
  }
}
