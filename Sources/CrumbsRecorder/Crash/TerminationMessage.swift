// TerminationMessage.swift — the file the crash handler writes its one line to, for an
// orchestrator that reads it when the process ends (Kubernetes: /dev/termination-log, shown by
// `kubectl describe pod`). The line and its writing are C
// (Sources/CrumbsSignalPath/crash/crumbs_termination_message.c); here the file is opened, at start,
// so the handler never opens or creates anything but writes once.
//
// Entry points: TerminationMessage.defaultPath (what a configuration starts with),
// TerminationMessage.open(path:) (the client's start), TerminationMessage.stop().
// Not signal-safe (ordinary Swift); serialized by the client's start like CrashHandler.install.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

/// The crash handler's termination message file.
public enum TerminationMessage {
  /// Where Kubernetes reads a container's termination message by default.
  public static let kubernetesPath = "/dev/termination-log"

  /// `kubernetesPath` when it exists and this process may write it (access W_OK), else nil: in a
  /// Kubernetes container the line is written without configuration, elsewhere nothing is.
  public static var defaultPath: String? {
    access(kubernetesPath, W_OK) == 0 ? kubernetesPath : nil
  }

  /// The longest line the handler writes, its newline included.
  public static let maxLineBytes = Int(CRUMBS_TERMINATION_MESSAGE_MAX)

  /// Opens `path` for the crash handler's line, replacing (and closing) the file given before.
  ///
  /// O_APPEND, never O_TRUNC, never a write at offset 0: another tool (an entrypoint script, the
  /// app itself) may have written the file already, and its text stays whole; each line lands
  /// whole after whatever is there, also when a forked child (which inherits the descriptor)
  /// crashes too. Created (0644, readable by a node agent) when missing; its folder must exist.
  /// O_NONBLOCK: a FIFO or a full pipe named here never blocks the crash handler (a FIFO without
  /// a reader fails now, ENXIO, a problem at start); on a regular file it changes nothing.
  ///
  /// `redactingKeys`: in the line's message (Swift's fatal-error message), the value of a
  /// `key=value` / `key: value` pair whose key contains one of them becomes `[redacted]`, as in
  /// reports (the client passes its `Redaction.keys`; value patterns and home directories are
  /// the reports' alone); `redactingURLCredentials`: a URL's userinfo too. Keys beyond 512
  /// bytes in all do not fit: the result is false, and the line then leaves the message out
  /// (a message that cannot be redacted is not written).
  @discardableResult
  public static func open(
    path: String, redactingKeys: [String] = [], redactingURLCredentials: Bool = false
  ) throws(SystemCallError) -> Bool {
    let descriptor = try Syscall.open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK, mode: 0o644)
    // The rules change only while no descriptor is published (the handler reads them after it).
    let earlier = crumbs_termination_message_set_fd(-1)
    var list = Array(redactingKeys.filter { !$0.isEmpty }.joined(separator: "\0").utf8)
    if !list.isEmpty { list.append(0) }
    let kept = list.withUnsafeBufferPointer { bytes in
      bytes.withMemoryRebound(to: CChar.self) {
        crumbs_termination_message_set_redaction($0.baseAddress, $0.count, redactingURLCredentials)
      }
    }
    let previous = crumbs_termination_message_set_fd(descriptor)
    for old in Set([earlier, previous]) where old >= 0 && old != descriptor { Syscall.close(old) }
    return kept
  }

  /// No line from now on; the file given before is closed.
  public static func stop() {
    let previous = crumbs_termination_message_set_fd(-1)
    if previous >= 0 { Syscall.close(previous) }
  }
}
