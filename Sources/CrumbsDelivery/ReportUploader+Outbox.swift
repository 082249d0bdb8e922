// ReportUploader+Outbox.swift — events that leave the machine beside the crash reports (the
// client's session summaries), sent by the uploader and no one else, so that they meet the same
// hooks, consent, rate limit, 429 pauses and retry policy as reports do.
//
// Entry points, in call order (each pass, after its reports, under the store's delivery lock):
//   DeliveryOutbox.queuedEvents()      the owner's queue, oldest first
//   delegate.shouldSend(event:)        consent: false leaves the event queued
//   EventDestination.request(for:id:)  one request per destination that carries events (OTLP)
//   delegate.willSendRequest → send → serverDidRespond | serverDidFail
//   RetryPolicy.decision               delivered | paused (429) | retry later | dropped
//   DeliveryOutbox.remove(_:)          once a destination accepted it, or every one refused it
//
// An event is a batch of log records (`/v1/logs`), or, with `metrics`, a batch of metrics
// (`/v1/metrics`: the session counts, OTLPMetrics.swift), or, with `traces`, a batch of spans
// (`/v1/traces`: the operations a death left open, closed at it, OTLPTraces.swift); a
// destination that has no URL for one refuses it (EventDestination.request(forMetrics:id:) or
// request(forTraces:id:) nil). Spans keep their own backoff per destination, apart from the
// other events': a collector that takes no traces (404, or down for them) delays no summary.
//
// Events keep no history on disk (a summary is a few hundred bytes, the queue is bounded by its
// owner): a failure backs off per destination, in this process; once the retry limit is reached
// (or with retryBehaviour `.none`) the events still queued wait for the next launch. Not
// signal-safe.

import CrumbsReports

/// An event waiting to be sent: one batch of OTLP log records, or of metrics.
public struct OutboxEvent: Sendable, Equatable {
  /// What the event is about (a session summary's session id): the request's id in results and
  /// hooks.
  public var id: String
  /// The outbox's own handle on it (a file name), unique in the outbox.
  public var key: String
  public var batch: OTLPLogBatch
  /// Set for metrics (sent to `/v1/metrics` instead of `batch`).
  public var metrics: OTLPMetricBatch?
  /// Set for spans (sent to `/v1/traces` instead of `batch`).
  public var traces: OTLPTraceBatch?

  public init(id: String, key: String, batch: OTLPLogBatch) {
    self.id = id
    self.key = key
    self.batch = batch
  }

  /// An event carrying metrics.
  public init(id: String, key: String, metrics: OTLPMetricBatch) {
    self.init(
      id: id, key: key, batch: OTLPLogBatch(resource: [], scopeName: "", scopeVersion: "", records: []))
    self.metrics = metrics
  }

  /// An event carrying spans.
  public init(id: String, key: String, traces: OTLPTraceBatch) {
    self.init(
      id: id, key: key, batch: OTLPLogBatch(resource: [], scopeName: "", scopeVersion: "", records: []))
    self.traces = traces
  }
}

/// Where the uploader finds events to send beside the reports.
///
/// Requirements: both methods are called on the uploader's thread, one pass at a time, while the
/// uploader holds the store's delivery lock; they must not call back into the uploader.
public protocol DeliveryOutbox: Sendable {
  /// The queued events, oldest first.
  func queuedEvents() -> [OutboxEvent]
  /// The uploader is done with `event`: a destination accepted it, or every one refused it.
  func remove(_ event: OutboxEvent)
}

/// A destination that carries outbox events as well as reports (OTLP: log records).
public protocol EventDestination: ReportDestination {
  /// The request carrying `batch`; `id` names it in results and hooks.
  func request(for batch: OTLPLogBatch, id: String) -> DeliveryRequest
  /// The request carrying `metrics`; nil when the destination has nowhere to send them.
  func request(forMetrics metrics: OTLPMetricBatch, id: String) -> DeliveryRequest?
  /// The request carrying `traces`; nil when the destination has nowhere to send them.
  func request(forTraces traces: OTLPTraceBatch, id: String) -> DeliveryRequest?
}

extension EventDestination {
  /// A destination that says nothing of spans takes none.
  public func request(forTraces traces: OTLPTraceBatch, id: String) -> DeliveryRequest? { nil }
}

extension OTLPDestination: EventDestination {}

extension ReportUploader {
  /// The outbox's events, when a destination carries them.
  func queuedEvents() -> [OutboxEvent] {
    guard let outbox, destinations.contains(where: { $0 is any EventDestination }) else { return [] }
    return outbox.queuedEvents()
  }

