// TerminationMessage.swift — the file the crash handler writes its one line to, for an
// orchestrator that reads it when the process ends (Kubernetes: /dev/termination-log, shown by
// `kubectl describe pod`). The line and its writing are C
// (Sources/CrumbsSignalPath/crumbs_termination_message.c); here the file is opened, at start,
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
  public static func open(path: String) throws(SystemCallError) {
    let descriptor = try Syscall.open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK, mode: 0o644)
    let previous = crumbs_termination_message_set_fd(descriptor)
    if previous >= 0 && previous != descriptor { Syscall.close(previous) }
  }

  /// No line from now on; the file given before is closed.
  public static func stop() {
    let previous = crumbs_termination_message_set_fd(-1)
    if previous >= 0 { Syscall.close(previous) }
  }
}
