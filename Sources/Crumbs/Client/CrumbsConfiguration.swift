// CrumbsConfiguration.swift — everything a CrumbsClient is started with, in the vocabulary of
// crash SDKs (Backtrace, App Center, Sentry, KSCrash).

/// Where reports go.
public enum CrumbsDestination: Sendable {
  /// OpenTelemetry OTLP/HTTP logs: `POST {endpoint}/v1/logs`, as binary protobuf (the default) or
  /// OTLP/JSON (`encoding: .json`), gzip-compressed with `compression: .gzip`. Headers marked
  /// secret never appear in reports, logs or errors. What is left unset here (headers it does
  /// not name, compression) comes from the OTEL_EXPORTER_OTLP_* variables (see
  /// `CrumbsConfiguration.environment`).
  case otlp(
    endpoint: String, headers: [HTTPHeader] = [], breadcrumbsAsLogRecords: Bool = false,
    encoding: OTLPDestination.Encoding = .protobuf, compression: OTLPDestination.Compression? = nil)
  /// Backtrace: `{endpoint}/post?format=json&token=TOKEN` (the token is a secret).
  case backtrace(endpoint: String, token: String)
  /// Backtrace with a full submission URL (token inside it).
  case backtraceSubmissionURL(String)

  func destination(maxAttachmentBytes: Int) -> any ReportDestination {
    switch self {
    case .otlp(let endpoint, let headers, let breadcrumbsAsLogRecords, let encoding, let compression):
      {
        var destination = OTLPDestination(
          endpoint: endpoint, headers: headers, encoding: encoding,
          breadcrumbsAsLogRecords: breadcrumbsAsLogRecords,
          maxAttachmentBytes: maxAttachmentBytes)
        destination.compression = compression ?? .none
        return destination
      }()
    case .backtrace(let endpoint, let token):
      BacktraceDestination(endpoint: endpoint, token: token, maxAttachmentBytes: maxAttachmentBytes)
    case .backtraceSubmissionURL(let url):
      BacktraceDestination(submissionURL: url, maxAttachmentBytes: maxAttachmentBytes)
    }
  }
}

/// How a CrumbsClient records, stores and delivers.
public struct CrumbsConfiguration: Sendable {
  /// The Crumbs directory (rings, crash records, reports), created 0700. A relative path is
  /// resolved against the working directory when the client starts (`client.configuration`
  /// holds it absolute): a later chdir changes nothing. Empty (`CrumbsConfiguration()`): the
  /// environment's CRUMBS_DIRECTORY, read at start; without it `start` throws
  /// `CrumbsError.noDirectory`.
  public var directory: String
  /// Reported as `service.name` (default: CRUMBS_APP_NAME, else OTEL_SERVICE_NAME, else the
  /// executable's name).
  public var appName: String?
  /// Reported as `service.version` (default: CRUMBS_APP_VERSION).
  public var appVersion: String?

  /// Ring shape and append-time filters: `slotCount` (capacity), `slotSize`, `minimumLevel`,
  /// `enabledTypes`.
  public var ring = RingOptions()

  /// Where reports go; empty keeps them in the local store only.
  public var destinations: [CrumbsDestination] = []
  /// Delivery settings: `retryInterval`, `retryLimit`, `retryBehaviour` (`.interval`/`.none`),
  /// `retryOrder` (`.queue`/`.stack`), `reportsPerMinute` (client-side rate limit;
  /// `didReachLimit` is called when reached).
  public var database = DeliverySettings()
  /// How large the report store may grow: `maxRecordCount` reports in each state,
  /// `maxDatabaseSize` megabytes in all; kept by the store itself, with or without a destination.
  public var storeLimits = StoreLimits()
  /// Seconds a server may stay silent before a request fails as timed out (and is retried); the
  /// whole exchange is bounded by four times this. At most a day (longer, infinity included, is
  /// a day); one that is not a positive number is 30, and named in the client's `problems`.
  public var requestTimeout: Double = 30
  /// The most seconds `close()` (and `setEnabled(false)`) waits for an upload in flight. Past it
  /// they return; the upload ends on its own thread and its report stays pending until the
  /// answer is recorded, so it is sent at least once, never lost.
  public var closeTimeout: Double = 5
  /// Seconds after `start` at which the previous sessions' work (their processing and reports,
  /// then delivery, whose first pass loads libcurl) runs if the app has not said it is ready
  /// (`CrumbsClient.appIsReady()`) by then: it never competes with the app becoming ready, and
  /// runs at the lowest CPU priority (nice 19). Whatever waits for it
  /// (`hasCrashedInLastSession`, `await previousSessions`, `flush(timeout:)`…) starts it at
  /// once. 0: right after `start`, still at the lowest priority.
  public var previousSessionsDelay: Double = 3

