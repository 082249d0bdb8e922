// MemoryPressureMonitor.swift — memory pressure becomes `system` breadcrumbs, on its own thread.
//
// Entry points, in call order:
//   MemoryPressureMonitor(configuration:target:)   locate the sources (MemorySources.locate)
//   start()                                       arm the PSI trigger if one was asked for and the
//                                                 kernel lets us, start the thread; returns the mode
//     [thread] run loop: poll(wake pipe, PSI trigger fd POLLPRI, timeout = sampling interval)
//              → sampleNow(): read (MemorySources.read), assess and decide
//                (MemoryPressureAssessor), append, mark the session's memory-warning flag
//   stop()                                        wake the thread through its pipe and join it
//
// Modes. `.sampling` (the default): everything, PSI averages included, is read once per
// interval. `.pressureTrigger` (only when `pressureTrigger` is set): the kernel wakes us (poll
// POLLPRI) the moment tasks stall on memory for `stall` within `window`, so pressure is seen
// within milliseconds, and between events the thread samples the other sources once per
// interval. A trigger is not the default because of what it costs the process at its end: the
// kernel tears it down when its descriptor is closed, and that waits for an RCU grace period
// (synchronize_rcu), 6–20 ms on these machines, added to every exit and every crash — a
// client-started process took 8.8 ms from fault to death with it, 2.2 ms without. No PSI, or a
// kernel that refuses the trigger (unprivileged processes may only use windows that are
// multiples of 2 s; containers often mount /proc/pressure read-only), also means `.sampling`.
// Idle cost either way: one wake-up per interval (2 s default) reading 3–6 small files.
//
// Thread safety: after start() the assessor and the sources belong to the monitor thread; before
// start() (or after stop()) the caller may drive sampleNow(at:) itself, as the tests do.
// Not signal-safe.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// How the memory-pressure monitor reads and judges.
public struct MemoryPressureConfiguration: Sendable, Equatable {
  /// Prefix for every /proc and /sys path (tests point it at fixture files). "" is the system.
  public var root: String = ""
  /// The memory cgroup to watch, as `v2:/path` or `v1:/path`; nil reads /proc/self/cgroup.
  public var cgroup: String? = nil
  /// How often the sources are read when no trigger fires, in milliseconds (at least 100).
  /// Each sample costs ~0.35 ms of CPU, most of it the kernel generating the files: every 2 s
  /// keeps the idle cost under 0.2 ms per second; a PSI trigger still wakes the thread at once.
  public var samplingIntervalMilliseconds: Int = 2000
  /// A PSI trigger to ask the kernel for, so pressure wakes the monitor within milliseconds
  /// instead of at the next sample; nil (the default) samples only. A trigger adds the kernel's
  /// teardown of it, 6–20 ms here, to the process's exit and to its death by a crash (see the
  /// design comment of MemoryPressureMonitor.swift).
  public var pressureTrigger: PressureTrigger? = nil
  public var thresholds = MemoryPressureThresholds()
  public var rateLimit = MemoryPressureRateLimit()

  public init() {}
}

/// A PSI trigger: wake when tasks stall on memory at least `stallMicroseconds` in any
/// `windowMicroseconds` window ("some" stalls: at least one task waiting).
public struct PressureTrigger: Sendable, Equatable {
  public var stallMicroseconds = 150_000
  /// 500 ms...10 s. Unprivileged processes (no CAP_SYS_RESOURCE) may only use multiples of 2 s:
  /// when the kernel refuses the window, the monitor retries with the next multiple of 2 s.
  public var windowMicroseconds = 1_000_000

  public init() {}

  public init(stallMicroseconds: Int, windowMicroseconds: Int) {
    self.stallMicroseconds = stallMicroseconds
    self.windowMicroseconds = windowMicroseconds
  }
}

