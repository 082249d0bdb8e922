// CrumbsService.swift — Crumbs as a swift-service-lifecycle `Service`, for servers run by a
// `ServiceGroup` (Vapor, Hummingbird, swift-otel's exporters…).
//
// Entry points, in call order:
//   CrumbsService(configuration)   starts the client at once (before the group runs), so a crash
//                                  while other services start is already recorded
//   ServiceGroup.run() → run()     tells the client the app is ready (the previous sessions'
//                                  work may run: CrumbsClient+Readiness.swift), then waits for
//                                  graceful shutdown (or cancellation); meanwhile the client
//                                  records, and delivers in the background
//   [graceful shutdown]            flushes what is pending (at most `flushTimeout`), then closes
//                                  the client: the session ends, and how it ended is recorded
//
// How the session ends. A ServiceGroup watches its shutdown signals itself (a Dispatch signal
// source), so a SIGTERM no longer kills the process: the services return and `main` returns.
// Without more, that session would end "clean" and the next launch could not tell a deploy's
// SIGTERM from a normal exit. And the group's signal source replaces the SIGTERM handler
// Crumbs installed at start, so not even the breadcrumb would be left. So `run()` first chains
// Crumbs' signal breadcrumbs in front of the group's handler again (the group registers its
// signals before it runs any service); a SIGTERM then records "SIGTERM received" and goes on
// to the group's handler, which starts the graceful shutdown; at close, this service ends the session as requested by that signal
// (`CrumbsClient.close(endingAs:)`), so the next launch records `SessionEnd.terminatedBySignal`
// with SIGTERM — the same end as an unmanaged process killed by SIGTERM — and no crash.
// Not signal-safe; an ordinary async Swift service.

import Crumbs
import ServiceLifecycle
import Synchronization

/// Crumbs under a `ServiceGroup`: add it first among the group's services.
///
/// ```swift
/// let crumbs = try CrumbsService(CrumbsConfiguration(directory: "/var/lib/my-server/crumbs"))
/// let group = ServiceGroup(
///   services: [crumbs, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public struct CrumbsService: Service {
  /// The running client (also `CrumbsClient.shared` when started by this service).
  public let client: CrumbsClient
  /// How long graceful shutdown may take to deliver what is pending before closing.
  public var flushTimeout: Double
  private let watching = Latch()

  /// Starts Crumbs now (see `CrumbsClient.start`).
  public init(_ configuration: CrumbsConfiguration, flushTimeout: Double = 5) throws(CrumbsError) {
    self.init(client: try CrumbsClient.start(configuration), flushTimeout: flushTimeout)
  }

  /// Runs an already started client as a service: `run()` closes it at graceful shutdown.
  public init(client: CrumbsClient, flushTimeout: Double = 5) {
    self.client = client
    self.flushTimeout = flushTimeout
  }

  /// Returns once `run()` watches the stop signals (services start in no set order: a SIGTERM
  /// in the instant before may be seen by the signal handler alone, which a signalfd can
  /// overtake). For programs and tests that must not stop before that.
  public func waitUntilWatching() async {
    await watching.wait()
  }

  /// Returns at graceful shutdown (or cancellation), after a bounded flush and the close.
  public func run() async throws {
    // The group runs its services once the app has built them: the app is ready as far as
    // this service can tell (a server that knows better, e.g. once it listens, calls
    // `client.appIsReady()` itself; the first call counts).
    client.appIsReady()
    // The group registered its signal sources before running any service, replacing the
    // SIGTERM handler Crumbs installed at start: chain the breadcrumb in front of it again.
    client.reinstallSignalBreadcrumbs()
    // And the group's own signalfd may read the signal before any handler runs: watch beside it.
    let stopRequests = await StopRequestWatcher.start()
    watching.open()
    // Either way the group is ending: the wait's outcome (shut down or cancelled) changes
    // nothing below, and cancellation must not skip the close.
    try? await gracefulShutdown()
    stopRequests.finish()
    await client.flush(timeout: flushTimeout)
    client.close(endingAs: .lastTerminationRequest)
  }
}

/// Opens once; waiters before that are resumed then, waiters after return at once.
private final class Latch: Sendable {
  private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

  func open() {
    let waiters = state.withLock { state in
      state.open = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  func wait() async {
    await withCheckedContinuation { continuation in
      let isOpen = state.withLock { state in
        if !state.open { state.waiters.append(continuation) }
        return state.open
      }
      if isOpen { continuation.resume() }
    }
  }
}
