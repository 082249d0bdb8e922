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
      try TerminationMessage.open(path: path)
      return nil
    } catch {
      return "cannot open the termination message file: \(error)"
    }
  }
}