/// Watches memory pressure and appends a `system` breadcrumb at each crossing.
///
/// Breadcrumbs carry `memory.pressure` (warning, error, fatal), `memory.source` (psi,
/// psi.trigger, cgroup, meminfo) and the figures; a `warning` or worse also sets the session's
/// memory-warning flag (read next launch as `hasReceivedMemoryWarningInLastSession` and as OOM
/// evidence).
public final class MemoryPressureMonitor: @unchecked Sendable {
  /// How the monitor learns about pressure.
  public enum Mode: Sendable, Equatable, CustomStringConvertible {
    /// Not started, or stopped.
    case stopped
    /// The kernel's PSI trigger wakes the thread; other sources sampled every interval.
    case pressureTrigger(file: String, stallMicroseconds: Int, windowMicroseconds: Int)
    /// Every source read once per interval (the reason says why there is no trigger).
    case sampling(reason: String)

    public var description: String {
      switch self {
      case .stopped: "stopped"
      case .pressureTrigger(let file, let stall, let window):
        "PSI trigger on \(file) (\(stall / 1000) ms stall in \(window / 1000) ms), sampling the rest"
      case .sampling(let reason): "sampling (\(reason))"
      }
    }
  }

  /// Why the monitor could not start.
  public enum StartError: Error, Equatable, CustomStringConvertible {
    case alreadyRunning
    case system(SystemCallError)

    public var description: String {
      switch self {
      case .alreadyRunning: "the memory-pressure monitor is already running"
      case .system(let error): "cannot start the memory-pressure monitor: \(error)"
      }
    }
  }

  public let configuration: MemoryPressureConfiguration
  let target: BreadcrumbTarget
  let sources: MemorySources
  var assessor: MemoryPressureAssessor
  private var buffer = [UInt8](repeating: 0, count: 16 << 10)
  /// Set by start(), read by the thread; stop() clears it after the join.
  private(set) public var mode: Mode = .stopped
  private var thread: BackgroundThread?
  private var wake: (read: Int32, write: Int32)?
  private var triggerDescriptor: Int32 = -1
  /// Samples taken (by the thread or by sampleNow), for tests and diagnostics.
  private(set) var samplesTaken = 0
  /// Run on the monitor's thread after each pass of the thread (set before start()).
  var afterEachPass: (@Sendable () -> Void)?

  /// Prepares a monitor writing to `target` (the process-wide ring unless told otherwise).
  public init(configuration: MemoryPressureConfiguration = .init(), target: BreadcrumbTarget = .installedRing)
  {
    self.configuration = configuration
    self.target = target
    sources = MemorySources.locate(root: configuration.root, cgroup: configuration.cgroup)
    assessor = MemoryPressureAssessor(thresholds: configuration.thresholds, limits: configuration.rateLimit)
  }

  deinit { stop() }

  /// What the monitor reads: the PSI file, the cgroup directory, meminfo (for diagnostics).
  public var sourceDescription: String {
    var parts: [String] = []
    if let file = sources.pressureFile { parts.append("PSI \(file)") }
    if let cgroup = sources.cgroup {
      parts.append("cgroup \(cgroup.version.rawValue) \(cgroup.directory)")
      parts.append("limit from \(sources.limitDirectory ?? "none (unlimited)")")
    }
    if let meminfo = sources.meminfoFile { parts.append(meminfo) }
    return parts.isEmpty ? "no memory sources found" : parts.joined(separator: ", ")
  }

  /// Arms the trigger when possible and starts the thread. Returns the mode it runs in.
  @discardableResult
  public func start() throws(StartError) -> Mode {
    guard thread == nil else { throw .alreadyRunning }
    let pipe: (read: Int32, write: Int32)
    do { pipe = try Syscall.wakePipe() } catch { throw .system(error) }
    wake = pipe
    mode = armTrigger()
    // The first sample sets the baseline for counters (OOM kills before we started do not count).
    sampleNow(at: SystemClock.monotonicNanoseconds())
    do {
      thread = try BackgroundThread.startJoinable(name: "crumbs.memory") { [self] in run() }
    } catch {
      closeDescriptors()
      mode = .stopped
      throw .system(error)
    }
    return mode
  }

  /// Stops the thread and waits for it. Idempotent.
  public func stop() {
    guard let thread, let wake else { return }
    Syscall.signalWakePipe(wake.write)
    thread.join()
    self.thread = nil
    closeDescriptors()
    mode = .stopped
  }

