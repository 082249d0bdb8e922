// CrumbsError.swift — why a client could not start.

/// Why a client could not start.
public enum CrumbsError: Error, CustomStringConvertible {
  case directory(SystemCallError)
  case ring(RingCreationError)
  case crashHandler(CrashHandlerError)
  case store(SystemCallError)
  /// `CrumbsConfiguration.redaction.valuePatterns` holds patterns outside the supported subset
  /// (docs/redaction.md#value-patterns): each named with why (`Redaction.invalidPatterns`).
  case redactionPatterns([String])
  /// A client started in this process and not closed: one process, one client (one ring, one
  /// crash handler), so that one crash is one report. Use the running client, or `close()` it
  /// first.
  case alreadyStarted(CrumbsClient)
  /// Neither the configuration (`CrumbsConfiguration(directory:)`) nor the environment
  /// (CRUMBS_DIRECTORY) names the Crumbs directory.
  case noDirectory

  public var description: String {
    switch self {
    case .directory(let error): "crumbs: cannot use the directory: \(error)"
    case .ring(let error): "crumbs: \(error)"
    case .crashHandler(let error): "crumbs: cannot install the crash handler: \(error)"
    case .store(let error): "crumbs: cannot open the report store: \(error)"
    case .redactionPatterns(let problems): "crumbs: " + problems.joined(separator: "; ")
    case .noDirectory:
      "crumbs: no Crumbs directory: give CrumbsConfiguration(directory:) in code, or set CRUMBS_DIRECTORY "
        + "in the environment"
    case .alreadyStarted(let running):
      "crumbs: a client is already running in this process (session \(running.sessionID), "
        + "directory \(running.configuration.directory)); use it, or close() it first"
    }
  }
}
