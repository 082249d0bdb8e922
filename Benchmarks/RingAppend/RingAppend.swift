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
//   the in-flight ledger, 1 thread: begin + end of one operation (literal and run-time names,
//             the ring's own calls) and its C floor (a claim, the ids and name stored, a free, on
//             one 512-byte entry); per step one operation, so the clock reads ns per begin + end
// Ratios from one run are printed afterwards by RingAppendFigures and LedgerFigures (`make bench`).

import AppendWorkloads
import Benchmark
import CBaselineAppend
import CrumbsRecorder
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

/// The ids the ledger's C floor stores (32 bytes), made once.
final class LedgerFloorIDs: @unchecked Sendable {
  let pointer: UnsafeMutableRawPointer = {
    let ids = UnsafeMutableRawPointer.allocate(byteCount: 32, alignment: 8)
    ids.initializeMemory(as: UInt8.self, repeating: 0x5a, count: 32)
    return ids
  }()
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

  // The in-flight ledger: the ring's begin + end, against its C floor in the same run.
  let ledgerRing = workloads.ring.ring
  // Built at run time, as a router hands a route over (18 bytes: not a small string).
  let runtimeName = "GET /v1/orders/" + String(":id".reversed().reversed())
  Benchmark("ledger begin + end, literal name, 1 thread") { _ in
    for _ in 0..<appendsPerIteration {
      ledgerRing.endOperation(ledgerRing.beginOperation("GET /v1/orders/:id"))
    }
  }
  Benchmark("ledger begin + end, run-time name, 1 thread") { _ in
    for _ in 0..<appendsPerIteration { ledgerRing.endOperation(ledgerRing.beginOperation(runtimeName)) }
  }
  let floorEntry = workloads.baseline.ring.pointee.slots!
  let floorIDs = LedgerFloorIDs()
  Benchmark("ledger begin + end, C floor, 1 thread") { _ in
    "GET /v1/orders/:id".withCString { name in
      crumbs_bench_ledger_floor(floorEntry, name, 18, floorIDs.pointer, UInt64(appendsPerIteration))
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
