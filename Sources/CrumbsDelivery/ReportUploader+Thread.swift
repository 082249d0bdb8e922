// ReportUploader+Thread.swift — the uploader's background thread: passes now, after wake(), and
// when the next report is due (at most a minute apart: another process may store reports), until
// stop(timeout:).
//
// Entry points, in call order: start() → wake() (a report was stored) → stop(timeout:). Each run
// of the thread has its own stop flag and end signal (Run), so a thread that stop gave up
// waiting for never takes the signals of a run started after it. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import Dispatch
import Synchronization

extension ReportUploader {
  /// One run of the background thread, with its own stop flag and end signal: a thread that a
  /// `stop(timeout:)` gave up waiting for ends on its own later, and never takes the signals of
  /// a run started after it.
  final class Run: Sendable {
    private let stopRequested = Mutex(false)
    let finished = DispatchSemaphore(value: 0)
    /// Signalled by wake() and stop(): ends the thread's wait between passes early.
    let wakeUp = DispatchSemaphore(value: 0)
    var isStopping: Bool { stopRequested.withLock { $0 } }
    func requestStop() { stopRequested.withLock { $0 = true } }
  }

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
      ForkedSessionReaper.startIfForked()  // a background pass: the reaper's thread, once forked
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
}
