// ReportUploader.swift — delivery of stored reports: at least once, never on the app's thread,
// within the database limits, remembering attempts across restarts.
//
// Entry points, in call order:
//   ReportUploader(store:destinations:settings:)   nothing happens yet (no thread, no I/O)
//   start()                 a background thread runs passes: now, after wake(), when the next
//                           report is due; stop(timeout:) ends it (waits, at most the timeout,
//                           for the request in flight; the thread may finish it later)
//   deliverPendingNow()     one pass on the caller's thread (CLI, tests, CrumbsClient.flush);
//                           the same code
//   wake()                  a new report was stored: run a pass soon
//
// One pass: take the store's delivery lock (DeliveryLock: one deliverer at a time, across
// processes and within this one; a busy lock means another deliverer is on it), enforce maxRecordCount and
// maxDatabaseSize (ReportStore.enforceLimits: the store's own eviction order), then for each pending report in retryOrder and each
// destination not done with it: skip it if not due; stop at the client-side rate limit; count
// the attempt in delivery.json; send; ask the destination what the answer means
// (ReportDestination.verdict(on:to:); the general policy below unless it says otherwise):
//
//   2xx                        delivered, if the whole request had been sent; a 2xx that came
//                              before is retried ("answered before the report was sent"). A
//                              partial success (OTLP) is delivered, never retried, and handed
//                              to the delegate in DeliveryResult.partialSuccess
//   429                        destination paused until Retry-After (seconds or HTTP date);
//                              the attempt is not counted
//   408, 3xx, 5xx, other,
//   timeouts, refused,
//   connection lost            retried after retryInterval·2^(n-1) (capped, with jitter) while
//                              attempts < retryLimit, then dropped; never sooner than the
//                              answer's Retry-After (a 503's)
//   413, other 4xx,
//   unencodable                dropped ("HTTP 413 …" in dropped.reason)
//   OTLP (OTLPDestination)     retries exactly what the OTLP spec calls retryable: 429, 502,
//                              503, 504 and no answer; every other 4xx and 5xx is dropped
//
// When every destination is done, the report moves to sent/ (one delivered) or dropped/ (none).
//
// A missing transport is not an attempt: a pass with reports to send first asks the transport
// (HTTPTransport.missingTransport: no libcurl on the machine); while it is missing, nothing is
// attempted, counted or scheduled, the pass says why (`DeliveryPass.missingTransport`, also
// `ReportUploader.missingTransport` and the client's `problems`), and the next pass (within a
// minute) looks again, so reports are delivered once it is installed.
//
// Settings are the app's: any Double (infinity, NaN, 1e300) must do. Waits are clamped
// (`maxWait`, a NaN wait is none) and every time is `now` plus a wait that saturates at the
// end of time rather than overflowing.
//
// No schedule outlives a wrong clock: times read back from delivery.json (and 429 pauses kept
// in memory) are clamped to now plus the longest wait the policy can give (`maxRetryInterval`;
// a day after a 429), and a schedule made while the clock read later than now (beyond
// `clockTolerance`) keeps its wait but starts it now. Either change is written back, so a
// report attempted while the clock read +1 year is retried soon after the clock is right.
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

/// How delivery retries and how large the database may grow.
public struct DeliverySettings: Sendable, Equatable {
  /// Whether failed deliveries are retried while the process runs.
  public enum RetryBehaviour: String, Sendable {
    /// Retried after `retryInterval`, doubling each time (with jitter), up to `maxRetryInterval`.
    case interval
    /// Not retried in this process: the report stays pending and is tried again by the next
    /// uploader (the next launch). Attempts still count towards `retryLimit`.
    case none
  }

  /// Which pending reports go first.
  public enum RetryOrder: String, Sendable {
    /// Oldest first (FIFO).
    case queue
    /// Newest first (LIFO): after an outage the latest crash arrives first.
    case stack
  }

