// ReportUploader.swift — delivery of stored reports: at least once, never on the app's thread,
// within the store's limits, remembering attempts across restarts. The one owner of delivery:
// every request Crumbs sends goes through it (or, for debug files, through its RetryPolicy).
//
// Entry points, in call order:
//   ReportUploader(store:destinations:settings:)   nothing happens yet (no thread, no I/O)
//   start()                 a background thread runs passes: now, after wake(), when the next
//                           report is due; stop(timeout:) ends it (waits, at most the timeout,
//                           for the request in flight; the thread may finish it later)
//                           (ReportUploader+Thread.swift)
//   deliverPendingNow()     one pass on the caller's thread (CLI, tests, CrumbsClient.flush);
//                           the same code (deliverPending(stopping:), package: `crumbs collect`
//                           stops between attempts once SIGTERM is pending)
//   wake()                  a new report was stored: run a pass soon
//
// One pass: take the store's delivery lock (DeliveryLock: one deliverer at a time, across
// processes and within this one; a busy lock means another deliverer is on it), keep the store
// within its own limits (ReportStore.enforceLimits: StoreLimits, the store's eviction order),
// then for each pending report in retryOrder and each destination not done with it: skip it if
// not due; stop at the client-side rate limit; before the report's first attempt in the pass, let
// the delegate's willSend edit its trail or drop it (ReportDraft.swift: a dropped report is done
// at every destination and moves to dropped/, never retried); count the attempt in
// delivery.json; send; ask the
// destination what the answer means (ReportDestination.verdict(on:to:)) and the retry policy
// what that means for the next attempt (RetryPolicy.swift, which has the table: 2xx delivered,
// 429 pauses the destination until Retry-After without counting the attempt, 408/5xx/no answer
// retried with backoff while attempts < retryLimit, other 4xx dropped). A partial success (OTLP)
// is delivered and handed to the delegate in DeliveryResult.partialSuccess; OTLPDestination
// retries exactly what the OTLP spec calls retryable (429, 502, 503, 504 and no answer).
//
// Then the outbox (DeliveryOutbox: the session summaries and the `crumbs.sessions` metrics of
// the client or `crumbs collect`), when there is one and a
// destination carries events (EventDestination, OTLP): each queued event goes through the same
// delegate hooks (shouldSend(event:), the consent; willSendRequest; serverDid…), rate limit, 429
// pauses and retry policy; it leaves the outbox once a destination accepted it or every one
// refused it for good. Events keep no history on disk: their backoff is per destination, in this
// process; events still queued when it gives up wait for the next launch
// (ReportUploader+Outbox.swift).
//
// When every destination is done, the report moves to sent/ (one delivered) or dropped/ (none).
// Backoff, schedules under a wrong clock, the rate limit and the store's limits:
// ReportUploader+Schedule.swift.
//
// A missing transport is not an attempt: a pass with something to send first asks the transport
// (HTTPTransport.missingTransport: no libcurl on the machine); while it is missing, nothing is
// attempted, counted or scheduled, the pass says why (`DeliveryPass.missingTransport`, also
// `ReportUploader.missingTransport` and the client's `problems`), and the next pass (within a
// minute) looks again, so reports are delivered once it is installed. DeliveryTransport needs
// libcurl only for some requests (https, proxies): it answers nil, and such a request that finds
// libcurl missing fails with `.unavailable`, which is handled the same way, request by request.
// At the end of every pass the transport is told (`endOfPass`: libcurl is unloaded), and a pass
// that sent something gives the memory its thread freed back (malloc_trim).
//
// Settings are the app's: any Double (infinity, NaN, 1e300) must do. Waits are clamped
// (`RetryPolicy.maxWait`, a NaN wait is none) and every time is `now` plus a wait that
// saturates at the end of time rather than overflowing.
//
// No schedule outlives a wrong clock: times read back from delivery.json (and 429 pauses kept
// in memory) are clamped to now plus the longest wait the policy can give (`maxRetryInterval`;
// a day after a 429), and a schedule made while the clock read later than now (beyond
// `RetryPolicy.clockTolerance`) keeps its wait but starts it now. Either change is written
// back, so a report attempted while the clock read +1 year is retried soon after the clock is
// right.
// Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Delivers a report store's pending reports to one or more destinations.
public final class ReportUploader: Sendable {
  public let store: ReportStore
  public let destinations: [any ReportDestination]
  public let settings: DeliverySettings
  /// Events sent beside the reports (the client's session summaries), when there are any.
  public let outbox: (any DeliveryOutbox)?
  let transport: any HTTPTransport
  /// Wall-clock nanoseconds since the epoch; injectable so tests can move time.
  let clock: @Sendable () -> UInt64
  /// Uniform in 0..<1, for jitter.
  let random: @Sendable () -> Double

