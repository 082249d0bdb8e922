// AutomaticBreadcrumbs.swift — turning every automatic producer on (and off) in one call.
//
// Entry points, in call order:
//   AutomaticBreadcrumbs.start(options)   process-start breadcrumb, clean-exit hook, signal
//                                         breadcrumbs, memory-pressure monitor
//   stop()                                monitor stopped and joined, signals given back, exit
//                                         hook disarmed
//
// Every producer writes to the process-wide ring: install one first (BreadcrumbRing.install).
// Not signal-safe.

/// What `AutomaticBreadcrumbs.start` turns on.
public struct AutomaticBreadcrumbsOptions: Sendable {
  /// The memory-pressure monitor; nil leaves it off.
  public var memoryPressure: MemoryPressureConfiguration? = MemoryPressureConfiguration()
  /// Signals recorded as breadcrumbs; nil or empty leaves signals alone. Defaults to
  /// `SignalBreadcrumbs.defaultSignals`.
  public var signals: Set<Int32>? {
    get {
      switch signalChoice {
      case .defaults: SignalBreadcrumbs.defaultSignals
      case .chosen(let set): set
      }
    }
    set { signalChoice = .chosen(newValue) }
  }
  /// The default is kept unbuilt: the first Set<Int32> of a process looks up Int32's Hashable
  /// conformance through every loaded image (~0.3 ms with Foundation), and options are made on
  /// the caller's thread of `CrumbsClient.start`. `start(_:)` builds it on the client's
  /// background thread, when it installs the signal breadcrumbs.
  enum SignalChoice: Sendable {
    case defaults
    case chosen(Set<Int32>?)
  }
  var signalChoice = SignalChoice.defaults
  /// Append "process started" now.
  public var recordStart = true
  /// Mark the ring clean on exit() (the next launch then reports nothing). A CrumbsClient arms
  /// this hook itself, on the caller's thread of `start`; false there leaves every exit() that
  /// does not follow `close()` to be reported as an abnormal termination.
  public var markCleanExit = true
  /// Recorded in the start breadcrumb.
  public var appVersion: String? = nil
  /// Run on the monitor's thread after each memory-pressure pass (the client checks its crash
  /// handler there).
  var afterMemoryPass: (@Sendable () -> Void)? = nil

  public init() {}
}

/// The automatic producers that are running; `stop()` turns them off.
public final class AutomaticBreadcrumbs: @unchecked Sendable {
  /// The memory monitor, when it runs.
  public let memoryMonitor: MemoryPressureMonitor?
  /// How memory pressure is watched (`.stopped` when it is not).
  public let memoryMode: MemoryPressureMonitor.Mode
  /// What could not be turned on, in words (the rest runs).
  public let problems: [String]
  private let signals: Bool
  private let exitHook: Bool

  /// Turns on what `options` asks for. Never throws: what fails is listed in `problems`.
  public static func start(_ options: AutomaticBreadcrumbsOptions = .init()) -> AutomaticBreadcrumbs {
    var problems: [String] = []
    if options.recordStart { Lifecycle.recordStart(version: options.appVersion) }
    var exitHook = false
    if options.markCleanExit {
      exitHook = Lifecycle.markCleanExitOnExit(true)
      if !exitHook { problems.append("cannot register the exit hook (on_exit failed)") }
    }
    var signals = false
    if let set = options.signals, !set.isEmpty {
      do {
        try SignalBreadcrumbs.install(signals: set)
        signals = true
      } catch {
        problems.append("\(error)")
      }
    }
    var monitor: MemoryPressureMonitor?
    var mode = MemoryPressureMonitor.Mode.stopped
    if let configuration = options.memoryPressure {
      let candidate = MemoryPressureMonitor(configuration: configuration)
      candidate.afterEachPass = options.afterMemoryPass
      do {
        mode = try candidate.start()
        monitor = candidate
      } catch {
        problems.append("\(error)")
      }
    }
    return AutomaticBreadcrumbs(
      memoryMonitor: monitor, memoryMode: mode, problems: problems, signals: signals, exitHook: exitHook)
  }

  private init(
    memoryMonitor: MemoryPressureMonitor?, memoryMode: MemoryPressureMonitor.Mode, problems: [String],
    signals: Bool, exitHook: Bool
  ) {
    self.memoryMonitor = memoryMonitor
    self.memoryMode = memoryMode
    self.problems = problems
    self.signals = signals
    self.exitHook = exitHook
  }

  /// Stops the monitor (joining its thread), gives the signals back, disarms the exit hook.
  public func stop() {
    memoryMonitor?.stop()
    if signals { SignalBreadcrumbs.uninstall() }
    if exitHook { Lifecycle.markCleanExitOnExit(false) }
  }
}
