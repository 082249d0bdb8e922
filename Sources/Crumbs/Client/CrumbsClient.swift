// CrumbsClient.swift — the one object an app holds: recording, crash capture, the previous
// session's reports, non-fatal reports, consent, and delivery.
//
// Entry points, in call order:
//   CrumbsClient.start(_:)          on the caller's thread only what must be, and everything that
//                                   decides how the session ends: the directory, a new ring
//                                   (installed; its header carries the app's name and version
//                                   and the OTEL_* environment's resource, for a crash before
//                                   the session file exists),
//                                   the crash handler, the thread-dump responder (its signal
//                                   in the ring header), the crash loop the previous sessions
//                                   left (`crashLoop`: CrashLoop.swift, their ring headers and
//                                   crash records and a small tally), the session counted, the
//                                   clean-exit hook,
//                                   and — only when more than a few
//                                   earlier sessions wait (a crash loop) — the oldest of them
//                                   processed briefly (PostMortemProcessor.processBacklog), so
//                                   rings/ stays bounded. Everything else — the session file
//                                   (first written there, unless the app sets an attribute
//                                   first), the ring's cgroup facts, the guard pages of most alternate stacks, automatic
//                                   breadcrumbs, the previous sessions' reports and their counts,
//                                   delivery — runs on a background thread; the previous
//                                   sessions and delivery only once the app is ready, at the
//                                   lowest priority (+Readiness). One client per
//                                   process: a second start throws `.alreadyStarted`.
//   appIsReady()                    the app serves: the previous sessions' work may run (+Readiness)
//   addBreadcrumb / attributes / attachments / send(error:…)   while the app runs; attributes
//                                   (typed: String, Bool, Int, Double; setUser's enduser.id)
//                                   and attachments are persisted in the session file at once
//   hasCrashedInLastSession, lastSessionCrashReport           (start the previous sessions'
//                                   work if it still waits for the app, and wait for it)
//   setEnabled(_:)                  persisted; disabled records nothing and sends nothing
//   await previousSessions          the same, suspending instead of blocking
//   flush(timeout:)                 delivers what is pending now and returns (short-lived CLIs)
//   captureThreads()                every thread's stack now (+Threads; `crumbs threads PID`
//                                   asks the same from outside, through ThreadDumpResponder)
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
//
// One idea a file: this one starts, records and closes; CrumbsError (why start failed),
// +PreviousSessions (what earlier sessions left), +SessionFile (attributes, attachments,
// replaced crash signals), +Hooks (delegate and consent), +Enabled (the persisted switch),
// +NonFatal (reports of caught errors), +Hangs (heartbeats, the watchdog), +Flush (delivering now),
// +Readiness (when the previous sessions' work runs, and at what priority), SessionSummaries (each ended
// session's summary as an OTLP log), +Observers (what it did, for the metrics product).

import CrumbsPlatform
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

public final class CrumbsClient: @unchecked Sendable {
  /// The configuration it was started with.
  public let configuration: CrumbsConfiguration
  /// This session's ring.
  public let ring: BreadcrumbRing
  /// This session.
  public var sessionID: SessionID { ring.sessionID }
  /// The sessions of this app that crashed or ended abnormally in a row right before this start,
  /// nil when the last one that ended was clean (or none did): known when `start` returns, from
  /// what the previous sessions left (CrashLoop.swift), e.g. to start in a safe mode.
  public let crashLoop: CrashLoop?
  /// The place in `crashLoop` of each of its sessions this launch will process, from the second
  /// on (their reports' `crumbs.crash_loop.count`).
  let crashLoopCounts: [(session: SessionID, count: Int)]
  /// The rings the crash-loop check found waiting (this session's excluded): `processBacklog`
  /// has nothing to do unless there are more than a processor keeps waiting.
  let waitingRingsAtStart: Int
  public let store: ReportStore
  let directory: RingDirectory
  let uploader: ReportUploader?