  struct State {
    weak var delegate: (any ReportUploaderDelegate)?
    /// 429 pauses, by destination name (this process only; see docs/delivery.md).
    var pausedUntil: [String: UInt64] = [:]
    /// Send times within the last minute, for `reportsPerMinute`.
    var recentSends: [UInt64] = []
    /// When each pause was set (to notice a clock that went back since).
    var pausedAt: [String: UInt64] = [:]
    /// (report id, destination) pairs that failed in this process with retryBehaviour `.none`.
    var deferredToNextLaunch: Set<String> = []
    /// The background thread's run, while started.
    var run: Run?
    var wakeRequested = false
    /// What the last pass with reports to send found missing (nil: the transport was there).
    var missingTransport: String?
    /// Outbox events' consecutive failed attempts and next attempt time, by destination (this
    /// process only: events keep no history on disk).
    var eventBackoff: [String: (attempts: Int, next: UInt64)] = [:]
  }

  let state = Mutex(State())
  /// Serializes passes within this process (the flock serializes processes).
  private let passLock = Mutex(())

  /// How soon a pass looks for a missing transport again.
  static let missingTransportRecheck: UInt64 = 60_000_000_000
  /// A hold further ahead than this (DeliveryState.heldUntilUnixNano) is not honoured: the
  /// clock went back, or the file was tampered with.
  static let longestHold: UInt64 = 3_600_000_000_000
  /// An uploader for `store`. Nothing runs until `start()` or `deliverPendingNow()`.
  public init(
    store: ReportStore, destinations: [any ReportDestination],
    settings: DeliverySettings = DeliverySettings(),
    transport: any HTTPTransport = DeliveryTransport(), delegate: (any ReportUploaderDelegate)? = nil,
    outbox: (any DeliveryOutbox)? = nil,
    clock: @escaping @Sendable () -> UInt64 = ReportUploader.wallClock,
    random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
  ) {
    self.store = store
    self.destinations = destinations
    self.settings = settings
    self.transport = transport
    self.outbox = outbox
    self.clock = clock
    self.random = random
    state.withLock { $0.delegate = delegate }
  }

  /// Receives the hooks; held weakly.
  public var delegate: (any ReportUploaderDelegate)? {
    get { state.withLock { $0.delegate } }
    set { state.withLock { $0.delegate = newValue } }
  }

  /// CLOCK_REALTIME in nanoseconds.
  @Sendable public static func wallClock() -> UInt64 { SystemClock.wallNanoseconds() }

  /// Why the last pass that had reports to send could not send any (the transport is missing:
  /// see `DeliveryPass.missingTransport`); nil once it is there.
  public var missingTransport: String? { state.withLock { $0.missingTransport } }

  // MARK: - One pass

  /// Runs one delivery pass on the caller's thread and returns what it did. Never call it on
  /// the app's main thread: it waits for the network.
  @discardableResult
  public func deliverPendingNow() -> DeliveryPass { deliverPending(stopping: { false }) }

  /// One pass like `deliverPendingNow()` that starts no attempt once CLOCK_MONOTONIC reaches
  /// `deadline` (nanoseconds); an attempt started before it ends within the transport's timeout.
  @discardableResult
  public func deliverPendingNow(startingNothingAfter deadline: UInt64) -> DeliveryPass {
    deliverPending(stopping: { SystemClock.monotonicNanoseconds() >= deadline })
  }

  /// One pass that ends early (between attempts) once `stopping` says so.
  package func deliverPending(stopping: () -> Bool) -> DeliveryPass {
    passLock.withLock { _ in
      var pass = onePass(stopping: stopping)
      // What the transport loaded to send (libcurl) is let go until the next pass; a request
      // that found the transport missing names it in the pass, as the first check would have.
      transport.endOfPass()
      // A pass that sent something encoded and compressed it on this thread: its arena keeps
      // what was freed unless given back.
      if !pass.results.isEmpty || !pass.events.isEmpty { Syscall.returnFreeMemory() }
      if !pass.lockBusy, pass.missingTransport == nil {
        pass.missingTransport = state.withLock { $0.missingTransport }
      }
      return pass
    }
  }

