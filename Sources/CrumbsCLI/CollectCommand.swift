// `crumbs collect`: reports leave the machine without the app starting again. Every ended
// session under one or more Crumbs directories is processed as the app's own client would at
// its next start, and delivered with the client's uploader; with `--watch` it stays running and
// does so as soon as a watched process ends. The collector itself is the CrumbsCollector
// library (CollectEngine.swift, CollectWatcher.swift); this command parses the arguments,
// resolves the destinations and prints what the collector says. docs/collector.md says how to
// deploy it.
//
// Exit codes (one-shot): 0 every report of every directory delivered (or none to deliver);
// 1 something was not done: a report stays pending (the server refused or did not answer, its
// next attempt is not due yet, another process held the store's delivery lock) or was dropped,
// a directory is missing, not a Crumbs directory or could not be processed; 64 usage error.
// With --watch: 0 after SIGTERM or SIGINT (within one session's processing or a second of a
// request in flight: what is left waits for the next run), 1 when the watch cannot be set up.
// Not signal-safe (an ordinary command-line program).

import ArgumentParser
import Crumbs
import CrumbsCollector
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

struct CollectCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "collect",
    abstract: "Report every ended session under Crumbs directories (crashes, kills) and deliver.",
    discussion: """
      Processes each session whose process has ended (claims its ring, makes its report, stores \
      it in that directory's reports/, counts the session) exactly as the app's next start would, \
      and delivers the pending reports and session summaries with the same limits and retries. \
      Safe beside the apps' own clients and other collectors: each session is reported once. \
      Directories: --dir (repeatable), else CRUMBS_DIRECTORY. \
      Destination: --otlp URL, or --backtrace URL with --token-file (or CRUMBS_BACKTRACE_TOKEN_FILE, \
      CRUMBS_BACKTRACE_TOKEN), or neither: the environment's, as the client reads it \
      (CRUMBS_OTLP_ENDPOINT, CRUMBS_BACKTRACE_URL, OTEL_EXPORTER_OTLP_*). With CRUMBS_DISABLED set, \
      sessions are processed and stored but nothing is sent. \
      Exit 0 when everything was delivered, 1 when a report stayed pending or was dropped or a \
      directory could not be processed. --watch keeps running (inotify, and a rescan every \
      --rescan seconds) until SIGTERM or SIGINT, then exits 0. See docs/collector.md.
      """)

  @Option(name: .customLong("dir"), help: "A Crumbs directory (repeatable); default: CRUMBS_DIRECTORY.")
  var directories: [String] = []

  @OptionGroup var destination: DestinationOptions

  @Flag(help: "Keep running: report each session as soon as its process ends.")
  var watch = false

  @Option(help: "With --watch: seconds between full rescans (the safety net beside inotify).")
  var rescan: Double = 60

  func validate() throws {
    guard !directories.isEmpty || CrumbsEnvironment.cli.directory != nil else {
      throw ValidationError(StoreOptions.noDirectory)
    }
    try destination.validate()
  }

  /// --dir, else CRUMBS_DIRECTORY (validate made sure there is one).
  var resolvedDirectories: [String] {
    directories.isEmpty ? CrumbsEnvironment.cli.directory.map { [$0] } ?? [] : directories
  }

  /// The destinations, resolved the client's way (CrumbsConfiguration.resolvedDestinations):
  /// the flag's, else the environment's, each OTLP one filled in from OTEL_*.
  func destinations(environment: CrumbsEnvironment) throws -> [any ReportDestination] {
    var configuration = CrumbsConfiguration()
    if let otlp = destination.otlp {
      // Extra headers reach OTLP only: the client's Backtrace destination takes none.
      let headers = try destination.allHeaders(command: "collect")
      configuration.destinations = [.otlp(endpoint: otlp, headers: headers)]
    } else if let backtrace = destination.backtrace {
      let token = try destination.backtraceToken(command: "collect")
      configuration.destinations = [
        token.map { .backtrace(endpoint: backtrace, token: $0) } ?? .backtraceSubmissionURL(backtrace)
      ]
    }
    return configuration.resolvedDestinations(environment)
  }

  func run() throws {
    // Before anything starts a thread: SIGTERM and SIGINT are read from a descriptor between
    // passes, never handled in a signal handler (a one-shot run ends on them too, between passes).
    let signals: Int32
    do {
      signals = try Syscall.signalDescriptor([SIGTERM, SIGINT])
    } catch {
      throw fail("collect", "cannot set up signal handling: \(error)")
    }
    let environment = CrumbsEnvironment.cli
    environment.printProblems(command: "collect")
    let destinations = try destinations(environment: environment)
    guard !destinations.isEmpty else {
      throw fail("collect", DestinationOptions.noDestination, CLIExit.usage)
    }
    // A request in flight is given up once SIGTERM/SIGINT is pending (the report stays pending).
    var transport = DeliveryTransport(timeout: destination.timeout)
    transport.abandons = { CollectEngine.signalPending(signals) }
    let engine = CollectEngine(
      directories: resolvedDirectories.map(absolute), destinations: destinations,
      transport: transport, summaryResource: environment.otel.resource(appName: environment.appName),
      signals: signals, output: Self.output)
    engine.turnedOffByEnvironment = environment.isDisabled
    if watch {
      do {
        var watcher = try CollectWatcher(engine: engine, signals: signals, rescanSeconds: rescan)
        try watcher.run()
      } catch {
        throw fail("collect", error.description)
      }
      return
    }
    if !engine.collectOnce() { throw CLIExit.failure }
  }

  /// The collector's lines on stdout, each flushed as it is printed (stdout is a pipe or a
  /// journal under a service manager), its problems on stderr.
  static let output = CollectOutput(
    line: { line in
      print(line)
      fflush(nil)
    },
    problem: { problem in printError("crumbs collect: \(problem)") })
}
