// RingAppend.swift — the ordo-one/benchmark suite for the breadcrumb ring's hot path.
//
// Every benchmark does 1000 appends of the same breadcrumb per iteration (scalingFactor .kilo):
// run with `--scale` (as `make bench` does) and the wall clock reads as nanoseconds per append.
// The malloc count is per iteration (1000 appends): it must read 0.
//
// Benchmarks (the tool prints them sorted by name), one per AppendKind and thread count:
//   1 thread: C floor, ring.append all literals, ring.append run-time values, addBreadcrumb
//             run-time values, C entry crumbs_add_breadcrumb_utf8
//   2 threads: ring.append run-time values, and the C floor (both threads on its one counter);
//             wall clock per append of one thread (per-op cost each thread sees)
// Ratios from one run are printed afterwards by RingAppendFigures (`make bench`).

import AppendWorkloads
import Benchmark
import Synchronization

/// Appends per iteration, matching `scalingFactor: .kilo`.
let appendsPerIteration = 1000

/// Holds the second thread of a two-thread benchmark between its setup and teardown.
final class SecondThread: Sendable {
  private let runner = Mutex<TwoThreadRunner?>(nil)

  func start(_ work: @escaping @Sendable (Int) -> Void) -> TwoThreadRunner {
    let started = TwoThreadRunner(work: work)
    runner.withLock { $0 = started }
    // Each thread's first append asks the kernel for its tid; keep that out of the figures.
    started.run(count: appendsPerIteration)
    return started
  }

  func stop() {
    runner.withLock {
      $0?.stop()
      $0 = nil
    }
  }
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .throughput, .mallocCountTotal],
    timeUnits: .nanoseconds,
    warmupIterations: 100,
    scalingFactor: .kilo,
    maxDuration: .seconds(2),
    maxIterations: 1_000_000
  )

  let workloads: Workloads
  do {
    workloads = try Workloads()
  } catch {
    fatalError("cannot set up the benchmark rings: \(error)")
  }

  for kind in AppendKind.allCases {
    Benchmark("\(kind.label), 1 thread") { benchmark in
      workloads.run(kind, count: appendsPerIteration)
    }
  }

  for kind in [AppendKind.runtime, .baseline] {
    let secondThread = SecondThread()
    Benchmark(
      "\(kind.label), 2 threads",
      closure: { benchmark, runner in
        runner.run(count: appendsPerIteration)
      },
      setup: { secondThread.start { workloads.run(kind, count: $0) } },
      teardown: { secondThread.stop() })
  }
}
