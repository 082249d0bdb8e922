// CrumbsClient.swift — the one object an app holds: recording, crash capture, the previous
// session's reports, non-fatal reports, consent, and delivery.
//
// Entry points, in call order:
//   CrumbsClient.start(_:)          on the caller's thread only what must be, and everything that
//                                   decides how the session ends: the directory, a new ring
//                                   (installed; its header carries the app's name and version
//                                   and the OTEL_* environment's resource, for a crash before
//                                   the session file exists),
//                                   the crash handler, the session counted, the clean-exit hook,
//                                   and — only when more than a few
//                                   earlier sessions wait (a crash loop) — the oldest of them
//                                   processed briefly (PostMortemProcessor.processBacklog), so
//                                   rings/ stays bounded. Everything else — the session file
//                                   (first written there, unless the app sets an attribute
//                                   first), the ring's cgroup facts, the guard pages of most alternate stacks, automatic
//                                   breadcrumbs, the previous sessions' reports and their counts,
//                                   delivery — runs on a background thread. One client per
//                                   process: a second start throws `.alreadyStarted`.
//   addBreadcrumb / attributes / attachments / send(error:…)   while the app runs; attributes
//                                   and attachments are persisted in the session file at once
//   hasCrashedInLastSession, lastSessionCrashReport           (wait for the background work)
//   setEnabled(_:)                  persisted; disabled records nothing and sends nothing
//   await previousSessions          the same, suspending instead of blocking
//   flush(timeout:)                 delivers what is pending now and returns (short-lived CLIs)
//   close()                         a clean end: marks the ring clean, stops delivery (waiting
//                                   at most closeTimeout for an upload in flight);
//                                   close(endingAs: .lastTerminationRequest) ends it as stopped
//                                   by the SIGTERM a graceful shutdown handled (CrumbsService)
//   [exit()]                        the exit hooks mark the ring clean (C) and note replaced
//                                   crash handlers in the session file
//
// The session file (`rings/<session>.session.json`, SessionMetadata) holds what the next launch
// needs to report this session as it was: app version, attributes, attachments, and the crash
// signals another handler took from ours (checked when the background start-up work ends, on
// each memory-pressure pass, at close and at exit — never on a hot path).
//
// Never crashes the app: a bad directory is a thrown CrumbsError; later failures are reported
// through `problems` and the delegate. Not signal-safe (except what it hands to C).

import CrumbsSignalPath
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Why a client could not start.
public enum CrumbsError: Error, CustomStringConvertible {
  case directory(SystemCallError)
  case ring(RingCreationError)
  case crashHandler(CrashHandlerError)
  case store(SystemCallError)
  /// A client started in this process and not closed: one process, one client (one ring, one
  /// crash handler), so that one crash is one report. Use the running client, or `close()` it
  /// first.
  case alreadyStarted(CrumbsClient)

  public var description: String {
    switch self {
    case .directory(let error): "crumbs: cannot use the directory: \(error)"
    case .ring(let error): "crumbs: \(error)"
    case .crashHandler(let error): "crumbs: cannot install the crash handler: \(error)"
    case .store(let error): "crumbs: cannot open the report store: \(error)"
    case .alreadyStarted(let running):
      "crumbs: a client is already running in this process (session \(running.sessionID), "
        + "directory \(running.configuration.directory)); use it, or close() it first"
    }
  }
}

/// A user's answer to "send these crash reports?".
public enum ConsentAnswer: String, Sendable, Codable {
  /// Send the reports asked about, ask again next time.
  case send
  /// Do not send them (they are moved to `dropped` with the reason), ask again next time.
  case dontSend
  /// Send them and every later report without asking (persisted).
  case always
}