  /// Attempts per destination before a report is dropped ("gave up after N attempts").
  public var retryLimit: Int = 3
  /// Seconds before the first retry; doubled after each further failure.
  public var retryInterval: Double = 60
  /// The longest wait between two attempts, in seconds.
  public var maxRetryInterval: Double = 3600
  public var retryBehaviour: RetryBehaviour = .interval
  public var retryOrder: RetryOrder = .queue
  /// The fraction of each wait that is random (0 = none, 0.5 = between half and all of it), so
  /// that many devices recovering from one outage do not retry in step.
  public var jitter: Double = 0.5
  /// Most reports kept in each state (pending, sent, dropped); pending ones beyond it are
  /// evicted to dropped/, sent and dropped ones deleted (0: no limit). See StoreLimits.
  public var maxRecordCount: Int = StoreLimits().maxRecordCount
  /// Most megabytes the store may use (pending, sent and dropped; 0: no limit). See StoreLimits.
  public var maxDatabaseSize: Int = StoreLimits().maxDatabaseSize
  /// Client-side rate limit on requests (0: none).
  public var reportsPerMinute: Int = 0
  /// The pause after a 429 that carries no usable Retry-After, in seconds.
  public var defaultRetryAfter: Double = 60
  /// Whether a report waits for its next attempt time. An explicit "send now" (the CLI) sets
  /// false: every pending report is tried at once; 429 pauses and limits still hold.
  public var honoursSchedule = true

  public init() {}

  /// The store limits these settings name.
  public var storeLimits: StoreLimits {
    StoreLimits(maxRecordCount: maxRecordCount, maxDatabaseSize: maxDatabaseSize)
  }
}

/// What happened to one report at one destination in a pass.
public struct DeliveryResult: Sendable, Equatable, CustomStringConvertible {
  public enum Outcome: Sendable, Equatable {
    /// Accepted (2xx).
    case delivered(status: Int)
    /// Failed; tried again at `nextAttemptUnixNano` (0 with `.none`: at the next launch).
    case willRetry(reason: String, nextAttemptUnixNano: UInt64)
    /// 429: this destination is paused until then; the attempt was not counted.
    case throttled(untilUnixNano: UInt64)
    /// Refused for good or given up; the reason is stored in dropped.reason.
    case dropped(reason: String)
    /// The client-side rate limit (`reportsPerMinute`) was reached: nothing was sent.
    case limitReached
  }

  public var reportID: String
  public var destination: String
  public var outcome: Outcome
  /// Counted attempts so far at this destination.
  public var attempts: Int
  /// The HTTP status, when the server answered.
  public var status: Int?
  /// What the server said it rejected from a request it accepted (OTLP partial success).
  public var partialSuccess: PartialSuccess? = nil

  public var description: String {
    let what: String
    switch outcome {
    case .delivered(let status):
      what = "delivered (\(status))" + (partialSuccess.map { ", \($0)" } ?? "")
    case .willRetry(let reason, _): what = "will retry: \(reason)"
    case .throttled: what = "throttled (429)"
    case .dropped(let reason): what = "dropped: \(reason)"
    case .limitReached: what = "rate limit reached"
    }
    return "\(reportID) → \(destination): \(what) after \(attempts) attempt(s)"
  }
}

/// A request that got no HTTP answer.
public struct DeliveryFailure: Error, Sendable, Equatable, CustomStringConvertible {
  public var reportID: String
  public var destination: String
  /// The URL with secrets redacted.
  public var url: String
  public var error: TransportError
  public var description: String { "\(destination) \(url): \(error)" }
}

/// What one pass did.
public struct DeliveryPass: Sendable {
  /// One per attempt (and one `.limitReached` when the rate limit stopped the pass).
  public var results: [DeliveryResult] = []
  public var evictions: [Eviction] = []
  /// Reports that moved to sent/ or dropped/ in this pass.
  public var finished: [(id: String, state: ReportState)] = []
  /// Reports quarantined because their report.json was unreadable.
  public var quarantined: [String] = []
  /// When the earliest waiting report is due (nil: nothing waits in this process).
  public var nextDueUnixNano: UInt64?
  /// Another process held the delivery lock: this pass did nothing.
  public var lockBusy = false
  /// The transport cannot send at all (libcurl is not installed), in one line that says what to
  /// install: this pass attempted nothing, and every report stays pending, uncounted.
  public var missingTransport: String?
}

