// TwoThreadRunner.swift — runs one workload on the calling thread and on a second thread at once.
//
// Entry points, in call order:
//   TwoThreadRunner(work:)   start the second thread; it spins, waiting for a round
//   run(count:)              both threads call work(count) at the same moment; returns when both
//                            are done, with the wall-clock nanoseconds the round took
//   runTimed(chunk:)         both threads run three chunks back to back and time their middle one:
//                            whatever the hand-over skew, the middle chunks run while the other
//                            thread appends too (the per-op cost each thread sees, at once)
//   stop()                   end and join the second thread (it burns a core while it waits, so
//                            stop it before measuring anything single-threaded). Required: the
//                            thread keeps the runner alive until then.
//
// Rounds are handed over with spinning atomics, not a condition variable: waking a sleeping thread
// costs microseconds, as much as a whole round of appends. Memory ordering: the round count is
// stored before the generation is released; the helper acquires the generation, then reads the
// count. The helper releases `finished` after its work; the caller acquires it.

import CBaselineAppend
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A second thread that runs `work` whenever the calling thread does (see the file comment).
public final class TwoThreadRunner: @unchecked Sendable {
  private let work: @Sendable (Int) -> Void
  private let generation = Atomic<Int>(0)
  private let finished = Atomic<Int>(0)
  private let roundCount = Atomic<Int>(0)
  /// Whether the round is a timed one (three chunks, the middle one timed).
  private let timed = Atomic<Bool>(false)
  /// The helper's middle chunk of the last timed round, in nanoseconds.
  private let helperMiddle = Atomic<UInt64>(0)
  private let stopping = Atomic<Bool>(false)
  private var thread = pthread_t()
  private var running = false

  /// Starts the second thread.
  public init(work: @escaping @Sendable (Int) -> Void) {
    self.work = work
    let context = Unmanaged.passRetained(self).toOpaque()
    let created = pthread_create(
      &thread, nil,
      { context in
        let runner = Unmanaged<TwoThreadRunner>.fromOpaque(context!).takeRetainedValue()
        runner.helperLoop()
        return nil
      }, context)
    precondition(created == 0, "pthread_create failed: \(created)")
    running = true
  }

  private func helperLoop() {
    var seen = 0
    while true {
      var current = generation.load(ordering: .acquiring)
      while current == seen {
        if stopping.load(ordering: .relaxed) { return }
        crumbs_bench_spin_pause()
        current = generation.load(ordering: .acquiring)
      }
      seen = current
      let count = roundCount.load(ordering: .relaxed)
      if timed.load(ordering: .relaxed) {
        helperMiddle.store(Self.middleChunk(work, count), ordering: .relaxed)
      } else {
        work(count)
      }
      finished.store(seen, ordering: .releasing)
    }
  }

  /// Runs `work(count)` three times and returns the nanoseconds of the middle run.
  private static func middleChunk(_ work: (Int) -> Void, _ count: Int) -> UInt64 {
    work(count)
    let start = monotonicNanoseconds()
    work(count)
    let middle = monotonicNanoseconds() &- start
    work(count)
    return middle
  }

  /// Runs `work(count)` here and on the second thread at once; returns the round's wall-clock
  /// nanoseconds (from the hand-over until both are done).
  @discardableResult
  public func run(count: Int) -> UInt64 {
    precondition(running, "run after stop")
    timed.store(false, ordering: .relaxed)
    roundCount.store(count, ordering: .relaxed)
    let start = monotonicNanoseconds()
    let round = generation.add(1, ordering: .releasing).newValue
    work(count)
    while finished.load(ordering: .acquiring) != round { crumbs_bench_spin_pause() }
    return monotonicNanoseconds() &- start
  }

  /// Both threads run three chunks of `chunk` at once; returns the nanoseconds per op of each
  /// thread's middle chunk (this thread's, then the helper's).
  public func runTimed(chunk: Int) -> (Double, Double) {
    precondition(running, "run after stop")
    timed.store(true, ordering: .relaxed)
    roundCount.store(chunk, ordering: .relaxed)
    let round = generation.add(1, ordering: .releasing).newValue
    let mine = Self.middleChunk(work, chunk)
    while finished.load(ordering: .acquiring) != round { crumbs_bench_spin_pause() }
    let theirs = helperMiddle.load(ordering: .relaxed)
    return (Double(mine) / Double(chunk), Double(theirs) / Double(chunk))
  }

  /// Ends and joins the second thread. Idempotent.
  public func stop() {
    guard running else { return }
    running = false
    stopping.store(true, ordering: .relaxed)
    pthread_join(thread, nil)
  }
}
