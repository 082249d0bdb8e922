// CrumbsEnvironment.swift — the one reader of the environment variables that configure Crumbs.
// The client (at `start`: CrumbsConfiguration.environment) and every `crumbs` command read them
// through this type, so a container configured once is read the same way by both.
//
//   CRUMBS_DIRECTORY             the Crumbs directory
//   CRUMBS_DISABLED              true/1/yes/on: record and send nothing (false/0/no/off: on)
//   CRUMBS_APP_NAME              service.name
//   CRUMBS_APP_VERSION           service.version
//   CRUMBS_OTLP_ENDPOINT         an OTLP/HTTP base URL: POST {URL}/v1/logs
//   CRUMBS_BACKTRACE_URL         a Backtrace endpoint (with a token), or a submission URL
//   CRUMBS_BACKTRACE_TOKEN_FILE  a file holding the Backtrace token (readSecret(file:))
//   CRUMBS_BACKTRACE_TOKEN       the token itself (the file is preferred: it is not inherited)
//   OTEL_*                       the OpenTelemetry SDK's own (OTLPEnvironment)
//
// Precedence, as the OpenTelemetry SDKs have it: what the code configures (CrumbsConfiguration,
// or a command's flags) wins over CRUMBS_*, which wins over OTEL_*. A value that cannot be used
// (a URL that is not http(s), a token file that cannot be read, a switch that is neither true
// nor false) is never a trap and never silently dropped: it is left unused and named in
// `problems` (the client's `problems`, a command's stderr).
//
// Entry points: CrumbsEnvironment(_:) (a dictionary: the process's, `processEnvironment()`, or a
// test's) → directory, isDisabled, appName, appVersion, destinations, backtraceToken, otel,
// problems. Not signal-safe.

import CrumbsPlatform

/// What the CRUMBS_* and OTEL_* environment variables ask of Crumbs (see the file comment).
public struct CrumbsEnvironment: Sendable {
  /// The variables read here (the OTEL_* ones are OTLPEnvironment's).
  public enum Variable: String, CaseIterable, Sendable {
    case directory = "CRUMBS_DIRECTORY"
    case disabled = "CRUMBS_DISABLED"
    case appName = "CRUMBS_APP_NAME"
    case appVersion = "CRUMBS_APP_VERSION"
    case otlpEndpoint = "CRUMBS_OTLP_ENDPOINT"
    case backtraceURL = "CRUMBS_BACKTRACE_URL"
    case backtraceTokenFile = "CRUMBS_BACKTRACE_TOKEN_FILE"
    case backtraceToken = "CRUMBS_BACKTRACE_TOKEN"
  }

  /// A value that could not be used, and what was done instead. Never quotes a secret.
  public struct Problem: Sendable, Equatable, CustomStringConvertible {
    public var variable: Variable
    public var reason: String
    /// `VARIABLE reason`, or `VARIABLE=value reason` when the reason quotes the value.
    public var description: String { variable.rawValue + (reason.hasPrefix("=") ? "" : " ") + reason }
  }

  /// CRUMBS_DIRECTORY, as given (the client makes it absolute, as it does a configured one).
  public var directory: String?
  /// CRUMBS_DISABLED is true.
  public var isDisabled = false
  /// CRUMBS_APP_NAME.
  public var appName: String?
  /// CRUMBS_APP_VERSION.
  public var appVersion: String?
  /// CRUMBS_OTLP_ENDPOINT, an http(s) base URL.
  public var otlpEndpoint: String?
  /// CRUMBS_BACKTRACE_URL, an http(s) URL.
  public var backtraceURL: String?
  /// The Backtrace token: CRUMBS_BACKTRACE_TOKEN_FILE's content, else CRUMBS_BACKTRACE_TOKEN.
  public var backtraceToken: String?
  /// Whether a token was asked for and could not be had (an unreadable token file): no
  /// Backtrace destination is made without it (a submission URL would be refused anyway).
  public var backtraceTokenFailed = false
  /// The OTEL_* variables.
  public var otel: OTLPEnvironment
  /// Each CRUMBS_* value that could not be used (OTEL_* ones are in `otel.problems`).
  public var problems: [Problem] = []

  /// Every problem in words, the CRUMBS_* ones first.
  public var problemDescriptions: [String] { problems.map(\.description) + otel.problems }

