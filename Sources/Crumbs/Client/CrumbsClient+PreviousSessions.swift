// CrumbsClient+PreviousSessions.swift — what earlier sessions left, processed on the background
// thread (and, in a crash loop, partly on the caller's thread of `start`): their reports
// stored, their summaries and counts, waited for by `hasCrashedInLastSession` and the rest.

import CrumbsPlatform
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

extension CrumbsClient {
  /// On the caller's thread of `start`: keeps rings/ bounded when sessions end faster than the
  /// background work processes them (PostMortemProcessor.processBacklog), only when more than a
  /// few sessions wait. What it processed joins the previous sessions.
  func processBacklog() {
    // The crash-loop check listed rings/ just before: within the limit (every start but a crash
    // loop's), nothing to do, not even making a processor (the client never changes the
    // processor's `maxWaitingSessions`). Over it, processBacklog counts again for itself.
    guard waitingRingsAtStart > PostMortemProcessor.defaultMaxWaitingSessions else { return }
    let backlog = makeProcessor().processBacklog(reportingSession: sessionID)
    if !backlog.sessions.isEmpty || !backlog.forkedSessions.isEmpty || !backlog.problems.isEmpty {
      state.withLock { $0.backlog = backlog }
    }
  }

  /// The post-mortem processor as configured, counting each ended session (the one `crumbs
  /// collect` uses too: SessionProcessing.swift), marking the reports of the crash loop seen at
  /// start, asking the delegate which reports to store.
  func makeProcessor() -> PostMortemProcessor {
    var processor = configuration.makePostMortemProcessor(directory: directory, store: store) {
      [weak self] problem in self?.state.withLock { $0.problems.append(problem) }
    }
    processor.crashLoopCounts = CrashLoop.bySession(crashLoopCounts)
    processor.shouldStore = { [weak self] report in
      guard let self, let delegate = self.state.withLock({ $0.delegate }) else { return true }
      return delegate.shouldProcess(report)
    }
    return processor
  }

  /// Reports what earlier sessions left, each with its own version, attributes and attachments
  /// (from its session file, not this session's), and counts each ended session before its files
  /// are removed.
  func processPreviousSessions() {
    var outcome = state.withLock { $0.backlog } ?? PostMortemOutcome()
    outcome.append(makeProcessor().run(reportingSession: sessionID))
    let directory = configuration.directory
    // The client's own files, which a process killed mid-write may have left temporary copies of.
    outcome.removedLeftovers += crumbsDirectory.removeAbandonedTemporaryFiles()
    // The processing's parsing, symbolication and encoding freed what they used, into this
    // thread's malloc arena, which would keep it: give it back.
    Syscall.returnFreeMemory()
    var problems = outcome.problems
    var metrics: SessionMetrics?
    do {
      metrics = try SessionMetricsFile.read(directory: directory) { problems.append($0) }
    } catch {
      problems.append("cannot read the session metrics: \(error)")
    }
    // Before the waiters resume: whoever waited for the previous sessions finds the observers
    // told (CrumbsClient+Observers.swift).
    previousSessionsProcessed(outcome, metrics: metrics)
    let waiters = state.withLock { state in
      state.previous = outcome
      state.metrics = metrics
      state.problems += problems
      defer { state.previousWaiters = [] }
      return state.previousWaiters
    }
    for waiter in waiters { waiter.resume(returning: outcome) }
  }

  /// The resource session summaries are sent with: this process's, with what the session file
  /// recorded of the machine over it.
  var summaryResource: [String: String] {
    ProcessAttributes.resource(
      pid: getpid(), executable: SystemFacts.executablePath, appName: configuration.appName ?? "",
      appVersion: configuration.appVersion
    ).merging(session.withLock { $0.metadata.resource } ?? measuredResource()) { _, measured in measured }
  }

  /// Whether a consent handler is set (session summaries then need standing consent).
  var hasConsentHandler: Bool { state.withLock { $0.consentHandler } != nil }

  /// Waits (at most `timeout` seconds) for the previous sessions to be processed, starting that
  /// work at once if it still waits for the app's readiness.
  @discardableResult
  public func waitForPreviousSessions(timeout: Double = 10) -> PostMortemOutcome? {
    if let previous = state.withLock({ $0.previous }) { return previous }
    demandPreviousSessions()
    if previousSessionsDone.wait(timeout: .now() + timeout) == .success { previousSessionsDone.signal() }
    return state.withLock { $0.previous }
  }

  /// What the background run found of the previous sessions (their ends, reports, problems),
  /// once it has run: suspends without blocking a thread. The blocking properties below
  /// (`hasCrashedInLastSession`, …) wait at most 10 s; this waits as long as the run takes.
  public var previousSessions: PostMortemOutcome {
    get async {
      if state.withLock({ $0.previous }) == nil { demandPreviousSessions() }
      return await withCheckedContinuation { continuation in
        let ready = state.withLock { state -> PostMortemOutcome? in
          if let previous = state.previous { return previous }
          state.previousWaiters.append(continuation)
          return nil
        }
        if let ready { continuation.resume(returning: ready) }
      }
    }
  }

  /// Session counts, including this one, once the previous sessions are counted: suspends
  /// without blocking a thread (see `previousSessions`).
  public var currentSessionMetrics: SessionMetrics? {
    get async {
      _ = await previousSessions
      return state.withLock { $0.metrics }
    }
  }

  /// Whether the previous session ended by a crash or abnormally. Waits for the background
  /// processing of the previous sessions (up to 10 s; `await previousSessions` does not block).
  public var hasCrashedInLastSession: Bool { waitForPreviousSessions()?.hasCrashedInLastSession ?? false }
  /// The previous session's report, if it crashed. Waits like `hasCrashedInLastSession`.
  public var lastSessionCrashReport: CrashReport? { waitForPreviousSessions()?.lastSessionCrashReport }
  /// Whether the previous session recorded a memory-pressure warning.
  public var hasReceivedMemoryWarningInLastSession: Bool {
    waitForPreviousSessions()?.hasReceivedMemoryWarningInLastSession ?? false
  }
  /// Session counts, including this one. Waits like `hasCrashedInLastSession`.
  public var sessionMetrics: SessionMetrics? {
    waitForPreviousSessions()
    return state.withLock { $0.metrics }
  }
  /// Problems met in the background (unreadable files, failed stores, settings out of range),
  /// for the app to log; and, while it lasts, that reports cannot be sent because libcurl is
  /// missing (one line saying how to install it; gone once a pass found it).
  public var problems: [String] {
    state.withLock { $0.problems } + (uploader?.missingTransport.map { [$0] } ?? [])
  }
}
