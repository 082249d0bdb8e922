// CrumbsClient+TerminationMessage.swift — `start` hands the crash handler the file named by
// `CrumbsConfiguration.terminationMessagePath` (TerminationMessage, CrumbsRecorder). Not
// signal-safe.

extension CrumbsClient {
  /// Opens the termination message file when the crash handler is installed and a path is
  /// configured; otherwise makes sure no file from an earlier client is written. Returns the
  /// problem to report when the file cannot be opened (never fatal: the crash is still recorded).
  static func openTerminationMessage(_ configuration: CrumbsConfiguration) -> String? {
    guard CrashHandler.isInstalled, let path = configuration.terminationMessagePath else {
      TerminationMessage.stop()
      return nil
    }
    do {
      // Its message redacted with the reports' keys and URL rule (Redaction.off has neither).
      guard
        try TerminationMessage.open(
          path: path, redactingKeys: configuration.redaction.keys,
          redactingURLCredentials: configuration.redaction.redactsURLCredentials)
      else {
        return
          "the redaction keys exceed 512 bytes: the termination message leaves the fatal-error message out"
      }
      return nil
    } catch {
      return "cannot open the termination message file: \(error)"
    }
  }
}
