// CrumbsClient+Flush.swift — delivering what is pending before a short-lived process exits.
//
// Entry points:
//   flush(timeout:)           blocking: a CLI's last call before it returns from main
//   await flush(timeout:)     the same work on a thread of its own, the caller suspended
//
// What a flush does, all within `timeout` seconds of the call:
//   1. waits for the background run to process the previous sessions (a crash the last launch
//      left becomes a pending report first);
//   2. runs one delivery pass on its own thread ("crumbs.flush"): every pending report that is
//      due is attempted once, with the usual rules (a failure keeps the report pending with its
//      retry schedule; nothing is lost); no attempt starts once the deadline is reached; then,
//      in the same pass, the queued session summaries (the uploader's outbox);
//   3. returns what it saw. When the time runs out first, the request in flight finishes on the
//      flush thread if the process lives on; if it exits, the report stays pending for the next
//      launch (at least once, never lost).
// Not signal-safe.

import CrumbsDelivery
import CrumbsPlatform
import CrumbsRecorder
import Dispatch
import FoundationEssentials
import Synchronization

/// What `CrumbsClient.flush(timeout:)` did.
public struct FlushResult: Sendable, Equatable {
  /// Reports this flush delivered (moved to sent/).
  public var delivered: Int
  /// Reports still pending when it returned: failed and waiting for a retry, not due yet, or
  /// not reached in time.
  public var pending: Int
  /// The time ran out before the delivery pass ended (it goes on while the process lives).
  public var timedOut: Bool
  /// Another process was delivering from the same store: this one attempted nothing.
  public var storeBusy: Bool
}

extension CrumbsClient {
  /// Delivers what is pending now and returns, within `timeout` seconds (see the file comment).
  /// For short-lived programs: call it before returning from `main`. Never on a thread that
  /// must not wait for the network.
  @discardableResult
  public func flush(timeout: Double = 10) -> FlushResult {
    let seconds = timeout.isNaN ? 0 : min(max(timeout, 0), 86_400)
    let deadline = SystemClock.monotonicNanoseconds() + UInt64(seconds * 1e9)
    func remaining() -> Double {
      let now = SystemClock.monotonicNanoseconds()
      return now >= deadline ? 0 : Double(deadline - now) / 1e9
    }
    waitForPreviousSessions(timeout: remaining())
    guard let uploader, isEnabled else {
      return FlushResult(delivered: 0, pending: pendingReportCount, timedOut: false, storeBusy: false)
    }
    let outcome = Mutex<DeliveryPass?>(nil)
    let done = DispatchSemaphore(value: 0)
    let work: @Sendable () -> Void = {
      let pass = uploader.deliverPendingNow(startingNothingAfter: deadline)
      outcome.withLock { $0 = pass }
      done.signal()
    }
    do { try BackgroundThread.start(name: "crumbs.flush", work) } catch { work() }
    let ended = done.wait(timeout: .now() + remaining()) == .success
    let pass = outcome.withLock { $0 }
    return FlushResult(
      delivered: pass?.finished.filter { $0.state == .sent }.count ?? 0, pending: pendingReportCount,
      timedOut: !ended, storeBusy: pass?.lockBusy ?? false)
  }

  /// `flush(timeout:)` without blocking the caller's thread: the work runs on a thread of its
  /// own while the caller is suspended.
  @discardableResult
  public func flush(timeout: Double = 10) async -> FlushResult {
    await withCheckedContinuation { continuation in
      let work: @Sendable () -> Void = { [self] in continuation.resume(returning: flush(timeout: timeout)) }
      do { try BackgroundThread.start(name: "crumbs.flush", work) } catch { work() }
    }
  }

  /// Reports waiting in pending/.
  var pendingReportCount: Int { store.list(.pending).reports.count }
}