/// Hooks into delivery, for the client object (and for tests).
///
/// Requirements:
/// - Every method is called on the uploader's thread (the background thread, or the caller of
///   `deliverPendingNow()`), one at a time, never concurrently with another of them.
/// - They must return quickly and must not call back into the uploader's `deliverPendingNow()`
///   or `stop()` (that would deadlock); `wake()` is fine.
/// - Values handed to them are already redacted where they are text (errors, reasons, URLs in
///   failures); `willSendRequest` sees the real request (it may need the credentials, e.g. to
///   sign it) and must not log it.
/// - All have default implementations that do nothing (and return their input / `true`).
public protocol ReportUploaderDelegate: AnyObject, Sendable {
  /// Whether `report` may be sent now. `false` leaves it pending, untouched (consent).
  func shouldSend(_ report: CrashReport) -> Bool
  /// The report as it will be encoded (e.g. with attributes added). Not written back to the store.
  func willSend(_ report: CrashReport) -> CrashReport
  /// The request as it will go out (e.g. with a signature header).
  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest
  /// A server answered (any status).
  func serverDidRespond(_ result: DeliveryResult)
  /// A request got no answer (timeout, refused, connection lost).
  func serverDidFail(_ failure: DeliveryFailure)
  /// `reportsPerMinute` was reached; the pass stopped and will resume when the window allows.
  func didReachLimit(_ result: DeliveryResult)
  /// The report was delivered and moved to sent/.
  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult])
  /// An attempt failed (`result.outcome` says whether it will be retried or was dropped).
  func didFailSending(_ report: CrashReport, result: DeliveryResult)
}

extension ReportUploaderDelegate {
  public func shouldSend(_ report: CrashReport) -> Bool { true }
  public func willSend(_ report: CrashReport) -> CrashReport { report }
  public func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest { request }
  public func serverDidRespond(_ result: DeliveryResult) {}
  public func serverDidFail(_ failure: DeliveryFailure) {}
  public func didReachLimit(_ result: DeliveryResult) {}
  public func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) {}
  public func didFailSending(_ report: CrashReport, result: DeliveryResult) {}
}

/// Delivers a report store's pending reports to one or more destinations.
public final class ReportUploader: Sendable {
  public let store: ReportStore
  public let destinations: [any ReportDestination]
  public let settings: DeliverySettings
  package let transport: any HTTPTransport
  /// Wall-clock nanoseconds since the epoch; injectable so tests can move time.
  let clock: @Sendable () -> UInt64
  /// Uniform in 0..<1, for jitter.
  let random: @Sendable () -> Double

  private struct State {
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
  }

  /// One run of the background thread, with its own stop flag and end signal: a thread that a
  /// `stop(timeout:)` gave up waiting for ends on its own later, and never takes the signals of
  /// a run started after it.
  private final class Run: Sendable {
    private let stopRequested = Mutex(false)
    let finished = DispatchSemaphore(value: 0)
    /// Signalled by wake() and stop(): ends the thread's wait between passes early.
    let wakeUp = DispatchSemaphore(value: 0)
    var isStopping: Bool { stopRequested.withLock { $0 } }
    func requestStop() { stopRequested.withLock { $0 = true } }
  }

  private let state = Mutex(State())
  /// Serializes passes within this process (the flock serializes processes).
  private let passLock = Mutex(())

  /// The longest pause a 429 can ask for (its Retry-After, or the default, is capped here).
  public static let maxRetryAfter: Double = 86_400
  /// The longest wait any setting can make (about 31 years); longer ones, infinity included, are
  /// this: nanoseconds from now stay far from overflowing.
  public static let maxWait: Double = 1e9
  /// How soon a pass looks for a missing transport again.
  static let missingTransportRecheck: UInt64 = 60_000_000_000
  /// How far in the future a recorded attempt may lie before the clock that recorded it is taken
  /// to have been wrong (a clock stepped back by NTP by less than this changes nothing).
  public static let clockTolerance: Double = 300

