// CrumbsClient+SessionFile.swift — the session file (`rings/<session>.session.json`,
// SessionMetadata): attributes, attachments and the crash signals another handler took, written
// as they change so the next launch reports this session as it was.

import CrumbsPlatform
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

extension CrumbsClient {
  /// The session file's contents, and what was last written; changed and written under the lock,
  /// so writes never overtake each other.
  struct SessionFile {
    let path: String
    var metadata: SessionMetadata
    var written: SessionMetadata?

    /// Writes the contents if they changed since the last write; returns the problem, if any.
    mutating func writeIfChanged() -> String? {
      guard metadata != written else { return nil }
      do {
        try Syscall.writeFileAtomically(path, metadata.encoded(), durable: false)
        written = metadata
        return nil
      } catch {
        return "cannot write the session file: \(error)"
      }
    }
  }

  // MARK: - Attributes and attachments

  /// Attributes added to every report from now on, this session's crash report included
  /// (thread-safe). `nil` removes the key. Persisted in the session file before it returns (a
  /// small file replaced atomically, tens of microseconds): not for hot paths.
  public func setAttribute(_ value: String?, forKey key: String) {
    updateSessionFile { $0.attributes[key] = value }
  }

  /// The global attributes.
  public var attributes: [String: String] { session.withLock { $0.metadata.attributes } }

  /// A file attached to every report from now on, this session's crash report included (read
  /// when a report is made: for a crash, by the next launch). Persisted like `setAttribute`.
  public func addAttachment(path: String) {
    updateSessionFile { if !$0.attachments.contains(path) { $0.attachments.append(path) } }
  }

  public func removeAttachment(path: String) {
    updateSessionFile { $0.attachments.removeAll { $0 == path } }
  }

  // MARK: - The session file

  /// Changes the session file's contents and writes them when they changed.
  func updateSessionFile(_ change: (inout SessionMetadata) -> Void) {
    session.withLock { change(&$0.metadata) }
    writeSessionFile()
  }

  /// Writes the session file if its contents changed since the last write.
  func writeSessionFile() {
    if let problem = session.withLock({ $0.writeIfChanged() }) {
      state.withLock { $0.problems.append(problem) }
    }
  }

  /// Records in the session file which crash signals another handler has taken from ours (or
  /// that none has, again): the next launch says so, and why such a crash left no record.
  func noteReplacedCrashSignals() {
    let replaced = CrashHandler.replacedSignals().map(SignalNames.name)
    updateSessionFile { $0.replacedCrashSignals = replaced }
  }

  /// At exit (the app's own exit work done, the process about to end): the crash handler may
  /// have been taken since the last check. Takes no lock that is not free (exit() may come from
  /// a thread, or a signal handler, that interrupted a holder: the check is then skipped), so
  /// it reads the C handler's mask itself rather than through CrashHandler's lock.
  static let registerExitCheck: Void = {
    atexit {
      guard let client = CrumbsClient.running.withLockIfAvailable({ $0 }) ?? nil else { return }
      let replaced = CrashHandler.replacedSignalsWithoutLocking().map(SignalNames.name)
      _ = client.session.withLockIfAvailable { file in
        file.metadata.replacedCrashSignals = replaced
        _ = file.writeIfChanged()
      }
    }
  }()
}
