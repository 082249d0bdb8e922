// SignalBreadcrumbs.swift — the Swift face of crumbs_signal_breadcrumbs.c.
//
// Entry points, in call order:
//   SignalBreadcrumbs.install(signals:perSecondLimit:)   chain a recording handler in front of
//                                                        whatever each signal does now
//   [signal] the C handler appends "SIGTERM received" and does what the app's action says
//   SignalBreadcrumbs.uninstall()                        give the signals back
//
// Breadcrumbs go to the process-wide ring (the handler cannot know about Swift objects).
// Install and uninstall are set-up calls: serialized here by a lock, not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath
import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#endif

/// Signals that do not crash the process become breadcrumbs, and the app's own handling of them
/// stays exactly as it was: its handler is still called, `SIG_IGN` stays ignored, and a signal
/// whose default action terminates still terminates — with the ring marked as ended by that
/// signal, which the next launch records as `SessionEnd.terminatedBySignal`, not as a crash.
public enum SignalBreadcrumbs {
  /// SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGCHLD, and the resource-limit
  /// signals SIGXCPU and SIGXFSZ: a process they end is reported as ended by that limit, and
  /// one that outlives a SIGXCPU (then is killed at the CPU hard limit) too.
  public static let defaultSignals: Set<Int32> = [
    SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGCHLD, SIGXCPU, SIGXFSZ,
  ]

  /// Why install failed.
  public enum InstallError: Error, Equatable, CustomStringConvertible {
    /// A fatal signal (owned by the crash handler), SIGKILL/SIGSTOP, or a job-control stop.
    case refusedSignal(Int32)
    case system(SystemCallError)

    public var description: String {
      switch self {
      case .refusedSignal(let signal):
        "\(SignalNames.name(signal)) cannot be recorded as a breadcrumb (fatal signals belong to the crash handler; stops and SIGKILL cannot be chained)"
      case .system(let error): "cannot install signal breadcrumbs: \(error)"
      }
    }
  }

  private static let lock = Mutex(())

  /// Starts recording `signals`. Idempotent per signal: a signal already recorded keeps the app
  /// action saved the first time. `perSecondLimit` caps breadcrumbs per signal per second (a
  /// SIGCHLD storm cannot flood the ring); a terminating delivery is always recorded.
  public static func install(signals: Set<Int32> = defaultSignals, perSecondLimit: Int = 20)
    throws(InstallError)
  {
    var mask: UInt64 = 0
    for signal in signals {
      guard signal > 0, signal < 64, !crumbs_signal_breadcrumbs_refuses(signal) else {
        throw .refusedSignal(signal)
      }
      mask |= 1 << UInt64(signal)
    }
    var refused: Int32 = 0
    let result = lock.withLock { _ in
      crumbs_signal_breadcrumbs_install(mask, UInt32(clamping: max(1, perSecondLimit)), &refused)
    }
    switch Int(result) {
    case Int(CRUMBS_SIGNAL_BREADCRUMBS_OK): return
    case Int(CRUMBS_SIGNAL_BREADCRUMBS_REFUSED_SIGNAL): throw .refusedSignal(refused)
    default: throw .system(SystemCallError(call: "sigaction", errno: Errno(rawValue: errno)))
    }
  }

  /// Restores every signal's saved action, unless the app replaced ours since.
  public static func uninstall() {
    lock.withLock { _ in crumbs_signal_breadcrumbs_uninstall() }
  }

  /// The signals being recorded now.
  public static var installedSignals: Set<Int32> {
    let mask = crumbs_signal_breadcrumbs_installed_mask()
    return Set((1..<64).filter { mask & (1 << UInt64($0)) != 0 }.map { Int32($0) })
  }

  /// The file (shared library or executable) holding the app's handler of `signal` — the one
  /// behind the breadcrumb handler when that is installed — or nil for SIG_DFL, SIG_IGN or an
  /// address no loaded file holds. A ServiceGroup's signal sources show as libdispatch's.
  package static func appHandlerImage(_ signal: Int32) -> String? {
    crumbs_signal_breadcrumbs_app_handler_image(signal).map { String(cString: $0) }
  }

  /// The last stop request (SIGTERM, SIGINT, SIGHUP) recorded by the handler or
  /// `recordStopRequest`, or 0 when none was.
  package static var lastTerminationRequest: Int32 { crumbs_signal_breadcrumbs_last_termination_request() }

  /// Whether a stop request has been recorded (by the handler or `recordStopRequest`).
  package static var stopRequestRecorded: Bool { lastTerminationRequest > 0 }

  /// Records a stop request (SIGTERM, SIGINT, SIGHUP) that reached the app without passing the
  /// breadcrumb handler (a Dispatch signal source read it from a signalfd first): the same
  /// breadcrumb the handler appends, and the request `CrumbsClient.close(endingAs:)` ends the
  /// session with. Nothing when the handler already saw it. Not signal-safe.
  package static func recordStopRequest(_ signal: Int32) {
    guard crumbs_signal_breadcrumbs_note_termination_request(signal) else { return }
    let name = SignalNames.name(signal)
    CrumbsRecorder.addBreadcrumb(
      name + " received", level: .warning, type: .system,
      attributes: ["signal": name, "signal.number": String(signal), "action": "handler"])
  }
}