/// The app's hooks. Requirements, as for `ReportUploaderDelegate` (whose hooks it inherits:
/// `willSend`, `willSendRequest`, `serverDidRespond`, `serverDidFail`, `didReachLimit`,
/// `didSucceedSending`, `didFailSending`): called on Crumbs' background thread, one at a time;
/// return quickly; never call `close()` from them.
public protocol CrumbsClientDelegate: ReportUploaderDelegate {
  /// Whether a report of the previous session (or a non-fatal one) is stored at all.
  func shouldProcess(_ report: CrashReport) -> Bool
}

extension CrumbsClientDelegate {
  public func shouldProcess(_ report: CrashReport) -> Bool { true }
}

public final class CrumbsClient: @unchecked Sendable {
  /// The configuration it was started with.
  public let configuration: CrumbsConfiguration
  /// This session's ring.
  public let ring: BreadcrumbRing
  /// This session.
  public var sessionID: SessionID { ring.sessionID }
  public let store: ReportStore
  let directory: RingDirectory
  let uploader: ReportUploader?

  private struct State {
    weak var delegate: (any CrumbsClientDelegate)?
    var consentHandler: (@Sendable ([CrashReport]) -> ConsentAnswer)?
    var previous: PostMortemOutcome?
    /// What `processBacklog` did at start, joined to the background run's outcome.
    var backlog: PostMortemOutcome?
    var metrics: SessionMetrics?
    var problems: [String] = []
    var closed = false
    var automatic: AutomaticBreadcrumbs?
    /// Async callers of `previousSessions`, resumed when the background run ends.
    var previousWaiters: [CheckedContinuation<PostMortemOutcome, Never>] = []
  }

  private let state = Mutex(State())
  /// The session file's contents, and what was last written; changed and written under the lock,
  /// so writes never overtake each other.
  private struct SessionFile {
    let path: String
    var metadata: SessionMetadata
    var written: SessionMetadata?

    /// Writes the contents if they changed since the last write; returns the problem, if any.
    mutating func writeIfChanged() -> String? {
      guard metadata != written else { return nil }
      do {
        try Syscall.writeFileAtomically(path, metadata.encoded(), durable: false)
        written = metadata
        return nil
      } catch {
        return "cannot write the session file: \(error)"
      }
    }
  }
  private let session: Mutex<SessionFile>
  /// Whether this client armed the clean-exit hook (disarmed at close).
  private var armedExitHook = false
  private let previousSessionsDone = DispatchSemaphore(value: 0)
  private let bridge: UploaderBridge
  private let liveSymbolicator: LiveSymbolicator
  /// The OTEL_* variables as read at start (CrumbsConfiguration.environment).
  private let otel: OTLPEnvironment

  /// Tests only: called first on the background thread of `start` (a test holds it there to
  /// crash the process before any background work, the session file included, is done).
  package static let backgroundWorkWillStart = Mutex<(@Sendable () -> Void)?>(nil)

  /// The shared client, once `start(_:shared:)` made one.
  public static var shared: CrumbsClient? { sharedClient.withLock { $0 } }
  private static let sharedClient = Mutex<CrumbsClient?>(nil)
  /// The client started and not closed, shared or not; held during a start, so two starts at
  /// once cannot both succeed.
  private static let running = Mutex<CrumbsClient?>(nil)

  /// Starts Crumbs: records from now on and processes what earlier sessions left, in the
  /// background. With `shared: true` it also becomes `CrumbsClient.shared`.
  ///
  /// Before it returns, everything that decides how this session ends is in place: the crash
  /// handler, the session counted, the ring (whose header names the app's version for a crash
  /// that comes before the session file is first written, just after `start` returns;
  /// attributes and attachments are written to it as they are set), and the exit hook that
  /// marks the session clean when the process calls `exit()` or returns from `main`, however
  /// soon.
  ///
  /// One client per process: while a client started by an earlier call is not closed, `start`
  /// throws `CrumbsError.alreadyStarted` with that client (a second ring would end as an
  /// abnormal termination beside the first's crash). After `close()`, `start` works again.
  public static func start(_ configuration: CrumbsConfiguration, shared: Bool = true) throws(CrumbsError)
    -> CrumbsClient
  {
    let client = try running.withLock { running throws(CrumbsError) -> CrumbsClient in
      if let running { throw .alreadyStarted(running) }
      let client = try CrumbsClient(configuration)
      running = client
      return client
    }
    if shared { sharedClient.withLock { $0 = client } }
    client.processBacklog()
    client.startBackgroundWork()
    return client
  }

