// DestinationOptions.swift — where reports go, as the commands that deliver take it
// (`crumbs reports send`, `crumbs collect`): the flags, and the token and headers read from
// files or the environment so that no secret has to sit on a command line. Without a
// destination flag, the environment's destinations are used, resolved as the client resolves
// them (CrumbsEnvironment, CrumbsConfiguration.resolvedDestinations).
// Not signal-safe (an ordinary command-line program).

import ArgumentParser
import Crumbs

struct DestinationOptions: ParsableArguments {
  @Option(help: "OTLP/HTTP base URL (POST {URL}/v1/logs), e.g. http://localhost:4318.")
  var otlp: String?

  @Option(
    help:
      "Backtrace endpoint (POST {URL}/post?format=json&token=T), or a full submission URL without a token.")
  var backtrace: String?

  @Option(
    help:
      "A file holding the Backtrace submission token (else CRUMBS_BACKTRACE_TOKEN_FILE, else CRUMBS_BACKTRACE_TOKEN)."
  )
  var tokenFile: String?

  @Option(help: "Discouraged (visible in ps): the Backtrace token itself; prefer --token-file.")
  var token: String?

  @Option(name: .customLong("header"), help: "An extra header, 'Name: value' (repeatable; not secret).")
  var headers: [String] = []

  @Option(help: "A file of secret headers, one 'Name: value' per line (else CRUMBS_SECRET_HEADERS).")
  var headerFile: String?

  @Option(
    name: .customLong("secret-header"),
    help: "Discouraged (visible in ps): a header whose value is never printed; prefer --header-file.")
  var secretHeaders: [String] = []

  @Option(help: "Seconds to wait for a server.")
  var timeout: Double = 30

  /// The checks every delivering command makes: at most one destination flag (with neither,
  /// the command takes the environment's destinations).
  func validate() throws {
    guard otlp == nil || backtrace == nil else {
      throw ValidationError("give --otlp or --backtrace, not both")
    }
    guard token == nil || tokenFile == nil else {
      throw ValidationError("give --token-file or --token, not both")
    }
    guard (token == nil && tokenFile == nil) || backtrace != nil else {
      throw ValidationError("--token-file and --token go with --backtrace")
    }
    for header in headers + secretHeaders where HTTPHeader(parsing: header) == nil {
      throw ValidationError("a header is 'Name: value'")
    }
    try validateTimeout(timeout)
  }

  /// The Backtrace token: --token-file, else --token, else the environment's
  /// (CRUMBS_BACKTRACE_TOKEN_FILE, else CRUMBS_BACKTRACE_TOKEN); a token file the environment
  /// names that cannot be read is an error, as --token-file's is.
  func backtraceToken(command: String) throws -> String? {
    if let tokenFile { return try Secrets.file(tokenFile, command: command, what: "token", singleLine: true) }
    if let token { return token }
    let environment = CrumbsEnvironment.cli
    if environment.backtraceTokenFailed,
      let problem = environment.problems.first(where: {
        $0.variable == .backtraceTokenFile
      })
    {
      throw fail(command, problem.description)
    }
    return environment.backtraceToken
  }

  /// What to say when neither a flag nor the environment names a destination.
  static let noDestination =
    "no destination: give --otlp URL or --backtrace URL, or set CRUMBS_OTLP_ENDPOINT, CRUMBS_BACKTRACE_URL "
    + "or OTEL_EXPORTER_OTLP_ENDPOINT"

  /// Plain headers, then the secret ones from --header-file, CRUMBS_SECRET_HEADERS and argv.
  func allHeaders(command: String) throws -> [HTTPHeader] {
    var result = headers.compactMap { HTTPHeader(parsing: $0) }
    if let headerFile {
      let text = try Secrets.file(headerFile, command: command, what: "header")
      result += try Secrets.headers(text, source: headerFile, command: command)
    }
    if let text = Environment.value("CRUMBS_SECRET_HEADERS"), !text.isEmpty {
      result += try Secrets.headers(text, source: "CRUMBS_SECRET_HEADERS", command: command)
    }
    return result + secretHeaders.compactMap { HTTPHeader(parsing: $0, isSecret: true) }
  }
}
