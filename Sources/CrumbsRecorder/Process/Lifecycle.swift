// Lifecycle.swift — process start, clean exit, and the app's own lifecycle points as breadcrumbs.
//
// Entry points, in call order:
//   Lifecycle.recordStart(version:)     "process started": pid, parent pid, executable, version,
//                                       argument count
//   Lifecycle.record(.configReload)     the app's own points, any time
//   Lifecycle.markCleanExitOnExit()     on exit() (return from main included): "process exiting"
//                                       with the status, and the ring marked CLEAN, so the next
//                                       launch reports nothing (C hook, crumbs_signal_breadcrumbs.c).
//                                       `BreadcrumbRing.install()` arms it, so a recorder-only
//                                       program ends clean without closing its ring; the client
//                                       arms it through the same install.
//
// A process that dies by a signal never runs exit hooks: its ring stays RUNNING (or CRASHED /
// TERMINATED_BY_SIGNAL, set by the handlers) and is reported accordingly. Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

/// A point in the app's life worth a breadcrumb: its name, type and level.
public struct LifecyclePoint: Sendable, Hashable {
  /// Short, stable name, recorded as the `lifecycle` attribute (e.g. `config.reload`).
  public var name: String
  /// The breadcrumb's message.
  public var message: String
  public var type: BreadcrumbType
  public var level: BreadcrumbLevel

  public init(
    name: String, message: String? = nil, type: BreadcrumbType = .system, level: BreadcrumbLevel = .info
  ) {
    self.name = name
    self.message = message ?? "lifecycle: \(name)"
    self.type = type
    self.level = level
  }

  /// The app starts work that runs without a user or a request waiting (a batch, a job).
  public static let enteringBackgroundWork = LifecyclePoint(
    name: "background.enter", message: "entering background work")
  /// The background work is done.
  public static let leavingBackgroundWork = LifecyclePoint(
    name: "background.leave", message: "leaving background work")
  /// The configuration was reloaded.
  public static let configReload = LifecyclePoint(
    name: "config.reload", message: "configuration reloaded", type: .configuration)
  /// The app was asked to stop and begins shutting down.
  public static let shutdownRequested = LifecyclePoint(
    name: "shutdown.requested", message: "shutdown requested")
  /// The app is ready to serve (start-up finished).
  public static let ready = LifecyclePoint(name: "ready", message: "ready")
  /// Any other point; `name` is recorded as the `lifecycle` attribute.
  public static func custom(_ name: String, type: BreadcrumbType = .system, level: BreadcrumbLevel = .info)
    -> LifecyclePoint
  {
    LifecyclePoint(name: name, type: type, level: level)
  }
}

/// Lifecycle breadcrumbs: start, the app's own points, clean exit.
public enum Lifecycle {
  /// Appends "process started" with pid, parent pid, executable, `version` and the argument
  /// count (not the arguments: they may hold secrets).
  public static func recordStart(version: String? = nil, target: BreadcrumbTarget = .installedRing) {
    let pid = String(getpid())
    let parent = String(getppid())
    let arguments = String(CommandLine.arguments.count)
    let executable = SystemFacts.executablePath
    if let version {
      target.append(
        "process started", level: .info, type: .system,
        attributes: [
          "lifecycle": "start", "pid": pid, "ppid": parent, "version": version, "arguments": arguments,
          "executable": executable,
        ])
    } else {
      target.append(
        "process started", level: .info, type: .system,
        attributes: [
          "lifecycle": "start", "pid": pid, "ppid": parent, "arguments": arguments, "executable": executable,
        ])
    }
  }

  /// Appends `point`, with `attributes` after its `lifecycle` name.
  public static func record(
    _ point: LifecyclePoint, attributes: [(String, String)] = [], target: BreadcrumbTarget = .installedRing
  ) {
    var bytes = 2 + 9 + point.name.utf8.count
    for (key, value) in attributes { bytes += 2 + key.utf8.count + value.utf8.count }
    target.compose(point.message, level: point.level, type: point.type, attributeBytes: bytes) { writer in
      writer.add("lifecycle", point.name)
      for (key, value) in attributes { writer.add(key, value) }
    }
  }

  /// From now on, exit() (including returning from main) appends "process exiting" with the
  /// exit status to the process-wide ring and marks it clean: the next launch reports nothing.
  /// `false` disarms it (exit hooks cannot be removed, so it stays registered but inert).
  /// Returns false when the hook could not be registered.
  @discardableResult
  public static func markCleanExitOnExit(_ enabled: Bool = true) -> Bool {
    crumbs_exit_hook_install(enabled)
  }
}