  private init(_ configuration: CrumbsConfiguration) throws(CrumbsError) {
    // Absolute from here on: the app may chdir, and every later path (session file, a forked
    // child's ring, the store, the metrics) is made from this one.
    var configuration = configuration
    configuration.directory = Syscall.absolutePath(configuration.directory)
    self.configuration = configuration
    do {
      directory = try RingDirectory(path: configuration.directory)
    } catch {
      throw .directory(error)
    }
    do {
      // The store keeps itself within the configured limits, with or without a destination.
      store = try ReportStore(directory: configuration.directory, limits: configuration.storeLimits)
    } catch {
      throw .store(error)
    }
    otel = OTLPEnvironment(configuration.environment ?? SystemFacts.environment(prefixed: "OTEL_"))
    var ringOptions = configuration.ring
    if ringOptions.appName == nil { ringOptions.appName = configuration.appName }
    // What a crash needs of the session file before the background work writes it: the version,
    // and the environment's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), read here
    // on the caller's thread, so a crash as soon as `start` returns is reported with them.
    if ringOptions.appVersion == nil { ringOptions.appVersion = configuration.appVersion }
    ringOptions.environmentResource = EnvironmentResource.encoded(
      otel.resource(appName: configuration.appName))
    do {
      // The cgroup facts are read on the background thread (recordCgroup below).
      ring = try directory.createRing(options: ringOptions, cgroupLater: true)
    } catch {
      throw .ring(error)
    }
    ring.install()
    session = Mutex(
      SessionFile(
        path: RingDirectory.sessionFilePath(forRing: ring.path),
        metadata: SessionMetadata(sessionID: ring.sessionID, appVersion: configuration.appVersion)))
    bridge = UploaderBridge()
    liveSymbolicator = LiveSymbolicator(options: configuration.symbolication)
    let destinations = configuration.resolvedDestinations(otel)
    uploader =
      destinations.isEmpty
      ? nil
      : ReportUploader(
        store: store, destinations: destinations, settings: configuration.database,
        transport: CurlTransport(timeout: configuration.requestTimeout), delegate: bridge, outbox: bridge)
    bridge.client = self
    if !otel.problems.isEmpty { state.withLock { $0.problems += otel.problems } }
    if let problem = configuration.requestTimeoutProblem { state.withLock { $0.problems.append(problem) } }
    if !Self.persistedEnabled(configuration.directory) {
      ring.setFilter(minimumLevel: .debug, enabledTypes: [])
    } else if configuration.installsCrashHandler
      && (configuration.allowsAttachingDebugger || !Self.debuggerAttached())
    {
      do {
        // Most alternate stacks' guard pages are set on the background thread.
        try CrashHandler.install(ring: ring, options: configuration.crashHandler, guardingStacksLater: true)
      } catch {
        ring.close(clean: true)
        throw .crashHandler(error)
      }
    }
    do {
      try SessionMetricsFile.countStart(directory: configuration.directory)
    } catch {
      state.withLock { $0.problems.append("cannot count this session: \(error)") }
    }
    // A clean exit() is clean from the first moment, not once the background work has run. It
    // decides how the session ends, so it is armed even without automatic breadcrumbs.
    if configuration.automaticBreadcrumbs?.markCleanExit ?? true {
      armedExitHook = Lifecycle.markCleanExitOnExit(true)
      if !armedExitHook {
        state.withLock { $0.problems.append("cannot register the exit hook (on_exit failed)") }
      }
    }
    _ = Self.registerExitCheck
  }

