// CrumbsClient+Readiness.swift — when the previous sessions' work runs: never while the app
// becomes ready.
//
// The work that waits: the previous sessions' processing (reading their rings and crash
// records, symbolication, their reports stored, their counts and summaries) and the start of
// delivery, whose first pass loads libcurl and its TLS stack. The rest of start's background
// work (the session file, the ring's cgroup facts, automatic breadcrumbs, the watchdog) does not
// wait: it is this session's, and small.
//
// What lets it run, whichever comes first (PreviousSessionsGate):
//   appIsReady()                    the app says it is ready (a server once it listens, e.g.
//                                   Hummingbird's onServerRunning); CrumbsService's run says so
//   previousSessionsDelay           seconds after start, for a program that never says it
//   a waiter                        hasCrashedInLastSession, lastSessionCrashReport,
//                                   sessionMetrics, await previousSessions, flush(timeout:), and
//                                   close(): the work starts at once, not when a timer fires
//
// At what priority: opened by the app's readiness or by the delay, the work runs at nice 19 on
// its own thread ("crumbs.previous"), and the uploader's thread it starts inherits that: it uses
// CPU time the app leaves, never the app's. So does this session's own start-up work on that
// thread before it (the session file, the machine's facts, the automatic breadcrumbs), which
// would otherwise take 2–3 ms of the only CPU of a one-CPU container while the app comes up;
// only the watchdog's thread is started before the thread lowers itself. Nice 19 rather than SCHED_IDLE: a SCHED_IDLE
// thread holding a lock the app then needs (the allocator's, the runtime's, the store's) waits
// behind every runnable thread of the machine; at nice 19 it still gets a small share. Opened
// by a waiter, the work runs at the thread's normal priority, since someone waits for it; a
// waiter that comes while it runs at nice 19 gives it its normal priority back where the kernel
// allows it (CAP_SYS_NICE, or an RLIMIT_NICE that allows it: an unprivileged thread cannot
// lower its nice value again).
//
// What never waits: the crash handler, the ring, the crash-loop tally and, in a crash loop, the
// bounded backlog processing (`processBacklog`), all on the caller's thread of `start`.
// Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import Dispatch
import Synchronization

extension CrumbsClient {
  /// Tells Crumbs the app is ready (a server: it listens and serves): the previous sessions'
  /// processing and delivery may run now (see `CrumbsConfiguration.previousSessionsDelay`).
  /// Cheap, idempotent, from any thread.
  public func appIsReady() {
    previousSessionsGate.open(.appReady)
  }

  /// Opens the gate for someone who waits for the previous sessions, and gives the work its
  /// normal priority back if it already runs at nice 19 (where the kernel allows it).
  func demandPreviousSessions() {
    previousSessionsGate.open(.waiter)
    previousSessionsGate.restorePriority()
  }
}

/// Holds the previous sessions' work until the app is ready, a delay has passed, or someone waits
/// for it; and lowers the priority of the thread that then does it.
final class PreviousSessionsGate: Sendable {
  /// What opened the gate.
  enum Trigger: Sendable, Equatable {
    /// `appIsReady()`.
    case appReady
    /// `previousSessionsDelay` passed.
    case delay
    /// Someone waits for the previous sessions (or the client closes).
    case waiter
  }

  /// The nice value the work runs at when nobody waits for it: the lowest priority.
  static let lowPriorityNiceValue: Int32 = 19

  private struct State {
    var trigger: Trigger?
    /// The worker's kernel thread id and its nice value before, while it runs at nice 19
    /// (cleared before that thread can end, so a waiter never touches another thread that
    /// reuses the id).
    var lowered: (thread: UInt32, from: Int32)?
  }

  private let state = Mutex(State())
  private let opened = DispatchSemaphore(value: 0)

  /// Opens the gate; the first trigger is the one the worker sees.
  func open(_ trigger: Trigger) {
    let first = state.withLock { state -> Bool in
      guard state.trigger == nil else { return false }
      state.trigger = trigger
      return true
    }
    if first { opened.signal() }
  }

  /// Whether the gate is open.
  var isOpen: Bool { state.withLock { $0.trigger != nil } }

  /// On the worker's thread: lowers it to nice 19 unless a waiter opened the gate (or it runs
  /// there already), and remembers what it was, for `restorePriority`.
  func lowerPriority() {
    let thread = CurrentThread.id
    state.withLock { state in
      // Under the lock: a waiter that opened the gate since sees either no lowered thread
      // (and this one stays at its priority) or this one (and raises it back).
      guard state.trigger != .waiter, state.lowered == nil,
        let before = try? Syscall.threadNiceValue(threadID: thread), before < Self.lowPriorityNiceValue,
        (try? Syscall.setThreadNiceValue(Self.lowPriorityNiceValue, threadID: thread)) != nil
      else { return }
      state.lowered = (thread, before)
    }
  }

  /// On the worker's thread: waits until the gate opens, at most `delay` seconds (then opens it
  /// itself), and returns what opened it. Lowers the calling thread to nice 19 unless a waiter
  /// opened it.
  func waitThenLowerPriority(delay: Double) -> Trigger {
    let seconds = delay.isNaN ? 0 : min(max(delay, 0), 86_400)
    if seconds > 0 {
      _ = opened.wait(timeout: .now() + .nanoseconds(Int(seconds * 1e9)))
    }
    open(.delay)
    lowerPriority()
    return state.withLock { $0.trigger ?? .delay }
  }

  /// On the worker's thread, once the work a waiter may wait for is done: nothing to raise from
  /// now on.
  func workDone() {
    state.withLock { $0.lowered = nil }
  }

  /// Gives the lowered worker its normal priority back, where the kernel allows it.
  func restorePriority() {
    state.withLock { state in
      guard let lowered = state.lowered else { return }
      if (try? Syscall.setThreadNiceValue(lowered.from, threadID: lowered.thread)) != nil {
        state.lowered = nil
      }
    }
  }
}