  struct State {
    weak var delegate: (any CrumbsClientDelegate)?
    var consentHandler: ConsentHandler?
    var previous: PostMortemOutcome?
    /// What `processBacklog` did at start, joined to the background run's outcome.
    var backlog: PostMortemOutcome?
    var metrics: SessionMetrics?
    var problems: [String] = []
    var closed = false
    var automatic: AutomaticBreadcrumbs?
    /// Async callers of `previousSessions`, resumed when the background run ends.
    var previousWaiters: [CheckedContinuation<PostMortemOutcome, Never>] = []
    /// Told what the client did (CrumbsClient+Observers.swift), and what the previous
    /// sessions' processing told them, for those added after it.
    var observers: [CrumbsClientObserver] = []
    var processedSessions: CrumbsClientEvent?
    /// Finds the current operation where `CrumbsOperation.current` is not set: CrumbsTracer
    /// installs one that reads the task's `ServiceContext`.
    var operationLookup: (@Sendable () -> CrumbsOperation?)?
  }

  let state = Mutex(State())

  let session: Mutex<SessionFile>
  /// Whether this client armed the clean-exit hook (disarmed at close).
  var armedExitHook = false
  let previousSessionsDone = DispatchSemaphore(value: 0)
  /// Holds the previous sessions' work until the app is ready (CrumbsClient+Readiness.swift).
  let previousSessionsGate = PreviousSessionsGate()
  let bridge: UploaderBridge
  let liveSymbolicator: LiveSymbolicator
  /// The OTEL_* variables as read at start (CrumbsConfiguration.environment).
  let otel: OTLPEnvironment
  /// CRUMBS_DISABLED turned this process's client off (until `setEnabled(true)`).
  let turnedOffByEnvironment: Mutex<Bool>
  /// Watches for hangs (`configuration.hangs`); its thread starts with the background work.
  var watchdog: HangWatchdog?
  /// Answers `crumbs threads PID`; nil when off or when no signal was free. Set once, in init.
  private(set) var threadDumps: ThreadDumpResponder? = nil

  /// Tests only: called first on the background thread of `start` (a test holds it there to
  /// crash the process before any background work, the session file included, is done).
  package static let backgroundWorkWillStart = Mutex<(@Sendable () -> Void)?>(nil)