  /// An uploader for `store`. Nothing runs until `start()` or `deliverPendingNow()`.
  public init(
    store: ReportStore, destinations: [any ReportDestination],
    settings: DeliverySettings = DeliverySettings(),
    transport: any HTTPTransport = CurlTransport(), delegate: (any ReportUploaderDelegate)? = nil,
    clock: @escaping @Sendable () -> UInt64 = ReportUploader.wallClock,
    random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
  ) {
    self.store = store
    self.destinations = destinations
    self.settings = settings
    self.transport = transport
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

  // MARK: - Background thread

  /// Starts the background thread (once; later calls do nothing). Returns at once.
  public func start() {
    let run = Run()
    let alreadyRunning = state.withLock { state in
      defer { if state.run == nil { state.run = run } }
      return state.run != nil
    }
    guard !alreadyRunning else { return }
    do {
      try BackgroundThread.start(name: "crumbs.delivery") { [self] in runLoop(run) }
    } catch {
      state.withLock { $0.run = nil }  // stop() then has nothing to wait for
    }
  }

  /// Asks the background thread for a pass soon (e.g. after a new report was stored).
  public func wake() {
    let run = state.withLock { state in
      state.wakeRequested = true
      return state.run
    }
    run?.wakeUp.signal()
  }

  /// Stops the background thread: it sends nothing new, and this waits for the request in
  /// flight at most `timeout` seconds (default: until it ends, which the transport's timeout
  /// bounds). Past that it returns false and the thread ends by itself once the request does;
  /// the report stays pending until the answer is recorded (at least once, never lost). Reports
  /// keep their state; a later uploader (or `start()`) continues.
  @discardableResult
  public func stop(timeout: Double = .infinity) -> Bool {
    guard let run = state.withLock({ $0.run }) else { return true }
    run.requestStop()
    run.wakeUp.signal()
    let ended: Bool
    if !(timeout >= .infinity) {  // NaN included: no wait rather than forever
      let nanoseconds = timeout > 0 ? Int(min(timeout, 1e6) * 1e9) : 0
      ended = run.finished.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success
    } else {
      run.finished.wait()
      ended = true
    }
    state.withLock { if $0.run === run { $0.run = nil } }
    return ended
  }

  private func runLoop(_ run: Run) {
    while !run.isStopping {
      let pass = deliverPending(stopping: { run.isStopping })
      // Sleep until the next report is due (at most a minute: new reports may arrive from
      // another process), or until woken or stopped.
      var wait: Double = 60
      if let due = pass.nextDueUnixNano {
        let now = clock()
        wait = due > now ? min(60, Double(due - now) / 1e9) : 0
      }
      if pass.lockBusy { wait = max(wait, 1) }
      // A wake-up left over from a request this pass already served ends one wait early; the
      // loop then waits again.
      let deadline = DispatchTime.now() + .nanoseconds(Int(wait * 1e9))
      while !run.isStopping && !state.withLock({ $0.wakeRequested }) {
        if run.wakeUp.wait(timeout: deadline) == .timedOut { break }
      }
      state.withLock { $0.wakeRequested = false }
    }
    run.finished.signal()
  }

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
  private func deliverPending(stopping: () -> Bool) -> DeliveryPass {
    passLock.withLock { _ in
      var pass = DeliveryPass()
      guard DeliveryLock.take(store: store.path) else {
        pass.lockBusy = true
        return pass
      }
      defer { DeliveryLock.release(store: store.path) }
      pass.evictions = enforceLimits()
      let listing = store.list(.pending)
      pass.quarantined = listing.quarantined
      // Asked only with something to send: a program that never uploads never loads libcurl.
      let missing = listing.reports.isEmpty ? nil : transport.missingTransport()
      state.withLock { $0.missingTransport = missing }
      if let missing {
        pass.missingTransport = missing
        pass.nextDueUnixNano = Self.adding(clock(), Self.missingTransportRecheck)
        return pass
      }
      let reports = settings.retryOrder == .queue ? listing.reports : listing.reports.reversed()
      for stored in reports {
        if stopping() || !deliver(stored, into: &pass, stopping: stopping) { break }
      }
      return pass
    }
  }

  /// Delivers one report to every destination that is due; false when the rate limit stops the pass.
  private func deliver(_ stored: StoredReport, into pass: inout DeliveryPass, stopping: () -> Bool) -> Bool {
    let delegate = self.delegate
    if let delegate, !delegate.shouldSend(stored.report) { return true }
    var deliveryState = stored.deliveryState()
    var outgoing: CrashReport?
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
          let (start, end) = Self.rescheduled(
            next: until, last: state.pausedAt[destination.name], now: now, cap: Self.maxRetryAfter)
          state.pausedUntil[destination.name] = end
          state.pausedAt[destination.name] = start
        }
        return (state.pausedUntil[destination.name] ?? 0, state.deferredToNextLaunch.contains(key))
      }
      if deferred { continue }
      let due = settings.honoursSchedule ? max(history.nextAttemptUnixNano, paused) : paused
      if due > now {
        pass.nextDueUnixNano = min(pass.nextDueUnixNano ?? .max, due)
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
      if !admitUnderRateLimit(now) {
        let result = DeliveryResult(
          reportID: stored.report.id, destination: destination.name, outcome: .limitReached,
          attempts: history.attempts)
        pass.results.append(result)
        delegate?.didReachLimit(result)
        if let oldest = state.withLock({ $0.recentSends.first }) {
          pass.nextDueUnixNano = min(pass.nextDueUnixNano ?? .max, Self.adding(oldest, 60_000_000_000))
        }
        finish(stored, deliveryState, results: results, outgoing: outgoing, into: &pass)
        return false
      }
      if outgoing == nil { outgoing = delegate?.willSend(stored.report) ?? stored.report }

      let result = attempt(
        stored, report: outgoing!, destination: destination, history: &history, now: now, delegate: delegate)
      deliveryState.destinations[destination.name] = history
      save(deliveryState, of: stored)
      results.append(result)
      pass.results.append(result)
      switch result.outcome {
      case .willRetry(_, let next):
        if next != 0 { pass.nextDueUnixNano = min(pass.nextDueUnixNano ?? .max, next) }
        delegate?.didFailSending(stored.report, result: result)
      case .throttled(let until):
        pass.nextDueUnixNano = min(pass.nextDueUnixNano ?? .max, until)
      case .dropped:
        delegate?.didFailSending(stored.report, result: result)
      case .delivered, .limitReached: break
      }
    }
    finish(stored, deliveryState, results: results, outgoing: outgoing, into: &pass)
    return true
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
      return retryOrDrop(id, destination.name, reason: "\(error)", status: nil, history: &history, now: after)
    case .success(let answer):
      history.lastStatus = answer.status
      var result: DeliveryResult
      switch answer.status {
      case 200..<300 where !answer.requestSent:
        // The server answered before it had the report: nothing says the report arrived.
        result = retryOrDrop(
          id, destination.name, reason: "HTTP \(answer.status) answered before the report was sent",
          status: answer.status, history: &history, now: after)
      default:
        result = outcome(
          of: answer, verdict: destination.verdict(on: answer, to: request), id: id,
          destination: destination.name, redactor: redactor, history: &history, now: after)
      }
      delegate?.serverDidRespond(result)
      return result
    }
  }

  /// What `verdict` on `answer` does to the report's history at this destination.
  private func outcome(
    of answer: HTTPResponse, verdict: AnswerVerdict, id: String, destination: String, redactor: Redactor,
    history: inout DeliveryState.Destination, now: UInt64
  ) -> DeliveryResult {
    let status = answer.status
    switch verdict {
    case .delivered(let partial):
      history.outcome = .delivered
      history.lastError = partial.map { redactor.redact($0.description) }
      history.nextAttemptUnixNano = 0
      var result = DeliveryResult(
        reportID: id, destination: destination, outcome: .delivered(status: status),
        attempts: history.attempts, status: status)
      result.partialSuccess = partial.map {
        PartialSuccess(rejected: $0.rejected, message: redactor.redact($0.message))
      }
      return result
    case .throttled:
      history.attempts -= 1
      let until = Self.pausedUntil(answer, now: now, default: settings.defaultRetryAfter)
      history.nextAttemptUnixNano = until
      history.lastError = "HTTP \(status)"
      state.withLock {
        if until >= $0.pausedUntil[destination] ?? 0 {
          $0.pausedUntil[destination] = until
          $0.pausedAt[destination] = now
        }
      }
      return DeliveryResult(
        reportID: id, destination: destination, outcome: .throttled(untilUnixNano: until),
        attempts: history.attempts, status: status)
    case .retry:
      var result = retryOrDrop(
        id, destination, reason: "HTTP \(status)", status: status, history: &history, now: now)
      // A server that says when to come back (503 with Retry-After) is not asked sooner.
      if case .willRetry(let reason, let next) = result.outcome, next != 0,
        answer.headers["retry-after"] != nil
      {
        let asked = Self.pausedUntil(answer, now: now, default: 0)
        if asked > next {
          history.nextAttemptUnixNano = asked
          result.outcome = .willRetry(reason: reason, nextAttemptUnixNano: asked)
        }
      }
      return result
    case .dropped(let given):
      let reason = redactor.redact("HTTP \(status)" + (given.map { ": " + $0 } ?? Self.excerpt(answer.body)))
      history.outcome = .dropped
      history.lastError = reason
      return DeliveryResult(
        reportID: id, destination: destination, outcome: .dropped(reason: reason),
        attempts: history.attempts, status: status)
    }
  }

  private func retryOrDrop(
    _ id: String, _ destination: String, reason: String, status: Int?,
    history: inout DeliveryState.Destination, now: UInt64
  ) -> DeliveryResult {
    history.lastError = reason
    if history.attempts >= settings.retryLimit {
      history.outcome = .dropped
      let final = "gave up after \(history.attempts) attempts: \(reason)"
      return DeliveryResult(
        reportID: id, destination: destination, outcome: .dropped(reason: final), attempts: history.attempts,
        status: status)
    }
    var next = Self.adding(now, backoff(afterAttempt: history.attempts))
    if settings.retryBehaviour == .none {
      state.withLock { _ = $0.deferredToNextLaunch.insert(id + "\u{0}" + destination) }
      next = 0
    }
    history.nextAttemptUnixNano = next
    return DeliveryResult(
      reportID: id, destination: destination, outcome: .willRetry(reason: reason, nextAttemptUnixNano: next),
      attempts: history.attempts, status: status)
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

  /// Nanoseconds to wait after the `attempt`-th failure: retryInterval·2^(attempt-1), capped,
  /// minus up to `jitter` of it at random. `attempt` comes from delivery.json (a report
  /// folder: untrusted), so any Int must do; the settings are the app's, so any Double must:
  /// the wait is at most `maxWait`, and none when it is not a positive number.
  func backoff(afterAttempt attempt: Int) -> UInt64 {
    let exponent = Double(min(max(attempt, 1) - 1, 30))
    let full = min(settings.retryInterval * pow(2, exponent), settings.maxRetryInterval)
    let jitter = settings.jitter > 0 ? min(settings.jitter, 1) : 0  // NaN: none
    let jittered = full * (1 - jitter * random())
    guard jittered > 0 else { return 0 }  // NaN included
    return UInt64(min(jittered, Self.maxWait) * 1e9)
  }

  /// `base + nanoseconds`, pinned at the end of time rather than overflowing.
  static func adding(_ base: UInt64, _ nanoseconds: UInt64) -> UInt64 {
    let (sum, overflow) = base.addingReportingOverflow(nanoseconds)
    return overflow ? .max : sum
  }

  /// Brings a destination's schedule read from delivery.json within what the policy allows
  /// under the clock as it reads now (see the file comment); true when it changed.
  func rescheduleUnderClock(_ history: inout DeliveryState.Destination, now: UInt64) -> Bool {
    guard history.nextAttemptUnixNano != 0 || history.lastAttemptUnixNano != nil else { return false }
    // After a 429 the wait is the server's (up to a day); otherwise the backoff's (a 503's
    // Retry-After read back from here is held to it too).
    let cap = max(settings.maxRetryInterval, history.lastStatus == 429 ? Self.maxRetryAfter : 0)
    let (last, next) = Self.rescheduled(
      next: history.nextAttemptUnixNano, last: history.lastAttemptUnixNano, now: now, cap: cap)
    guard last != history.lastAttemptUnixNano || next != history.nextAttemptUnixNano else { return false }
    history.lastAttemptUnixNano = last
    history.nextAttemptUnixNano = next
    return true
  }

  /// A schedule — `next`, set at `last` — under the clock `now`: when `last` lies more than
  /// `clockTolerance` ahead, the clock that set it was wrong, so its wait starts now; and `next`
  /// is at most `cap` seconds from now. Returns the (possibly moved) `last` and `next`.
  static func rescheduled(next: UInt64, last: UInt64?, now: UInt64, cap: Double) -> (UInt64?, UInt64) {
    // A cap that is not a positive number (settings are the app's) allows no wait at all.
    let capNanoseconds = cap > 0 ? UInt64(min(cap, maxWait) * 1e9) : 0
    var last = last
    var next = next
    if let recorded = last, recorded > adding(now, UInt64(clockTolerance * 1e9)) {
      next = adding(now, min(next > recorded ? next - recorded : 0, capNanoseconds))
      last = now
    }
    return (last, min(next, adding(now, capNanoseconds)))
  }

  private func admitUnderRateLimit(_ now: UInt64) -> Bool {
    guard settings.reportsPerMinute > 0 else { return true }
    return state.withLock { state in
      // Sends recorded while the clock read later than now count as sent now.
      state.recentSends = state.recentSends.map { min($0, now) }
      state.recentSends.removeAll { Self.adding($0, 60_000_000_000) <= now }
      guard state.recentSends.count < settings.reportsPerMinute else { return false }
      state.recentSends.append(now)
      return true
    }
  }

  // MARK: - Limits

  /// Keeps the store within this uploader's `maxRecordCount` and `maxDatabaseSize` (the store's
  /// own rules: ReportStore.enforceLimits); run before each pass.
  @discardableResult
  public func enforceLimits() -> [Eviction] {
    store.enforceLimits(settings.storeLimits)
  }

  // MARK: - Parsing answers

  /// When a destination that answered `answer` (a 429) may be tried again: `now` plus its
  /// Retry-After (see `retryAfter`), pinned at the end of time rather than overflowing.
  package static func pausedUntil(_ answer: HTTPResponse, now: UInt64, default fallback: Double) -> UInt64 {
    adding(now, retryAfter(answer.headers["retry-after"], now: now, default: fallback))
  }

  /// Seconds (as nanoseconds) to wait per a Retry-After value: delay-seconds or an HTTP date
  /// (IMF-fixdate). Unusable values (negative, not a number, a date that does not parse) give
  /// `default`; waits are capped at `maxRetryAfter` (a day). The value comes from the network:
  /// nothing in it may trap.
  package static func retryAfter(_ value: String?, now: UInt64, default fallback: Double) -> UInt64 {
    func nanoseconds(_ seconds: Double) -> UInt64 {
      // NaN fails both comparisons: no wait rather than a trap in UInt64(_:).
      guard seconds > 0 else { return 0 }
      return UInt64(min(seconds, maxRetryAfter) * 1e9)
    }
    guard let value = value?.trimmed(of: " \t") else { return nanoseconds(fallback) }
    if let seconds = Double(value), seconds >= 0 { return nanoseconds(seconds) }
    guard let date = httpDate(value) else { return nanoseconds(fallback) }
    return nanoseconds(date - Double(now) / 1e9)
  }

  /// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110);
  /// nil unless every field is in its range (a four-digit year, a real time of day).
  package static func httpDate(_ text: String) -> Double? {
    let fields = text.split(separator: " ")
    guard fields.count == 6, fields[5] == "GMT", let day = Int32(fields[1]), (1...31).contains(day),
      let year = Int32(fields[3]), (1...9999).contains(year)
    else { return nil }
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    guard let month = months.firstIndex(of: String(fields[2])) else { return nil }
    let clock = fields[4].split(separator: ":", omittingEmptySubsequences: false).compactMap { Int32($0) }
    guard clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]),
      (0...60).contains(clock[2])
    else { return nil }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = Int32(month)
    parts.tm_mday = day
    parts.tm_hour = clock[0]
    parts.tm_min = clock[1]
    parts.tm_sec = clock[2]
    return Double(timegm(&parts))
  }

  /// The start of a refusal's body, for the stored reason.
  package static func excerpt(_ body: [UInt8]) -> String {
    guard !body.isEmpty else { return "" }
    let text = String(decoding: body.prefix(200), as: UTF8.self)
      .map { $0.isNewline ? " " : $0 }
    return ": " + String(text).trimmed(of: " ")
  }
}