  // MARK: - Background work

  private func startBackgroundWork() {
    // The start breadcrumb first, on the caller's thread (one append), so it precedes whatever
    // the app records next; the rest of the automatic breadcrumbs start in the background.
    if let options = configuration.automaticBreadcrumbs, options.recordStart, isEnabled {
      Lifecycle.recordStart(version: configuration.appVersion)
    }
    let work: @Sendable () -> Void = { [self] in
      Self.backgroundWorkWillStart.withLock { $0 }?()
      // What start left for here: the session file (creating a file costs start 0.1–0.3 ms on
      // ext4; until it exists, a crash is reported with the version in the ring's header, and
      // an app that sets attributes first writes it itself), the ring's cgroup facts and the
      // alternate stacks' guards.
      writeSessionFile()
      ring.recordCgroup()
      CrashHandler.guardAlternateStacks()
      recordSessionResource()
      if isEnabled { startAutomaticBreadcrumbs() }
      processPreviousSessions()
      noteReplacedCrashSignals()
      previousSessionsDone.signal()
      // Its first pass sends the session summaries just queued.
      if isEnabled { uploader?.start() }
    }
    // Without a thread (the process is out of them), the work runs here rather than not at all.
    do { try BackgroundThread.start(name: "crumbs.start", work) } catch { work() }
  }

  /// Records the session's resource in the session file (off the caller's thread of `start`: it
  /// reads /etc/os-release, /proc/meminfo and the executable's build ID note), so that a crash
  /// is reported with the machine and parent it had, not those of the launch that reads it.
  private func recordSessionResource() {
    let resource = measuredResource()
    updateSessionFile { $0.resource = resource }
  }

  /// The machine's facts, the parent process, the executable's build ID, and the OTEL_*
  /// environment's resource over them (code's `appName` over that).
  private func measuredResource() -> [String: String] {
    var resource = ProcessAttributes.machine()
    if !configuration.reportsHostName { resource[ProcessAttributes.hostNameKey] = nil }
    resource["process.parent_pid"] = String(getppid())
    if let executable = CurrentProcessModules.list().first, !executable.buildID.isEmpty {
      resource["process.executable.build_id.gnu"] = executable.buildIDHex
    }
    return resource.merging(otel.resource(appName: configuration.appName)) { _, environment in environment }
  }

  /// Starts memory-pressure and signal breadcrumbs (not the start breadcrumb, nor the exit hook:
  /// `start` did those). Each memory-pressure pass also checks the crash handler.
  private func startAutomaticBreadcrumbs() {
    guard var options = configuration.automaticBreadcrumbs else { return }
    options.recordStart = false
    options.markCleanExit = false
    options.afterMemoryPass = { [weak self] in self?.noteReplacedCrashSignals() }
    if options.appVersion == nil { options.appVersion = configuration.appVersion }
    let automatic = AutomaticBreadcrumbs.start(options)
    let keep = state.withLock { state -> Bool in
      state.problems += automatic.problems
      if state.closed || state.automatic != nil { return false }
      state.automatic = automatic
      return true
    }
    if !keep { automatic.stop() }
  }

  /// Puts the signal breadcrumbs back in front of whatever handles the configured signals now
  /// (a handler installed since `start` took the signal over: a `ServiceGroup`'s signal
  /// sources take SIGTERM that way). The handler found is kept and still called after the
  /// breadcrumb. `CrumbsService` calls it once the group watches its signals. Not signal-safe.
  public func reinstallSignalBreadcrumbs() {
    guard isEnabled, let signals = configuration.automaticBreadcrumbs?.signals, !signals.isEmpty else {
      return
    }
    do {
      try SignalBreadcrumbs.install(signals: signals)
    } catch {
      state.withLock { $0.problems.append("\(error)") }
    }
  }

