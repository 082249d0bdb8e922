// StopRequestWatcher.swift — seeing the SIGTERM a ServiceGroup handles, which Crumbs' signal
// handler may never see.
//
// Why: on Linux a Dispatch signal source (what a ServiceGroup's graceful-shutdown signals are)
// installs a handler that blocks the signal and re-sends it to Dispatch's manager thread, which
// reads it from a signalfd. A process-directed SIGTERM sits in the process's pending set until
// some thread takes it, and the manager thread's signalfd read can take it before any thread
// runs a handler — the breadcrumb handler chained in front included. So the breadcrumb handler
// sees a group's SIGTERM only sometimes.
//
// How: Dispatch hands each signal it reads to every source registered for that signal. So this
// registers a source of its own for each stop signal (SIGTERM, SIGINT, SIGHUP) whose app
// handler is Dispatch's — the group's — and records the request from there
// (`SignalBreadcrumbs.recordStopRequest`: one breadcrumb, whichever path saw it first). It never
// registers a source for a signal Dispatch does not already handle: the first source for a
// signal installs Dispatch's handler, which would change what that signal does to the app.
//
// Entry points, in call order:
//   await StopRequestWatcher.start()   sources registered (waits for Dispatch's registration)
//   finish()                           every signal read so far is recorded; sources cancelled
// Not signal-safe.

import Crumbs
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

final class StopRequestWatcher {
  /// The serial queue the sources' events run on.
  private let queue: DispatchQueue
  private let sources: [any DispatchSourceSignal]
  /// Signalled by each event the sources deliver.
  private let delivered: DispatchSemaphore

  private init(sources: [any DispatchSourceSignal], queue: DispatchQueue, delivered: DispatchSemaphore) {
    self.sources = sources
    self.queue = queue
    self.delivered = delivered
  }

  /// The stop signals a source is registered for.
  static let stopSignals: [Int32] = [SIGTERM, SIGINT, SIGHUP]

  /// Registers a source for each stop signal Dispatch handles, and returns once Dispatch has
  /// registered them all.
  static func start() async -> StopRequestWatcher {
    let queue = DispatchQueue(label: "crumbs.stop-requests")
    let delivered = DispatchSemaphore(value: 0)
    var sources: [any DispatchSourceSignal] = []
    for signal in stopSignals where handledByDispatch(signal) {
      let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
      source.setEventHandler {
        SignalBreadcrumbs.recordStopRequest(signal)
        delivered.signal()
      }
      await withCheckedContinuation { (registered: CheckedContinuation<Void, Never>) in
        source.setRegistrationHandler { registered.resume() }
        source.resume()
      }
      sources.append(source)
    }
    return StopRequestWatcher(sources: sources, queue: queue, delivered: delivered)
  }

  /// Whether the app's handler of `signal` is Dispatch's (a signal source exists for it).
  static func handledByDispatch(_ signal: Int32) -> Bool {
    guard let image = SignalBreadcrumbs.appHandlerImage(signal) else { return false }
    return image.split(separator: "/").last?.hasPrefix("libdispatch.so") ?? false
  }

  /// Records what the sources have read, then cancels them. Their events run on one serial
  /// queue, and Dispatch usually queues this watcher's event before the group's, which started
  /// the graceful shutdown that led here; but Dispatch's manager thread hands a signal to one
  /// source after another, and on a loaded machine it can be preempted between the two while
  /// the group's shutdown runs to here (a full suite run beside a fuzzer once ended a round
  /// with no breadcrumb from either path; this is the ordering we could not rule out). So when
  /// nothing has recorded a stop request yet, this waits for this watcher's event, at most
  /// `grace` seconds: a shutdown no signal started (the app's own) pays that once. 0.1 s was
  /// not enough: on a 2-core machine at load 15 (a suite beside four builds) a round still ended
  /// with no breadcrumb; a preempted manager thread gets the CPU back well within 2 s there.
  func finish(grace: Double = 2) {
    queue.sync {}
    if !sources.isEmpty && !SignalBreadcrumbs.stopRequestRecorded {
      _ = delivered.wait(timeout: .now() + .nanoseconds(Int(grace * 1e9)))
      queue.sync {}
    }
    for source in sources { source.cancel() }
  }
}