  /// The pass itself, within passLock.
  private func onePass(stopping: () -> Bool) -> DeliveryPass {
    var pass = DeliveryPass()
    guard DeliveryLock.take(store: store.path) else {
      pass.lockBusy = true
      return pass
    }
    defer { DeliveryLock.release(store: store.path) }
    pass.evictions = enforceLimits()
    let listing = store.list(.pending)
    pass.quarantined = listing.quarantined
    let events = queuedEvents()
    // Asked only with something to send: a program that never uploads never loads libcurl.
    let missing = listing.reports.isEmpty && events.isEmpty ? nil : transport.missingTransport()
    state.withLock { $0.missingTransport = missing }
    if let missing {
      pass.missingTransport = missing
      pass.nextDueUnixNano = Self.adding(clock(), Self.missingTransportRecheck)
      return pass
    }
    let reports = settings.retryOrder == .queue ? listing.reports : listing.reports.reversed()
    for stored in reports {
      if stopping() { return pass }
      // The rate limit stopped the pass: the events wait too.
      if !deliver(stored, into: &pass, stopping: stopping) { return pass }
    }
    deliver(events, into: &pass, stopping: stopping)
    return pass
  }

  /// Delivers one report to every destination that is due; false when the rate limit stops the pass.
  private func deliver(_ stored: StoredReport, into pass: inout DeliveryPass, stopping: () -> Bool) -> Bool {
    let delegate = self.delegate
    if let delegate, !delegate.shouldSend(stored.report) { return true }
    var deliveryState = stored.deliveryState()
    // Held (a hang report waiting for its hang to end), unless the clock went back past the hold.
    if let held = deliveryState.heldUntilUnixNano, held > clock(), held - clock() <= Self.longestHold {
      pass.due(at: held)
      return true
    }
    var outgoing: CrashReport?
    // The stored report as destinations read it: with the trail `willSend` edited, if it did.
    var outgoingStored = stored
    var results: [DeliveryResult] = []
    for destination in destinations {
      if stopping() { break }
      var history = deliveryState.destinations[destination.name] ?? DeliveryState.Destination()
      guard history.outcome == nil else { continue }
      let now = clock()
      if rescheduleUnderClock(&history, now: now) {
        deliveryState.destinations[destination.name] = history
        save(deliveryState, of: stored)
      }
      let key = stored.report.id + "\u{0}" + destination.name
      let (paused, deferred) = state.withLock { state in
        if let until = state.pausedUntil[destination.name] {
          let (start, end) = RetryPolicy.rescheduled(
            next: until, last: state.pausedAt[destination.name], now: now, cap: RetryPolicy.maxRetryAfter)
          state.pausedUntil[destination.name] = end
          state.pausedAt[destination.name] = start
        }
        return (state.pausedUntil[destination.name] ?? 0, state.deferredToNextLaunch.contains(key))
      }
      if deferred { continue }
      let due = settings.honoursSchedule ? max(history.nextAttemptUnixNano, paused) : paused
      if due > now {
        pass.due(at: due)
        continue
      }
      // Attempts counted before a crash or kill in an earlier upload may already be at the limit.
      if history.attempts >= settings.retryLimit {
        let reason =
          "gave up after \(history.attempts) attempts" + (history.lastError.map { ": \($0)" } ?? "")
        history.outcome = .dropped
        let result = DeliveryResult(
          reportID: stored.report.id, destination: destination.name, outcome: .dropped(reason: reason),
          attempts: history.attempts)
        deliveryState.destinations[destination.name] = history
        save(deliveryState, of: stored)
        results.append(result)
        pass.results.append(result)
        delegate?.didFailSending(stored.report, result: result)
        continue
      }
      if let limited = limitReached(
        id: stored.report.id, destination: destination.name, attempts: history.attempts, now: now,
        delegate: delegate, pass: &pass)
      {
        pass.results.append(limited)
        finish(stored, deliveryState, results: results, outgoing: outgoing, into: &pass)
        return false
      }
      if outgoing == nil {
        guard let prepared = prepare(stored, delegate: delegate) else {
          droppedByApp(stored, &deliveryState, results: &results, into: &pass, delegate: delegate)
          break
        }
        (outgoing, outgoingStored) = prepared
      }

      let result = attempt(
        outgoingStored, report: outgoing!, destination: destination, history: &history, now: now,
        delegate: delegate)
      deliveryState.destinations[destination.name] = history
      save(deliveryState, of: stored)
      results.append(result)
      pass.results.append(result)
      switch result.outcome {
      case .willRetry(_, let next):
        pass.due(at: next)
        delegate?.didFailSending(stored.report, result: result)
      case .throttled(let until):
        pass.due(at: until)
      case .dropped:
        delegate?.didFailSending(stored.report, result: result)
      case .delivered, .limitReached: break
      }
    }
    finish(stored, deliveryState, results: results, outgoing: outgoing, into: &pass)
    return true
  }