  private func stopAutomaticBreadcrumbs() {
    let automatic = state.withLock { state -> AutomaticBreadcrumbs? in
      defer { state.automatic = nil }
      return state.automatic
    }
    automatic?.stop()
  }

  /// On the caller's thread of `start`: keeps rings/ bounded when sessions end faster than the
  /// background work processes them (PostMortemProcessor.processBacklog: a directory listing
  /// unless more than a few sessions wait). What it processed joins the previous sessions.
  private func processBacklog() {
    let backlog = makeProcessor().processBacklog(reportingSession: sessionID)
    if !backlog.sessions.isEmpty || !backlog.forkedSessions.isEmpty || !backlog.problems.isEmpty {
      state.withLock { $0.backlog = backlog }
    }
  }

  /// The post-mortem processor as configured, counting each ended session.
  private func makeProcessor() -> PostMortemProcessor {
    var processor = PostMortemProcessor(directory: directory, store: store)
    processor.symbolicatorOptions = configuration.symbolication
    processor.reportsAbnormalTerminations = configuration.detectOOM
    processor.reportsHostName = configuration.reportsHostName
    processor.attachmentSizeLimit = configuration.attachmentSizeLimit
    processor.shouldStore = { [weak self] report in
      guard let self, let delegate = self.state.withLock({ $0.delegate }) else { return true }
      return delegate.shouldProcess(report)
    }
    let directory = configuration.directory
    processor.sessionEnded = { [weak self] session in
      do {
        let metrics = try SessionMetricsFile.countEnd(session, directory: directory)
        SessionSummaryQueue.enqueue([session], metrics: metrics, directory: directory)
      } catch {
        self?.state.withLock { $0.problems.append("cannot count session \(session.sessionID): \(error)") }
      }
    }
    return processor
  }

