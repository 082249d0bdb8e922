// CrumbsConfiguration.swift — everything a CrumbsClient is started with, in the vocabulary of
// crash SDKs (Backtrace, App Center, Sentry, KSCrash).

/// Where reports go.
public enum CrumbsDestination: Sendable {
  /// OpenTelemetry OTLP/HTTP logs: `POST {endpoint}/v1/logs`, as binary protobuf (the default) or
  /// OTLP/JSON (`encoding: .json`). Headers marked secret never appear in reports, logs or errors.
  case otlp(
    endpoint: String, headers: [HTTPHeader] = [], breadcrumbsAsLogRecords: Bool = false,
    encoding: OTLPDestination.Encoding = .protobuf)
  /// Backtrace: `{endpoint}/post?format=json&token=TOKEN` (the token is a secret).
  case backtrace(endpoint: String, token: String)
  /// Backtrace with a full submission URL (token inside it).
  case backtraceSubmissionURL(String)

  func destination(maxAttachmentBytes: Int) -> any ReportDestination {
    switch self {
    case .otlp(let endpoint, let headers, let breadcrumbsAsLogRecords, let encoding):
      OTLPDestination(
        endpoint: endpoint, headers: headers, encoding: encoding,
        breadcrumbsAsLogRecords: breadcrumbsAsLogRecords,
        maxAttachmentBytes: maxAttachmentBytes)
    case .backtrace(let endpoint, let token):
      BacktraceDestination(endpoint: endpoint, token: token, maxAttachmentBytes: maxAttachmentBytes)
    case .backtraceSubmissionURL(let url):
      BacktraceDestination(submissionURL: url, maxAttachmentBytes: maxAttachmentBytes)
    }
  }
}

/// How a CrumbsClient records, stores and delivers.
public struct CrumbsConfiguration: Sendable {
  /// The Crumbs directory (rings, crash records, reports), created 0700.
  public var directory: String
  /// Reported as `service.name` (default: the executable's name).
  public var appName: String?
  /// Reported as `service.version`.
  public var appVersion: String?

  /// Ring shape and append-time filters: `slotCount` (capacity), `slotSize`, `minimumLevel`,
  /// `enabledTypes`.
  public var ring = RingOptions()

  /// Where reports go; empty keeps them in the local store only.
  public var destinations: [CrumbsDestination] = []
  /// Database and retry settings: `maxRecordCount`, `maxDatabaseSize` (megabytes), `retryInterval`,
  /// `retryLimit`, `retryBehaviour` (`.interval`/`.none`), `retryOrder` (`.queue`/`.stack`),
  /// `reportsPerMinute` (client-side rate limit; `didReachLimit` is called when reached).
  public var database = DeliverySettings()
  /// Seconds a server may stay silent before a request fails as timed out (and is retried); the
  /// whole exchange is bounded by four times this.
  public var requestTimeout: Double = 30
  /// The most seconds `close()` (and `setEnabled(false)`) waits for an upload in flight. Past it
  /// they return; the upload ends on its own thread and its report stays pending until the
  /// answer is recorded, so it is sent at least once, never lost.
  public var closeTimeout: Double = 5

  /// Whether the crash handler stays installed while a debugger (any tracer in
  /// /proc/self/status) is attached. Default false: a debugger gets the signals first.
  public var allowsAttachingDebugger = false
  /// Whether a session that vanished without a crash record (SIGKILL, the OOM killer) becomes an
  /// "abnormal termination" report (named "likely out of memory" only with evidence).
  public var detectOOM = true
  /// Largest attachment accepted (in non-fatal reports, and when the next launch copies a crashed
  /// session's attachments into its report); larger ones are left out and the report says so.
  public var attachmentSizeLimit = 7 * 1024 * 1024
  /// Whether to install the crash handler at all, and how.
  public var installsCrashHandler = true
  public var crashHandler = CrashHandlerOptions()
  /// Breadcrumbs the client records by itself — memory pressure, non-fatal signals, process
  /// start and exit — started in the background; nil turns them all off but one: the exit hook
  /// that marks the session clean on `exit()` (with its "process exiting" breadcrumb) decides
  /// how the session ends, so `start` arms it unless these options say `markCleanExit = false`.
  public var automaticBreadcrumbs: AutomaticBreadcrumbsOptions? = AutomaticBreadcrumbsOptions()
  /// Symbolication on the device (default: ELF symbols, simplified names; `useLLVMSymbolizer`
  /// adds file and line at 200–300 ms per report; `symbolDirectories` names folders where the
  /// symbols of stripped modules are found by build ID, as `crumbs symbolicate --symbols` does).
  public var symbolication = PostMortemProcessor.defaultSymbolication

  public init(directory: String) {
    self.directory = directory
  }
}