  private func closeDescriptors() {
    if let wake {
      Syscall.close(wake.read)
      Syscall.close(wake.write)
    }
    wake = nil
    if triggerDescriptor >= 0 { Syscall.close(triggerDescriptor) }
    triggerDescriptor = -1
  }

  private func armTrigger() -> Mode {
    guard let file = sources.pressureFile else { return .sampling(reason: "no PSI file") }
    guard let trigger = configuration.pressureTrigger else {
      return .sampling(reason: "PSI trigger not requested")
    }
    let roundedUp = (trigger.windowMicroseconds + 1_999_999) / 2_000_000 * 2_000_000
    var windows = [trigger.windowMicroseconds]
    if roundedUp != trigger.windowMicroseconds { windows.append(roundedUp) }
    var lastError = "unknown"
    for window in windows {
      do {
        let fd = try Syscall.open(file, O_RDWR | O_NONBLOCK)
        // The kernel overwrites the last byte written with NUL: send the terminator too.
        let command = Array("some \(trigger.stallMicroseconds) \(window)".utf8) + [0]
        do {
          try Syscall.writeCommand(fd, command, path: file)
        } catch {
          Syscall.close(fd)
          throw error
        }
        triggerDescriptor = fd
        return .pressureTrigger(
          file: file, stallMicroseconds: trigger.stallMicroseconds, windowMicroseconds: window)
      } catch {
        lastError = "\(error)"
      }
    }
    return .sampling(reason: "the kernel refused a PSI trigger: \(lastError)")
  }

  private func run() {
    guard let wake else { return }
    var descriptors = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
    if triggerDescriptor >= 0 {
      descriptors.append(pollfd(fd: triggerDescriptor, events: Int16(POLLPRI), revents: 0))
    }
    let interval = Int32(clamping: max(100, configuration.samplingIntervalMilliseconds))
    var nextSample = SystemClock.monotonicNanoseconds() + UInt64(interval) * 1_000_000
    while true {
      let now = SystemClock.monotonicNanoseconds()
      let wait = nextSample > now ? Int32(clamping: (nextSample - now) / 1_000_000) : 0
      do {
        try Syscall.poll(&descriptors, timeoutMilliseconds: wait)
      } catch {
        return
      }
      if descriptors[0].revents != 0 { return }
      var fired = false
      if descriptors.count > 1 {
        let events = descriptors[1].revents
        if events & Int16(POLLERR) != 0 {
          // The watched cgroup went away: the trigger is dead, keep sampling.
          descriptors.removeLast()
          Syscall.close(triggerDescriptor)
          triggerDescriptor = -1
        } else if events & Int16(POLLPRI) != 0 {
          fired = true
        }
      }
      let after = SystemClock.monotonicNanoseconds()
      if fired || after >= nextSample {
        sampleNow(at: after, triggerFired: fired)
        if after >= nextSample { nextSample = after + UInt64(interval) * 1_000_000 }
        afterEachPass?()
      }
    }
  }

  /// Reads every source once, judges and appends. The thread calls it; tests call it directly
  /// (with their own clock) on a monitor that is not started. Returns what it appended.
  @discardableResult
  func sampleNow(at now: UInt64, triggerFired: Bool = false) -> MemoryPressureAssessor.Announcement? {
    samplesTaken += 1
    let sample = sources.read(at: now, buffer: &buffer)
    let findings = assessor.assess(sample, triggerFired: triggerFired)
    if findings.contains(where: { $0.level >= .warning }) {
      target.markMemoryWarning()
    }
    guard let announcement = assessor.decide(findings, now: now) else { return nil }
    var attributeBytes = 0
    for (key, value) in announcement.attributes { attributeBytes += 2 + key.utf8.count + value.utf8.count }
    target.compose(
      announcement.message, level: announcement.level, type: .system, attributeBytes: attributeBytes
    ) {
      writer in
      for (key, value) in announcement.attributes { writer.add(key, value) }
    }
    return announcement
  }

}