  /// Sends `events` (see the file comment).
  func deliver(_ events: [OutboxEvent], into pass: inout DeliveryPass, stopping: () -> Bool) {
    guard let outbox else { return }
    let targets = destinations.compactMap { $0 as? any EventDestination }
    let delegate = self.delegate
    for event in events {
      if stopping() { return }
      if let delegate, !delegate.shouldSend(event: event) { continue }
      var accepted = false
      var refusals = 0
      for destination in targets {
        guard let request = Self.request(for: event, to: destination) else {
          refusals += 1
          continue
        }
        let now = clock()
        let schedule = Self.scheduleKey(event, destination: destination.name)
        let (due, attempts) = eventSchedule(schedule, destination: destination.name, now: now)
        if due > now {
          if due != .max { pass.due(at: due) }
          continue
        }
        if let limited = limitReached(
          id: event.id, destination: destination.name, attempts: attempts, now: now, delegate: delegate,
          pass: &pass)
        {
          pass.events.append(limited)
          return
        }
        guard
          let (result, refused) = send(
            event, request, to: destination, schedule: schedule, attempts: attempts + 1, delegate: delegate)
        else { return }
        pass.events.append(result)
        if refused { refusals += 1 }
        switch result.outcome {
        case .delivered: accepted = true
        case .willRetry(_, let next), .throttled(let next):
          pass.due(at: next)
        case .dropped, .limitReached: break
        }
      }
      if accepted || (!targets.isEmpty && refusals == targets.count) { outbox.remove(event) }
    }
  }

  /// The request carrying `event` to `destination` (nil: it has nowhere to take metrics).
  static func request(for event: OutboxEvent, to destination: any EventDestination) -> DeliveryRequest? {
    if let traces = event.traces { return destination.request(forTraces: traces, id: event.id) }
    guard let metrics = event.metrics else { return destination.request(for: event.batch, id: event.id) }
    return destination.request(forMetrics: metrics, id: event.id)
  }

  /// The backoff `event` counts under at `destination`: spans apart from the other events.
  static func scheduleKey(_ event: OutboxEvent, destination: String) -> String {
    event.traces == nil ? destination : destination + " /v1/traces"
  }

  /// When events of `schedule` may go to `destination` next (.max: not in this process) and the
  /// failed attempts so far, under the 429 pause the reports share.
  private func eventSchedule(_ schedule: String, destination: String, now: UInt64) -> (
    due: UInt64, attempts: Int
  ) {
    state.withLock { state in
      let backoff = state.eventBackoff[schedule] ?? (0, 0)
      return (max(backoff.next, state.pausedUntil[destination] ?? 0), backoff.attempts)
    }
  }

  /// One attempt at sending `event` to `destination`, its failures counted towards the retry
  /// policy's limit, and whether the destination refused it for good; nil when the transport went
  /// missing (nothing more is sent in this pass).
  private func send(
    _ event: OutboxEvent, _ request: DeliveryRequest, to destination: any EventDestination, schedule: String,
    attempts: Int, delegate: (any ReportUploaderDelegate)?
  ) -> (DeliveryResult, refused: Bool)? {
    var request = request
    if let delegate { request = delegate.willSendRequest(request) }
    let answer: RetryPolicy.Answer
    switch transport.send(request) {
    case .failure(.unavailable(let missing)):
      state.withLock { $0.missingTransport = missing }
      return nil
    case .failure(let error):
      delegate?.serverDidFail(
        DeliveryFailure(
          reportID: event.id, destination: destination.name, url: request.redactedURL, error: error))
      answer = .failed(error)
    case .success(let response):
      answer = .answered(response, verdict: destination.verdict(on: response, to: request))
    }
    let now = clock()
    let decision = settings.retryPolicy.decision(
      on: answer, attempts: attempts, now: now, random: random(), redactor: request.redactor)
    var status: Int?
    if case .answered(let response, _) = answer { status = response.status }
    var result = DeliveryResult(
      reportID: event.id, destination: destination.name, outcome: .limitReached, attempts: attempts,
      status: status)
    let reason = decision.reason ?? ""
    switch decision {
    case .delivered:
      state.withLock { $0.eventBackoff[schedule] = nil }
      result.outcome = .delivered(status: status ?? 0)
    case .throttled(let until):
      pause(destination.name, until: until, now: now)
      result.attempts = attempts - 1
      result.outcome = .throttled(untilUnixNano: until)
    case .retry(_, let next):
      let after = settings.retryBehaviour == .none ? UInt64.max : next
      state.withLock { $0.eventBackoff[schedule] = (attempts, after) }
      result.outcome = .willRetry(reason: reason, nextAttemptUnixNano: after == .max ? 0 : after)
    case .giveUp:
      // The event stays queued for the next launch; nothing more goes there in this process.
      state.withLock { $0.eventBackoff[schedule] = (attempts, .max) }
      result.outcome = .dropped(reason: reason)
    case .drop:
      result.outcome = .dropped(reason: reason)
    }
    if status != nil { delegate?.serverDidRespond(result) }
    if case .drop = decision { return (result, true) }
    return (result, false)
  }
}