  /// Reads `environment` (names are case-sensitive, as on Linux; an empty value is unset).
  /// Reads the token file CRUMBS_BACKTRACE_TOKEN_FILE names, if any.
  public init(_ environment: [String: String]) {
    otel = OTLPEnvironment(environment)
    func value(_ variable: Variable) -> String? {
      guard let text = environment[variable.rawValue].map(Self.trimmedSpace), !text.isEmpty else {
        return nil
      }
      return text
    }
    directory = value(.directory)
    appName = value(.appName)
    appVersion = value(.appVersion)
    if let text = value(.disabled) {
      switch text.lowercased() {
      case "true", "1", "yes", "on": isDisabled = true
      case "false", "0", "no", "off": isDisabled = false
      default:
        problems.append(
          Problem(variable: .disabled, reason: "=\(text) is not true or false (Crumbs stays on)"))
      }
    }
    let urls: [(Variable, WritableKeyPath<CrumbsEnvironment, String?>)] = [
      (.otlpEndpoint, \.otlpEndpoint), (.backtraceURL, \.backtraceURL),
    ]
    for (variable, keyPath) in urls {
      guard let url = value(variable) else { continue }
      if OTLPEnvironment.isHTTPURL(url) {
        self[keyPath: keyPath] = url
      } else {
        // A URL may carry a token: it is named by its variable, never quoted.
        problems.append(Problem(variable: variable, reason: "is not an http(s) URL (ignored)"))
      }
    }
    let tokenFile = value(.backtraceTokenFile)
    let token = value(.backtraceToken)
    if let tokenFile {
      if token != nil {
        problems.append(
          Problem(
            variable: .backtraceToken, reason: "is ignored: CRUMBS_BACKTRACE_TOKEN_FILE is set too (set one)")
        )
      }
      switch Self.readSecret(file: tokenFile, limit: 4096, singleLine: true) {
      case .success(let text): backtraceToken = text
      case .failure(let error):
        backtraceTokenFailed = true
        problems.append(
          Problem(variable: .backtraceTokenFile, reason: "\(tokenFile) \(error) (no Backtrace destination)"))
      }
    } else {
      backtraceToken = token
    }
  }

  /// The CRUMBS_* and OTEL_* variables of this process (read from `environ`; nothing else is
  /// copied).
  public static func processEnvironment() -> [String: String] {
    SystemFacts.environment(prefixed: "CRUMBS_").merging(SystemFacts.environment(prefixed: "OTEL_")) { a, _ in
      a
    }
  }

  /// The DEBUGINFOD_* variables of this process: elfutils' own, which DebuginfodSettings reads
  /// as elfutils does (servers, cache, bounds).
  public static func debuginfodEnvironment() -> [String: String] {
    SystemFacts.environment(prefixed: "DEBUGINFOD_")
  }

  /// The destinations the CRUMBS_* variables name: CRUMBS_OTLP_ENDPOINT, then
  /// CRUMBS_BACKTRACE_URL (with the token, or as a submission URL without one). The OTEL_*
  /// endpoint is not among them: CrumbsConfiguration.resolvedDestinations adds it where no OTLP
  /// destination is configured.
  public var destinations: [CrumbsDestination] {
    var destinations: [CrumbsDestination] = []
    if let otlpEndpoint { destinations.append(.otlp(endpoint: otlpEndpoint)) }
    if let backtraceURL, !backtraceTokenFailed {
      destinations.append(
        backtraceToken.map { .backtrace(endpoint: backtraceURL, token: $0) }
          ?? .backtraceSubmissionURL(backtraceURL))
    }
    return destinations
  }

  // MARK: - Secret files

  /// Why a secret file could not be read, in words that follow its path (never quoting its
  /// content).
  public struct SecretFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
  }

  /// The secret held in the file at `path` (a token, or header lines), which is untrusted
  /// input: only a regular file is read (a FIFO, a device, a directory or a socket is refused,
  /// and the open never blocks), at most `limit` bytes, as UTF-8; the whitespace and line
  /// breaks around it are trimmed (the one a text editor or `echo` leaves). `singleLine`
  /// refuses a line break or control character inside (a token goes into a URL or a header).
  /// A link is followed: Kubernetes mounts each secret as a link into a folder of its own, and
  /// the variable naming the file is the operator's, not another user's. A relative path is
  /// taken from the working directory.
  public static func readSecret(file path: String, limit: Int, singleLine: Bool) -> Result<
    String, SecretFileError
  > {
    let bytes: [UInt8]
    do {
      bytes = try Syscall.readFile(Syscall.absolutePath(path), limit: limit)
    } catch {
      return .failure(SecretFileError(description: "cannot be read (\(error))"))
    }
    guard let text = String(validating: bytes, as: UTF8.self) else {
      return .failure(SecretFileError(description: "is not UTF-8 text"))
    }
    let trimmed = trimmedSpace(text)
    guard !trimmed.isEmpty else { return .failure(SecretFileError(description: "is empty")) }
    if singleLine, trimmed.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
      return .failure(SecretFileError(description: "holds more than one line, or a control character"))
    }
    return .success(trimmed)
  }

  /// `text` without the spaces, tabs and line breaks around it (by scalar: "\r\n" is one
  /// Character, so a Character set would miss half of them).
  static func trimmedSpace(_ text: String) -> String {
    // A comparison, not a Set: this runs in start, where a set's first use costs its hashing.
    func space(_ scalar: Unicode.Scalar) -> Bool {
      scalar == " " || scalar == "\t" || scalar == "\r" || scalar == "\n"
    }
    let scalars = text.unicodeScalars.drop(while: space)
    var end = scalars.endIndex
    while end > scalars.startIndex, space(scalars[scalars.index(before: end)]) {
      end = scalars.index(before: end)
    }
    return String(String.UnicodeScalarView(scalars[..<end]))
  }
}