  /// The report and the stored report as the destinations are given them, after `willSend`
  /// (ReportDraft); nil when the delegate dropped it.
  private func prepare(_ stored: StoredReport, delegate: (any ReportUploaderDelegate)?)
    -> (CrashReport, StoredReport)?
  {
    guard let delegate else { return (stored.report, stored) }
    let draft = ReportDraft(stored: stored)
    guard let edited = delegate.willSend(draft) else { return nil }
    return edited.outgoing(from: stored, original: draft.breadcrumbs)
  }

  /// `willSend` dropped the report: every destination not done with it is done (dropped, with
  /// ReportDraft.droppedReason), so `finish` moves it to dropped/ — never retried.
  private func droppedByApp(
    _ stored: StoredReport, _ deliveryState: inout DeliveryState, results: inout [DeliveryResult],
    into pass: inout DeliveryPass, delegate: (any ReportUploaderDelegate)?
  ) {
    for destination in destinations {
      var history = deliveryState.destinations[destination.name] ?? DeliveryState.Destination()
      guard history.outcome == nil else { continue }
      history.outcome = .dropped
      history.lastError = ReportDraft.droppedReason
      deliveryState.destinations[destination.name] = history
      let result = DeliveryResult(
        reportID: stored.report.id, destination: destination.name,
        outcome: .dropped(reason: ReportDraft.droppedReason), attempts: history.attempts)
      results.append(result)
      pass.results.append(result)
      delegate?.didFailSending(stored.report, result: result)
    }
    save(deliveryState, of: stored)
  }

  /// One counted attempt at one destination; updates `history`.
  private func attempt(
    _ stored: StoredReport, report: CrashReport, destination: any ReportDestination,
    history: inout DeliveryState.Destination, now: UInt64, delegate: (any ReportUploaderDelegate)?
  ) -> DeliveryResult {
    let id = stored.report.id
    var request: DeliveryRequest
    do {
      request = try destination.request(for: report, stored: stored)
    } catch {
      history.outcome = .dropped
      history.lastError = "\(error)"
      return DeliveryResult(
        reportID: id, destination: destination.name, outcome: .dropped(reason: "\(error)"),
        attempts: history.attempts)
    }
    if let delegate { request = delegate.willSendRequest(request) }
    let redactor = request.redactor

    // Count the attempt first (see DeliveryState.swift), with the retry time it gets if this
    // process dies before the answer.
    let before = history
    history.attempts += 1
    history.lastAttemptUnixNano = now
    history.nextAttemptUnixNano = Self.adding(now, backoff(afterAttempt: history.attempts))
    save(history, destination.name, of: stored)

    let response = transport.send(request)
    let after = clock()
    switch response {
    case .failure(.unavailable(let missing)):
      // No transport (it went missing since the pass asked): not an attempt. The report keeps
      // its history; this destination is looked at again at the next pass.
      history = before
      save(history, destination.name, of: stored)
      state.withLock { $0.missingTransport = missing }
      return DeliveryResult(
        reportID: id, destination: destination.name,
        outcome: .willRetry(
          reason: "\(TransportError.unavailable(missing))",
          nextAttemptUnixNano: Self.adding(after, Self.missingTransportRecheck)),
        attempts: history.attempts)
    case .failure(let error):
      let failure = DeliveryFailure(
        reportID: id, destination: destination.name, url: request.redactedURL, error: error)
      delegate?.serverDidFail(failure)
      return record(
        .failed(error), id: id, destination: destination.name, redactor: redactor, history: &history,
        now: after)
    case .success(let answer):
      history.lastStatus = answer.status
      let result = record(
        .answered(answer, verdict: destination.verdict(on: answer, to: request)), id: id,
        destination: destination.name, redactor: redactor, history: &history, now: after)
      delegate?.serverDidRespond(result)
      return result
    }
  }