  /// The shared client, once `start(_:shared:)` made one.
  public static var shared: CrumbsClient? { sharedClient.withLock { $0 } }
  static let sharedClient = Mutex<CrumbsClient?>(nil)
  /// The client started and not closed, shared or not; held during a start, so two starts at
  /// once cannot both succeed.
  static let running = Mutex<CrumbsClient?>(nil)

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
    // Rules of the app's own are written before start returns, not by the background work: a
    // crash before that work ran would leave no session file, and `crumbs collect`, which
    // knows only what the session wrote, would redact its report with the defaults alone.
    // The default rules need no file (every processor applies them), so start stays as fast.
    if configuration.redaction != Redaction() { client.writeSessionFile() }
    client.processBacklog()
    client.startBackgroundWork()
    return client
  }

  private init(_ configuration: CrumbsConfiguration) throws(CrumbsError) {
    // Absolute from here on: the app may chdir, and every later path (session file, a forked
    // child's ring, the store, the metrics) is made from this one.
    // A pattern the processors would refuse (and then redact every text whole) is refused here,
    // before anything is made.
    if !configuration.redaction.valuePatterns.isEmpty {
      let invalid = configuration.redaction.invalidPatterns
      if !invalid.isEmpty { throw .redactionPatterns(invalid) }
    }
    // The environment fills in what the code left unset (code wins: CrumbsEnvironment).
    let environment = CrumbsEnvironment(
      configuration.environment ?? CrumbsEnvironment.processEnvironment())
    var configuration = configuration.filledIn(from: environment)
    guard !configuration.directory.isEmpty else { throw .noDirectory }
    configuration.directory = Syscall.absolutePath(configuration.directory)
    self.configuration = configuration
    turnedOffByEnvironment = Mutex(environment.isDisabled)
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
    otel = environment.otel
    var ringOptions = configuration.ring
    if ringOptions.appName == nil { ringOptions.appName = configuration.appName }
    // What a crash needs of the session file before the background work writes it: the version,
    // and the environment's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), read here
    // on the caller's thread, so a crash as soon as `start` returns is reported with them.
    if ringOptions.appVersion == nil { ringOptions.appVersion = configuration.appVersion }
    // Without OTEL_RESOURCE_ATTRIBUTES (the usual case) the resource is the service name alone:
    // encoded without a dictionary (EnvironmentResource.encoded says why).
    ringOptions.environmentResource =
      otel.resourceAttributes.isEmpty
      ? EnvironmentResource.encoded(
        pairs: otel.serviceName(appName: configuration.appName).map { [(key: "service.name", value: $0)] }
          ?? [])
      : EnvironmentResource.encoded(otel.resource(appName: configuration.appName))
    do {
      // The cgroup facts are read on the background thread (recordCgroup below).
      ring = try directory.createRing(options: ringOptions, cgroupLater: true)
    } catch {
      throw .ring(error)
    }
    let loop = CrashLoop.find(directory: directory, excluding: ring.sessionID)
    crashLoop = loop.loop
    crashLoopCounts = loop.counts
    waitingRingsAtStart = loop.waitingRings
    // A clean exit() is clean from the first moment, not once the background work has run. It
    // decides how the session ends, so it is armed even without automatic breadcrumbs: by the
    // recorder's own install, the code a recorder-only program runs too.
    let armsExitHook = configuration.automaticBreadcrumbs?.markCleanExit ?? true
    armedExitHook = ring.install(markingCleanOnExit: armsExitHook) && armsExitHook
    session = Mutex(
      SessionFile(
        path: RingDirectory.sessionFilePath(forRing: ring.path),
        metadata: SessionMetadata(
          sessionID: ring.sessionID, appVersion: configuration.appVersion, redaction: configuration.redaction)
      ))
    bridge = UploaderBridge()
    liveSymbolicator = LiveSymbolicator(options: configuration.symbolication)
    let destinations = configuration.resolvedDestinations(environment)
    uploader =
      destinations.isEmpty
      ? nil
      : ReportUploader(
        store: store, destinations: destinations, settings: configuration.database,
        transport: DeliveryTransport(timeout: configuration.requestTimeout), delegate: bridge, outbox: bridge)
    bridge.client = self
    // Before any work on the previous sessions (processBacklog, the background thread): the
    // configured hooks are in place from the first report on (CrumbsClient+Hooks.swift).
    state.withLock {
      $0.delegate = configuration.delegate
      $0.consentHandler = configuration.consent
    }
    if configuration.consent != nil { noteConsentRequired() }
    watchdog = configuration.hangs.map { HangWatchdog(client: self, detection: $0) }
    let environmentProblems = environment.problemDescriptions
    if !environmentProblems.isEmpty { state.withLock { $0.problems += environmentProblems } }
    if let problem = configuration.requestTimeoutProblem { state.withLock { $0.problems.append(problem) } }
    let enabled = isEnabled
    if !enabled {
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
    if let problem = Self.openTerminationMessage(configuration) {
      state.withLock { $0.problems.append(problem) }
    }
    // After the crash handler: the request signal is chosen below its capture signal.
    let dumps = Self.startThreadDumps(configuration, ring: ring, enabled: enabled)
    threadDumps = dumps.responder
    if let problem = dumps.problem { state.withLock { $0.problems.append(problem) } }
    do {
      try SessionMetricsFile.countStart(directory: configuration.directory)
    } catch {
      state.withLock { $0.problems.append("cannot count this session: \(error)") }
    }
    if let problem = loop.problem { state.withLock { $0.problems.append(problem) } }
    if armsExitHook && !armedExitHook {
      state.withLock { $0.problems.append("cannot register the exit hook (on_exit failed)") }
    }
    _ = Self.registerExitCheck
  }

  // MARK: - Background work

  func startBackgroundWork() {
    // The start breadcrumb first, on the caller's thread (one append), so it precedes whatever
    // the app records next; the rest of the automatic breadcrumbs start in the background.
    if let options = configuration.automaticBreadcrumbs, options.recordStart, isEnabled {
      Lifecycle.recordStart(version: configuration.appVersion)
    }
    let work: @Sendable (_ onOwnThread: Bool) -> Void = { [self] onOwnThread in
      Self.backgroundWorkWillStart.withLock { $0 }?()
      // The watchdog's thread first, at the app's priority: a hang is judged on time.
      if isEnabled { startWatchdog() }
      // The rest yields to the app becoming ready (2–3 ms of CPU, which on a machine or a
      // container of one CPU would be the app's): at nice 19 from here on, unless a waiter
      // already asked for the previous sessions (CrumbsClient+Readiness.swift).
      previousSessionsGate.lowerPriority()
      // What start left for here: the session file (creating a file costs start 0.1–0.3 ms on
      // ext4; until it exists, a crash is reported with the version in the ring's header, and
      // an app that sets attributes or redaction rules of its own writes it first itself), the
      // ring's cgroup facts, the alternate stacks' guards and the automatic breadcrumbs.
      writeSessionFile()
      ring.recordCgroup()
      CrashHandler.guardAlternateStacks()
      recordSessionResource()
      if isEnabled { startAutomaticBreadcrumbs() }
      // The previous sessions, and delivery with the libcurl it loads: once the app is ready,
      // at the lowest priority (CrumbsClient+Readiness.swift).
      _ = previousSessionsGate.waitThenLowerPriority(delay: configuration.previousSessionsDelay)
      if onOwnThread { Syscall.setCurrentThreadName("crumbs.previous") }
      processPreviousSessions()
      noteReplacedCrashSignals()
      previousSessionsGate.workDone()
      previousSessionsDone.signal()
      // Its first pass sends the session summaries just queued. Not after close(), which may
      // have come while the work waited (close stopped delivery for good).
      if isEnabled && !state.withLock({ $0.closed }) { uploader?.start() }
    }
    // Without a thread (the process is out of them), the work runs here rather than not at all,
    // and then at once, at the caller's priority: waiting for the app's readiness here would
    // hold `start` itself.
    do {
      try BackgroundThread.start(name: "crumbs.start") { work(true) }
    } catch {
      previousSessionsGate.open(.waiter)
      work(false)
    }
  }

  /// Records the session's resource in the session file (off the caller's thread of `start`: it
  /// reads /etc/os-release, /proc/meminfo and the executable's build ID note), so that a crash
  /// is reported with the machine and parent it had, not those of the launch that reads it.
  func recordSessionResource() {
    let resource = measuredResource()
    updateSessionFile { $0.resource = resource }
  }

  /// The machine's facts, the parent process, the executable's build ID, and the OTEL_*
  /// environment's resource over them (code's `appName` over that).
  func measuredResource() -> [String: String] {
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
  func startAutomaticBreadcrumbs() {
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

  func stopAutomaticBreadcrumbs() {
    let automatic = state.withLock { state -> AutomaticBreadcrumbs? in
      defer { state.automatic = nil }
      return state.automatic
    }
    automatic?.stop()
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
    // Whatever the previous sessions' work waited for, it runs now, as it would have at once.
    demandPreviousSessions()
    noteReplacedCrashSignals()
    stopAutomaticBreadcrumbs()
    watchdog?.stop()
    threadDumps?.stop()
    uploader?.stop(timeout: configuration.closeTimeout)
    CrashHandler.uninstall()
    TerminationMessage.stop()
    let request = SignalBreadcrumbs.lastTerminationRequest
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
