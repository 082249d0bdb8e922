// RingAppend.swift — the ordo-one/benchmark suite for the breadcrumb ring's hot path.
//
// Every benchmark does 1000 appends of the same breadcrumb per iteration (scalingFactor .kilo):
// run with `--scale` (as `make bench` does) and the wall clock reads as nanoseconds per append.
// The malloc count is per iteration (1000 appends): it must read 0.
//
// Benchmarks (the tool prints them sorted by name):
//   Baseline C append, 1 thread           the floor (see CBaselineAppend)
//   Ring append, 1 thread                 BreadcrumbRing.append(…, attributes: [2 pairs])
//   addBreadcrumb, 1 thread               the global function, through the installed ring
//   C entry crumbs_add_breadcrumb, 1 thread  the same append from C: the ring without Swift
//   Ring append, 2 threads                both threads append at once; wall clock per append of
//                                         one thread (per-op cost each thread sees)
//   Baseline C append, 2 threads          the same, both on the baseline's single counter
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

  let baseline: BaselineFixture
  let ring: RingFixture
  let installedRing: RingFixture
  do {
    baseline = try BaselineFixture()
    ring = try RingFixture()
    installedRing = try RingFixture(install: true)
  } catch {
    fatalError("cannot set up the benchmark rings: \(error)")
  }

  Benchmark("Baseline C append, 1 thread") { benchmark in
    appendToBaseline(baseline, count: appendsPerIteration)
  }

  Benchmark("Ring append, 1 thread") { benchmark in
    appendToRing(ring.ring, count: appendsPerIteration)
  }

  Benchmark("addBreadcrumb, 1 thread") { benchmark in
    // The fixture owns the installed ring: closing it would uninstall it.
    withExtendedLifetime(installedRing) { addBreadcrumbs(count: appendsPerIteration) }
  }

  Benchmark("C entry crumbs_add_breadcrumb, 1 thread") { benchmark in
    withExtendedLifetime(installedRing) { addBreadcrumbsFromC(count: appendsPerIteration) }
  }

  let ringSecondThread = SecondThread()
  Benchmark(
    "Ring append, 2 threads",
    closure: { benchmark, runner in
      runner.run(count: appendsPerIteration)
    },
    setup: { ringSecondThread.start { appendToRing(ring.ring, count: $0) } },
    teardown: { ringSecondThread.stop() })

  let baselineSecondThread = SecondThread()
  Benchmark(
    "Baseline C append, 2 threads",
    closure: { benchmark, runner in
      runner.run(count: appendsPerIteration)
    },
    setup: { baselineSecondThread.start { appendToBaseline(baseline, count: $0) } },
    teardown: { baselineSecondThread.stop() })
}
