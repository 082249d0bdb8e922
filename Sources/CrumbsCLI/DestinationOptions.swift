// DestinationOptions.swift — where reports go, as the commands that deliver take it
// (`crumbs reports send`, `crumbs collect`): the flags, and the token and headers read from
// files or the environment so that no secret has to sit on a command line.
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

  @Option(help: "A file holding the Backtrace submission token (else CRUMBS_BACKTRACE_TOKEN).")
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

  /// The checks every delivering command makes; `exactlyOne`: a destination flag is required
  /// (else neither is allowed too: the command falls back to the OTEL_* environment).
  func validate(exactlyOne: Bool) throws {
    if exactlyOne {
      guard (otlp == nil) != (backtrace == nil) else {
        throw ValidationError("give exactly one destination: --otlp URL or --backtrace URL [--token-file F]")
      }
    } else {
      guard otlp == nil || backtrace == nil else {
        throw ValidationError("give --otlp or --backtrace, not both")
      }
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

  /// The Backtrace token: --token-file, else --token, else CRUMBS_BACKTRACE_TOKEN.
  func backtraceToken(command: String) throws -> String? {
    if let tokenFile { return try Secrets.file(tokenFile, command: command, what: "token") }
    if let token { return token }
    return Environment.value("CRUMBS_BACKTRACE_TOKEN").flatMap { $0.isEmpty ? nil : $0 }
  }

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