  /// Whether the crash handler stays installed while a debugger (any tracer in
  /// /proc/self/status) is attached. Default false: a debugger gets the signals first.
  public var allowsAttachingDebugger = false
  /// Whether a session that vanished without a crash record (SIGKILL, the OOM killer) becomes an
  /// "abnormal termination" report (named "likely out of memory" only with evidence).
  public var detectOOM = true
  /// Largest attachment accepted (in non-fatal reports, and when the next launch copies a crashed
  /// session's attachments into its report); larger ones are left out and the report says so.
  public var attachmentSizeLimit = 7 * 1024 * 1024
  /// Whether reports and session summaries name the machine (`host.name`, and Backtrace's
  /// `hostname` made from it). False keeps the host name out of everything Crumbs stores and
  /// sends, crash reports made by the next launch included.
  public var reportsHostName = true
  /// Personal data scrubbed on the device when a report is built (never when a breadcrumb is
  /// appended: the ring keeps what was appended, and stays on the device): values of attributes
  /// whose key contains `password`, `passwd`, `secret`, `token`, `api_key`, `authorization`,
  /// `cookie` or `set-cookie` (case-insensitive), the values of such `key=value` / `key: value`
  /// pairs in messages, matches of `valuePatterns`, and home directories in paths (`~/…`).
  /// Recorded in the session file, so `crumbs collect` applies this session's rules.
  /// `Redaction.off` turns it off. What it does not catch: docs/redaction.md#what-it-does-not-catch.
  public var redaction = Redaction()
  /// Whether `crumbs threads PID` may ask this process for a dump of its threads: a real-time
  /// signal nobody handles is taken at start and named in the ring's header, and a thread
  /// sleeping in poll answers (docs/client.md#thread-dumps). False takes no signal.
  public var answersThreadDumps = true
  /// Whether to install the crash handler at all, and how.
  public var installsCrashHandler = true
  public var crashHandler = CrashHandlerOptions()
  /// Where the crash handler writes one line when the process crashes, for an orchestrator to
  /// show why it died: `Crumbs: SIGSEGV in MyApp.Parser.parse (MyApp+0x1f2c4); report <id>;
  /// Fatal error: …` (signal, top frame in the app's code, the crash report's id, the Swift
  /// fatal message; at most 512 bytes, one `write`, after the crash record). Kubernetes reads
  /// `/dev/termination-log` when a container ends (`kubectl describe pod` shows it). Default:
  /// that path when it exists and this process may write it, else nil; nil writes nothing.
  /// Opened at `start` for appending (never truncated; created when missing); a file that
  /// cannot be opened is named in the client's `problems`.
  public var terminationMessagePath: String? = TerminationMessage.defaultPath
  /// Breadcrumbs the client records by itself — memory pressure, non-fatal signals, process
  /// start and exit — started in the background; nil turns them all off but one: the exit hook
  /// that marks the session clean on `exit()` (with its "process exiting" breadcrumb) decides
  /// how the session ends, so `start` arms it unless these options say `markCleanExit = false`.
  public var automaticBreadcrumbs: AutomaticBreadcrumbsOptions? = AutomaticBreadcrumbsOptions()
  /// Hang detection (`HangDetection`): the client's watchdog thread watches the concurrency pool
  /// (and the main queue, when asked) and the named heartbeats (`client.heartbeat(_:threshold:)`);
  /// a watch silent past `threshold` gives a `hang` report with every thread's stack while the
  /// process runs on. Default on, threshold 3 s; nil turns it off.
  public var hangs: HangDetection? = HangDetection()
  /// Symbolication on the device (default: ELF symbols, simplified names, and file, line and
  /// inlined calls for the modules that carry DWARF when `llvm-symbolizer` is on PATH — false
  /// `useLLVMSymbolizer` leaves them out; `symbolDirectories` names folders where the symbols
  /// of stripped modules are found by build ID, as `crumbs symbolicate --symbols` does; and
  /// the lines of source around the app's frames where the source is on the machine, redacted
  /// and capped: `sourceContext`, nil leaves them out).
  public var symbolication = PostMortemProcessor.defaultSymbolication
  /// Whether the next launch's processing (and `crumbs collect`, which turns it on) fetches the
  /// debug file of a stripped module from the debuginfod servers DEBUGINFOD_URLS names (and the
  /// one the crashed executable's package note names, `debugInfoUrl`), by build ID, and the
  /// source files of the app's frames that are not on the machine, into a cache
  /// (DEBUGINFOD_CACHE_PATH, else `debuginfod/` in the directory), within DEBUGINFOD_TIMEOUT,
  /// DEBUGINFOD_MAXTIME and DEBUGINFOD_MAXSIZE (`DebuginfodClient`). Off by default: the start
  /// path makes no network request unless asked. A file already in the cache is used either
  /// way only when this is on.
  public var fetchesDebugFiles = false