  /// What the retry policy decides on `answer` does to the report's history at this destination.
  private func record(
    _ answer: RetryPolicy.Answer, id: String, destination: String, redactor: Redactor,
    history: inout DeliveryState.Destination, now: UInt64
  ) -> DeliveryResult {
    let status: Int?
    if case .answered(let response, _) = answer { status = response.status } else { status = nil }
    var result = DeliveryResult(
      reportID: id, destination: destination, outcome: .limitReached, attempts: history.attempts,
      status: status)
    let decision = settings.retryPolicy.decision(
      on: answer, attempts: history.attempts, now: now, random: random(), redactor: redactor)
    switch decision {
    case .delivered(let partial):
      history.outcome = .delivered
      history.lastError = partial.map { redactor.redact($0.description) }
      history.nextAttemptUnixNano = 0
      result.outcome = .delivered(status: status ?? 0)
      result.partialSuccess = partial.map {
        PartialSuccess(rejected: $0.rejected, message: redactor.redact($0.message))
      }
    case .throttled(let until):
      // A 429 is not an attempt: the destination is paused instead.
      history.attempts -= 1
      history.nextAttemptUnixNano = until
      history.lastError = status.map { "HTTP \($0)" }
      pause(destination, until: until, now: now)
      result.attempts = history.attempts
      result.outcome = .throttled(untilUnixNano: until)
    case .retry(let reason, var next):
      history.lastError = reason
      if settings.retryBehaviour == .none {
        state.withLock { _ = $0.deferredToNextLaunch.insert(id + "\u{0}" + destination) }
        next = 0
      }
      history.nextAttemptUnixNano = next
      result.outcome = .willRetry(reason: reason, nextAttemptUnixNano: next)
    case .drop(let reason):
      history.outcome = .dropped
      history.lastError = reason
      result.outcome = .dropped(reason: reason)
    case .giveUp(let last, _):
      history.outcome = .dropped
      history.lastError = last
      result.outcome = .dropped(reason: decision.reason ?? last)
    }
    return result
  }

  /// Pauses `destination` until `until` (a 429), unless a later pause holds already.
  func pause(_ destination: String, until: UInt64, now: UInt64) {
    state.withLock {
      if until >= $0.pausedUntil[destination] ?? 0 {
        $0.pausedUntil[destination] = until
        $0.pausedAt[destination] = now
      }
    }
  }

  /// Moves the report out of pending when every destination is done with it.
  private func finish(
    _ stored: StoredReport, _ deliveryState: DeliveryState, results: [DeliveryResult], outgoing: CrashReport?,
    into pass: inout DeliveryPass
  ) {
    let outcomes = destinations.map { deliveryState.destinations[$0.name]?.outcome }
    guard !destinations.isEmpty, outcomes.allSatisfy({ $0 != nil }) else { return }
    let id = stored.report.id
    if outcomes.contains(.delivered) {
      guard (try? store.move(id: id, from: .pending, to: .sent)) != nil else { return }
      pass.finished.append((id, .sent))
      delegate?.didSucceedSending(outgoing ?? stored.report, results: results)
    } else {
      let reasons = destinations.compactMap { destination in
        deliveryState.destinations[destination.name]?.lastError.map { "\(destination.name): \($0)" }
      }
      guard (try? store.drop(id: id, reason: reasons.joined(separator: "; "))) != nil else { return }
      pass.finished.append((id, .dropped))
    }
  }

  private func save(_ deliveryState: DeliveryState, of stored: StoredReport) {
    // A failed write costs at most a resend (at-least-once); delivery goes on.
    try? stored.writeDeliveryState(deliveryState)
  }

  private func save(_ history: DeliveryState.Destination, _ destination: String, of stored: StoredReport) {
    var current = stored.deliveryState()
    current.destinations[destination] = history
    save(current, of: stored)
  }
}