  /// Reports what earlier sessions left, each with its own version, attributes and attachments
  /// (from its session file, not this session's), and counts each ended session before its files
  /// are removed.
  private func processPreviousSessions() {
    var outcome = state.withLock { $0.backlog } ?? PostMortemOutcome()
    outcome.append(makeProcessor().run(reportingSession: sessionID))
    let directory = configuration.directory
    // The client's own files, which a process killed mid-write may have left temporary copies of.
    outcome.removedLeftovers +=
      AbandonedFiles.removeTemporaryFiles(
        inFolder: directory, of: ["session-metrics.json", "consent", "disabled"])
      + AbandonedFiles.removeTemporaryFiles(inFolder: SessionSummaryQueue.folder(directory))
    var problems = outcome.problems
    var metrics: SessionMetrics?
    do {
      metrics = try SessionMetricsFile.read(directory: directory)
    } catch {
      problems.append("cannot read the session metrics: \(error)")
    }
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

  /// Waits (at most `timeout` seconds) for the previous sessions to be processed.
  @discardableResult
  public func waitForPreviousSessions(timeout: Double = 10) -> PostMortemOutcome? {
    if let previous = state.withLock({ $0.previous }) { return previous }
    if previousSessionsDone.wait(timeout: .now() + timeout) == .success { previousSessionsDone.signal() }
    return state.withLock { $0.previous }
  }

  /// What the background run found of the previous sessions (their ends, reports, problems),
  /// once it has run: suspends without blocking a thread. The blocking properties below
  /// (`hasCrashedInLastSession`, …) wait at most 10 s; this waits as long as the run takes.
  public var previousSessions: PostMortemOutcome {
    get async {
      await withCheckedContinuation { continuation in
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

  // MARK: - Recording

  /// Appends a breadcrumb to this client's ring: what `BreadcrumbRing.append` does and costs
  /// (lock-free, no allocation or reference counting for a literal of up to
  /// `BreadcrumbAttributes.inlineCount` attributes).
  @inlinable @inline(__always)
  public func addBreadcrumb(
    _ message: String, level: BreadcrumbLevel = .info, type: BreadcrumbType = .manual,
    attributes: BreadcrumbAttributes = [:]
  ) {
    ring.append(message, level: level, type: type, attributes: attributes)
  }

  // MARK: - Attributes and attachments

  /// Attributes added to every report from now on, this session's crash report included
  /// (thread-safe). `nil` removes the key. Persisted in the session file before it returns (a
  /// small file replaced atomically, tens of microseconds): not for hot paths.
  public func setAttribute(_ value: String?, forKey key: String) {
    updateSessionFile { $0.attributes[key] = value }
  }

  /// The global attributes.
  public var attributes: [String: String] { session.withLock { $0.metadata.attributes } }

  /// A file attached to every report from now on, this session's crash report included (read
  /// when a report is made: for a crash, by the next launch). Persisted like `setAttribute`.
  public func addAttachment(path: String) {
    updateSessionFile { if !$0.attachments.contains(path) { $0.attachments.append(path) } }
  }

  public func removeAttachment(path: String) {
    updateSessionFile { $0.attachments.removeAll { $0 == path } }
  }

  // MARK: - The session file

  /// Changes the session file's contents and writes them when they changed.
  private func updateSessionFile(_ change: (inout SessionMetadata) -> Void) {
    session.withLock { change(&$0.metadata) }
    writeSessionFile()
  }

  /// Writes the session file if its contents changed since the last write.
  private func writeSessionFile() {
    if let problem = session.withLock({ $0.writeIfChanged() }) {
      state.withLock { $0.problems.append(problem) }
    }
  }

  /// Records in the session file which crash signals another handler has taken from ours (or
  /// that none has, again): the next launch says so, and why such a crash left no record.
  private func noteReplacedCrashSignals() {
    let replaced = CrashHandler.replacedSignals().map(SignalNames.name)
    updateSessionFile { $0.replacedCrashSignals = replaced }
  }

  /// At exit (the app's own exit work done, the process about to end): the crash handler may
  /// have been taken since the last check. Takes no lock that is not free (exit() may come from
  /// a thread, or a signal handler, that interrupted a holder: the check is then skipped), so
  /// it reads the C handler's mask itself rather than through CrashHandler's lock.
  private static let registerExitCheck: Void = {
    atexit {
      guard let client = CrumbsClient.running.withLockIfAvailable({ $0 }) ?? nil else { return }
      let replaced = SignalNames.signals(inMask: crumbs_crash_replaced_signals()).map(SignalNames.name)
      _ = client.session.withLockIfAvailable { file in
        file.metadata.replacedCrashSignals = replaced
        _ = file.writeIfChanged()
      }
    }
  }()

  // MARK: - Hooks and consent

  /// The app's hooks; held weakly.
  public var delegate: (any CrumbsClientDelegate)? {
    get { state.withLock { $0.delegate } }
    set { state.withLock { $0.delegate = newValue } }
  }

  /// With a handler set, nothing leaves the machine without consent: before sending, the
  /// handler receives the pending reports and answers. `.always` is persisted.
  public func setConsentHandler(_ handler: (@Sendable ([CrashReport]) -> ConsentAnswer)?) {
    state.withLock { $0.consentHandler = handler }
    uploader?.wake()
  }

  var consentPath: String { configuration.directory + "/consent" }

  /// Whether the user answered `.always` (persisted).
  public var hasStandingConsent: Bool {
    (try? Syscall.readFile(consentPath, limit: 64)).map { String(decoding: $0, as: UTF8.self) } == "always\n"
  }

  /// Asks the consent handler (if any) about `report`; called on the uploader's thread.
  func consentToSend(_ report: CrashReport) -> Bool {
    guard let handler = state.withLock({ $0.consentHandler }) else { return true }
    if hasStandingConsent { return true }
    switch handler([report]) {
    case .send:
      return true
    case .always:
      try? Syscall.writeFileAtomically(consentPath, Array("always\n".utf8))
      return true
    case .dontSend:
      _ = try? store.drop(id: report.id, reason: "the user declined to send it")
      return false
    }
  }

  // MARK: - Enable / disable

  /// Whether Crumbs records and sends (persisted across launches).
  public var isEnabled: Bool { Self.persistedEnabled(configuration.directory) }

  /// Turns Crumbs off (no breadcrumbs, no crash handler, no delivery) or back on; persisted.
  public func setEnabled(_ enabled: Bool) {
    let path = configuration.directory + "/disabled"
    if enabled {
      _ = try? Syscall.unlink(path)
      ring.setFilter(
        minimumLevel: configuration.ring.minimumLevel, enabledTypes: configuration.ring.enabledTypes)
      if configuration.installsCrashHandler {
        _ = try? CrashHandler.install(ring: ring, options: configuration.crashHandler)
      }
      startAutomaticBreadcrumbs()
      uploader?.start()
    } else {
      try? Syscall.writeFileAtomically(path, Array("disabled\n".utf8))
      ring.setFilter(minimumLevel: .debug, enabledTypes: [])
      CrashHandler.uninstall()
      stopAutomaticBreadcrumbs()
      uploader?.stop(timeout: configuration.closeTimeout)
    }
  }

  static func persistedEnabled(_ directory: String) -> Bool {
    !Syscall.fileExists(directory + "/disabled")
  }

  // MARK: - Non-fatal reports

  /// Reports an `Error` the app survived, with the current thread's stack, the global and given
  /// attributes, attachments, and a snapshot of the breadcrumb trail. Returns the stored report.
  @discardableResult
  public func send(
    error: any Error, attributes: [String: String] = [:], attachments: [String] = []
  ) -> StoredReport? {
    let type = String(reflecting: Swift.type(of: error))
    return sendNonFatal(
      type: type, message: String(describing: error), attributes: attributes, attachments: attachments)
  }

  /// Reports a message (e.g. an unexpected state), like `send(error:)`.
  @discardableResult
  public func send(message: String, attributes: [String: String] = [:], attachments: [String] = [])
    -> StoredReport?
  {
    sendNonFatal(type: "Message", message: message, attributes: attributes, attachments: attachments)
  }

  /// Reports an exception-like value: a name and a reason, like `send(error:)`.
  @discardableResult
  public func send(
    exceptionName: String, reason: String, attributes: [String: String] = [:], attachments: [String] = []
  ) -> StoredReport? {
    sendNonFatal(type: exceptionName, message: reason, attributes: attributes, attachments: attachments)
  }

  private func sendNonFatal(
    type: String, message: String, attributes extra: [String: String], attachments extraFiles: [String]
  ) -> StoredReport? {
    guard isEnabled else { return nil }
    var addresses = [UInt64](repeating: 0, count: 128)
    let count = Int(crumbs_capture_current_stack(&addresses, UInt32(addresses.count)))
    addresses.removeSubrange(count...)
    let (globalAttributes, globalFiles, recorded) = session.withLock {
      ($0.metadata.attributes, $0.metadata.attachments, $0.metadata.resource)
    }
    let delegate = state.withLock { $0.delegate }
    var builder = NonFatalReportBuilder(
      ring: ring, attributes: globalAttributes.merging(extra) { _, new in new },
      appName: configuration.appName ?? "", appVersion: configuration.appVersion,
      attachmentSizeLimit: configuration.attachmentSizeLimit, symbolicator: liveSymbolicator)
    builder.sessionResource = recorded ?? measuredResource()
    builder.omitsHostName = !configuration.reportsHostName
    let (report, files) = builder.build(
      type: type, message: message, addresses: addresses, attachmentPaths: globalFiles + extraFiles)
    if let delegate, !delegate.shouldProcess(report) { return nil }
    do {
      let stored = try store.store(report, attachments: files)
      uploader?.wake()
      return stored
    } catch {
      state.withLock { $0.problems.append("cannot store a non-fatal report: \(error)") }
      return nil
    }
  }

  // MARK: - Crashing on purpose, and closing

  /// Crashes the app now, the way `kind` says, so the whole pipeline can be checked.
  public func generateTestCrash(kind: CrashKind) -> Never {
    Crumbs.generateTestCrash(kind: kind)
  }

  /// A clean end: stops delivery, uninstalls the crash handler, marks the ring clean. A new
  /// client may be started after it. Returns within `closeTimeout` (plus the little local work):
  /// an upload still in flight then finishes on its own thread, its report pending until then.
  public func close() { close(endingAs: .clean) }

  /// How `close(endingAs:)` says this session ended.
  public enum SessionEndRequest: Sendable {
    /// A clean end, what `close()` records.
    case clean
    /// Stopped by the last SIGTERM, SIGINT or SIGHUP the app handled itself (a `ServiceGroup`'s
    /// graceful shutdown): the next launch records `terminatedBySignal` with that signal, as
    /// for a process the signal killed. Clean when no such signal came (or signal breadcrumbs
    /// are off, so none was seen).
    case lastTerminationRequest
  }

  /// `close()`, with the session's end as `end` says.
  public func close(endingAs end: SessionEndRequest) {
    let first = state.withLock { state -> Bool in
      defer { state.closed = true }
      return !state.closed
    }
    guard first else { return }
    noteReplacedCrashSignals()
    stopAutomaticBreadcrumbs()
    uploader?.stop(timeout: configuration.closeTimeout)
    CrashHandler.uninstall()
    let request = crumbs_signal_breadcrumbs_last_termination_request()
    if case .lastTerminationRequest = end, request > 0 {
      ring.close(terminatedBy: request)
    } else {
      ring.close(clean: true)
    }
    if armedExitHook { Lifecycle.markCleanExitOnExit(false) }
    Self.sharedClient.withLock { if $0 === self { $0 = nil } }
    Self.running.withLock { if $0 === self { $0 = nil } }
  }

  /// Whether a tracer (debugger) is attached: `TracerPid` in /proc/self/status is not 0. Read
  /// as bytes (on the caller's thread of `start`: no String splitting of the whole file).
  static func debuggerAttached() -> Bool {
    guard let bytes = try? Syscall.readFile("/proc/self/status", limit: 1 << 16) else { return false }
    return tracerAttached(status: bytes)
  }

  /// Whether /proc/<pid>/status text names a tracer.
  static func tracerAttached(status bytes: [UInt8]) -> Bool {
    let key = Array("\nTracerPid:".utf8)
    guard let start = bytes.indices.first(where: { bytes[$0...].starts(with: key) }) else { return false }
    let value = bytes[(start + key.count)...].drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
    guard let first = value.first else { return false }
    return first != UInt8(ascii: "0") && first != UInt8(ascii: "\n")
  }
}

/// Forwards the uploader's hooks to the client's delegate, and asks for consent.
final class UploaderBridge: ReportUploaderDelegate, @unchecked Sendable {
  weak var client: CrumbsClient?

  func shouldSend(_ report: CrashReport) -> Bool {
    guard let client else { return false }
    return client.consentToSend(report) && (client.delegate?.shouldSend(report) ?? true)
  }
  func willSend(_ report: CrashReport) -> CrashReport { client?.delegate?.willSend(report) ?? report }
  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    client?.delegate?.willSendRequest(request) ?? request
  }
  func serverDidRespond(_ result: DeliveryResult) { client?.delegate?.serverDidRespond(result) }
  func serverDidFail(_ failure: DeliveryFailure) { client?.delegate?.serverDidFail(failure) }
  func didReachLimit(_ result: DeliveryResult) { client?.delegate?.didReachLimit(result) }
  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) {
    client?.delegate?.didSucceedSending(report, results: results)
  }
  func didFailSending(_ report: CrashReport, result: DeliveryResult) {
    client?.delegate?.didFailSending(report, result: result)
  }
}