  /// The app's hooks (`shouldProcess`, `willSend`, …), in place before `start` processes the
  /// previous sessions: a delegate set after `start` (`client.delegate`) may miss the previous
  /// session's crash. Held strongly here (the client holds its configuration); `client.delegate`
  /// replaces it later.
  public var delegate: (any CrumbsClientDelegate)?
  /// The consent handler, in place before anything could leave: with one configured, no report,
  /// session summary or metric is sent before it answered `.send` (summaries and metrics: only
  /// after `.always`). Recorded in the directory, so `crumbs collect` sends nothing from it
  /// without standing consent (docs/collector.md). `client.setConsentHandler` changes it later.
  public var consent: ConsentHandler?
  /// The share of non-fatal reports kept (`send(error:)`, `send(message:)`,
  /// `send(exceptionName:reason:)`), 0…1, default 1: each is kept with this probability, decided
  /// when it is made (one sampled out is neither built nor stored, and `send` returns nil).
  /// Crashes, abnormal ends and hangs are never sampled, and sessions are counted whatever it is.
  /// Out of range is clamped; NaN keeps everything.
  public var nonFatalSampleRate: Double = 1
  /// Tests only: the random source of `nonFatalSampleRate`, a number in 0..<1.
  package var nonFatalSampleRandom: @Sendable () -> Double = { Double.random(in: 0..<1) }

  /// The environment the CRUMBS_* and OTEL_* variables are read from at `start` (nil: the
  /// process's); CrumbsEnvironment reads them, as every `crumbs` command does. Honoured:
  /// CRUMBS_DIRECTORY, CRUMBS_DISABLED, CRUMBS_APP_NAME, CRUMBS_APP_VERSION,
  /// CRUMBS_OTLP_ENDPOINT, CRUMBS_BACKTRACE_URL with CRUMBS_BACKTRACE_TOKEN_FILE (or
  /// CRUMBS_BACKTRACE_TOKEN); OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
  /// OTEL_EXPORTER_OTLP_ENDPOINT and _LOGS_, _TRACES_, _METRICS_ENDPOINT, _HEADERS and
  /// _LOGS_, _TRACES_, _METRICS_HEADERS, _PROTOCOL (http/protobuf, http/json), _COMPRESSION
  /// (gzip), _TIMEOUT (ms); see OTLPEnvironment.
  /// Configuration in code wins: a `directory`, `appName` or `appVersion` set here is used as
  /// it is; an OTLP (Backtrace) destination in `destinations` leaves the environment's OTLP
  /// (Backtrace) endpoint unused; CRUMBS_OTLP_ENDPOINT wins over the OTEL_* endpoint. A value
  /// that cannot be used is named in the client's `problems`. CRUMBS_DISABLED turns the client
  /// off for this process as `setEnabled(false)` does, without persisting it (`setEnabled(true)`
  /// turns it back on). `[:]` ignores the environment.
  public var environment: [String: String]?

  public init(directory: String) {
    self.directory = directory
  }

  /// A configuration whose directory is CRUMBS_DIRECTORY (read from `environment` at start).
  public init() {
    self.directory = ""
  }

  /// This configuration with what the code left unset taken from `environment`: the directory,
  /// the app's name and version.
  package func filledIn(from environment: CrumbsEnvironment) -> CrumbsConfiguration {
    var configuration = self
    if configuration.directory.isEmpty, let directory = environment.directory {
      configuration.directory = directory
    }
    if configuration.appName == nil { configuration.appName = environment.appName }
    if configuration.appVersion == nil { configuration.appVersion = environment.appVersion }
    return configuration
  }

  /// What `requestTimeout` is taken as when it is out of range, in words; nil when it is used as
  /// it is.
  var requestTimeoutProblem: String? {
    let used = CurlTransport.usableTimeout(requestTimeout) ?? CurlTransport.defaultTimeout
    guard used != requestTimeout else { return nil }
    return "requestTimeout \(requestTimeout) is not a positive number of seconds up to "
      + "\(Int(CurlTransport.maxTimeout)); using \(used)"
  }

  /// The destinations to deliver to, kind by kind, code first: the OTLP destinations of
  /// `destinations`, else CRUMBS_OTLP_ENDPOINT's, else the OTEL_* endpoint's; the Backtrace
  /// destinations of `destinations`, else CRUMBS_BACKTRACE_URL's. Every OTLP destination takes
  /// from the OTEL_* variables what it leaves unset (headers it does not name, compression,
  /// timeout).
  package func resolvedDestinations(_ environment: CrumbsEnvironment) -> [any ReportDestination] {
    let otel = environment.otel
    var chosen = destinations
    let isOTLP: (CrumbsDestination) -> Bool = {
      if case .otlp = $0 { return true }
      return false
    }
    if !chosen.contains(where: isOTLP) { chosen += environment.destinations.filter(isOTLP) }
    if !chosen.contains(where: { !isOTLP($0) }) { chosen += environment.destinations.filter { !isOTLP($0) } }
    var resolved: [any ReportDestination] = []
    var hasOTLP = false
    for configured in chosen {
      let destination = configured.destination(maxAttachmentBytes: attachmentSizeLimit)
      if case .otlp(_, _, _, _, let compression) = configured, let otlp = destination as? OTLPDestination {
        hasOTLP = true
        resolved.append(otel.apply(to: otlp, compressionSetInCode: compression != nil))
      } else {
        resolved.append(destination)
      }
    }
    if !hasOTLP, let fromEnvironment = otel.destination(maxAttachmentBytes: attachmentSizeLimit) {
      resolved.append(fromEnvironment)
    }
    return resolved
  }
}
