// CrumbsClient+SessionFile.swift — the session file (`rings/<session>.session.json`,
// SessionMetadata): attributes (typed, AttributeValue; the user as `enduser.id`), attachments and
// the crash signals another handler took, written as they change so the next launch reports
// this session as it was.

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
  /// (thread-safe). `nil` removes the key (the typed overloads are disfavored so that a plain
  /// `nil` still means this one). Persisted in the session file before it returns (a
  /// small file replaced atomically, tens of microseconds): not for hot paths.
  public func setAttribute(_ value: String?, forKey key: String) {
    setAttribute(value.map(AttributeValue.string), forKey: key)
  }

  /// A typed attribute (see `setAttribute(_:forKey:)` for strings): sent as a boolean, not as
  /// the text "true" (OTLP `bool_value`, a Backtrace JSON boolean).
  @_disfavoredOverload
  public func setAttribute(_ value: Bool?, forKey key: String) {
    setAttribute(value.map(AttributeValue.bool), forKey: key)
  }

  /// A typed attribute: sent as an integer (OTLP `int_value`, a Backtrace JSON number).
  @_disfavoredOverload
  public func setAttribute(_ value: Int?, forKey key: String) {
    setAttribute(value.map { AttributeValue.int(Int64($0)) }, forKey: key)
  }

  /// A typed attribute: sent as a double (OTLP `double_value`, a Backtrace JSON number). A NaN
  /// or an infinity, which JSON cannot hold, is kept as its text (`nan`, `inf`).
  @_disfavoredOverload
  public func setAttribute(_ value: Double?, forKey key: String) {
    setAttribute(value.map { $0.isFinite ? AttributeValue.double($0) : .string(String($0)) }, forKey: key)
  }

  /// Any attribute value; `nil` removes the key.
  @_disfavoredOverload
  public func setAttribute(_ value: AttributeValue?, forKey key: String) {
    updateSessionFile { $0.attributes[key] = value }
  }

  /// The global attributes.
  public var attributes: [String: AttributeValue] { session.withLock { $0.metadata.attributes } }

  /// The attribute `setUser(id:)` sets: OpenTelemetry's `enduser.id`.
  public static let userIDKey = "enduser.id"

  /// Who uses the app, as the app chooses to name them (an account id, a pseudonym): the
  /// `enduser.id` attribute of every report of this session from now on, this session's crash
  /// report included (reported by the next launch); `nil` clears it. Personal data leaves the
  /// machine only because the app sets it: prefer an opaque id to an e-mail address.
  public func setUser(id: String?) {
    setAttribute(id, forKey: Self.userIDKey)
  }

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
