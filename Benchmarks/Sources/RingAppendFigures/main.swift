// RingAppendFigures — the comparison block `make bench` ends with: the ring's append against the C
// baseline, measured in one process, interleaved, so the ratios hold on a noisy machine.
//
// Steps, in order:
//   1. map the rings (TMPDIR), warm every loop, check the ring really holds the benchmark breadcrumb
//   2. BLOCKS blocks, each a one-thread phase of ROUNDS rounds (one timed chunk of 1000 appends of
//      each kind: baseline, ring, addBreadcrumb, the C entry point) and a two-thread phase of ROUNDS
//      rounds (one chunk each of ring and baseline, both threads at once). Chunks are tens of µs,
//      so a preemption spoils a few chunks, which the medians ignore, not a whole measurement.
//   3. counts mallocs over 1,000,000 appends of each kind with ordo-one's malloc interposer (the one
//      the benchmark suite uses; `make bench` preloads it)
//   4. prints the medians, the ratios of medians and whether each goal is met, then the best chunk
//      of each kind (the least disturbed figures)
//
// Usage: RingAppendFigures [BLOCKS [ROUNDS]]   (defaults 5 and 400). Exit status 0 even when a
// goal is missed: a loaded machine can miss one, and the figures say so.

import AppendWorkloads
import Crumbs
import Foundation
import MallocInterposerSwift
import Synchronization

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let blocks = max(1, arguments.first ?? 5)
let roundsPerBlock = max(1, arguments.dropFirst().first ?? 400)
/// Appends per timed chunk: short (tens of µs) so most chunks run without being preempted, long
/// enough that the two clock reads are noise.
let chunk = 1000

/// Nanoseconds per append of one chunk of `body`.
func chunkNanoseconds(_ body: (Int) -> Void) -> Double {
  let start = monotonicNanoseconds()
  body(chunk)
  return Double(monotonicNanoseconds() - start) / Double(chunk)
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted.count % 2 == 1
    ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }

let baseline: BaselineFixture
let ring: RingFixture
let installedRing: RingFixture
do {
  baseline = try BaselineFixture()
  ring = try RingFixture()
  installedRing = try RingFixture(install: true)
} catch {
  print("RingAppendFigures: cannot set up the rings: \(error)")
  exit(1)
}

// 1. Warm up, and make sure what is measured is a real append of the benchmark breadcrumb.
appendToBaseline(baseline, count: 100_000)
appendToRing(ring.ring, count: 100_000)
addBreadcrumbs(count: 100_000)
addBreadcrumbsFromC(count: 100_000)
for fixture in [ring, installedRing] {
  let contents = fixture.ring.snapshot()
  guard let newest = contents.breadcrumbs.last,
    newest.message == BenchmarkBreadcrumb.message,
    newest.attributes.map({ "\($0.key)=\($0.value)" }) == ["method=GET", "status=200"],
    !newest.truncated, newest.level == .info, newest.type == .http
  else {
    print("RingAppendFigures: the ring does not hold the benchmark breadcrumb; figures would lie")
    exit(1)
  }
}

/// Which loop both threads run in the two-thread phase: 0 the ring, 1 the baseline. Set before a
/// round; the runner's hand-over (release/acquire) publishes it to the second thread.
let twoThreadKind = Atomic<Int>(0)
let twoThreadWork: @Sendable (Int) -> Void = { count in
  if twoThreadKind.load(ordering: .relaxed) == 0 {
    appendToRing(ring.ring, count: count)
  } else {
    appendToBaseline(baseline, count: count)
  }
}

// 2. Blocks of interleaved chunks: a one-thread phase, then a two-thread phase (the second thread
// spins between rounds, so it only exists during its phase).
var baseline1: [Double] = []
var ring1: [Double] = []
var global1: [Double] = []
var cEntry1: [Double] = []
var runtime1: [Double] = []
let runtimeMessage = BenchmarkBreadcrumb.runtimeMessage()
let runtimeStatus = BenchmarkBreadcrumb.runtimeStatus()
var ring2: [Double] = []
var baseline2: [Double] = []
for _ in 0..<blocks {
  for _ in 0..<roundsPerBlock {
    baseline1.append(chunkNanoseconds { appendToBaseline(baseline, count: $0) })
    ring1.append(chunkNanoseconds { appendToRing(ring.ring, count: $0) })
    global1.append(chunkNanoseconds { addBreadcrumbs(count: $0) })
    cEntry1.append(chunkNanoseconds { addBreadcrumbsFromC(count: $0) })
    runtime1.append(
      chunkNanoseconds {
        appendRuntimeValues(ring.ring, message: runtimeMessage, status: runtimeStatus, count: $0)
      })
  }
  let runner = TwoThreadRunner(work: twoThreadWork)
  for kind in 0..<2 {  // warm: each thread's first append asks the kernel for its tid
    twoThreadKind.store(kind, ordering: .relaxed)
    runner.run(count: 10_000)
  }
  for _ in 0..<roundsPerBlock {
    twoThreadKind.store(0, ordering: .relaxed)
    ring2.append(Double(runner.run(count: chunk)) / Double(chunk))
    twoThreadKind.store(1, ordering: .relaxed)
    baseline2.append(Double(runner.run(count: chunk)) / Double(chunk))
  }
  runner.stop()
}

// 3. Mallocs, counted by the interposer the benchmark suite uses.
func mallocs(_ body: () -> Void) -> Int {
  MallocInterposerSwift.initialize()
  MallocInterposerSwift.hook()
  body()
  MallocInterposerSwift.unhook()
  return MallocInterposerSwift.getStatistics().mallocCount
}
let mallocAppends = 1_000_000
// A runtime allocation (swift_slowAlloc → malloc) the optimizer cannot remove: is counting on?
let countingWorks =
  mallocs { UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8).deallocate() } > 0
let ringMallocs = mallocs { appendToRing(ring.ring, count: mallocAppends) }
let globalMallocs = mallocs { withExtendedLifetime(installedRing) { addBreadcrumbs(count: mallocAppends) } }
let baselineMallocs = mallocs { appendToBaseline(baseline, count: mallocAppends) }

// 4. The block.
func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }
let ringRatioMedian = median(ring1) / median(baseline1)
let globalRatioMedian = median(global1) / median(baseline1)
let twoThreadRatioMedian = median(ring2) / median(ring1)
print("")
print(
  "== Ring append figures: one process, medians of \(blocks * roundsPerBlock) interleaved chunks of "
    + "\(chunk) appends per kind ==")
print("  baseline C append, 1 thread:   \(format(median(baseline1))) ns/op")
print("  ring append, 1 thread:         \(format(median(ring1))) ns/op")
print("  addBreadcrumb, 1 thread:       \(format(median(global1))) ns/op")
print(
  "  ring append run-time values:   \(format(median(runtime1))) ns/op, ratio \(format(median(runtime1) / median(baseline1)))"
)
print(
  "  C entry crumbs_add_breadcrumb: \(format(median(cEntry1))) ns/op (the ring without the Swift wrapper)")
print("  ring append, 2 threads:        \(format(median(ring2))) ns/op per thread")
print("  baseline C append, 2 threads:  \(format(median(baseline2))) ns/op per thread (one shared counter)")
print(
  "append 1 thread: \(format(median(ring1))) ns/op, baseline: \(format(median(baseline1))) ns/op, "
    + "ratio \(format(ringRatioMedian)) (goal <= 3: \(verdict(ringRatioMedian <= 3)))")
print(
  "addBreadcrumb 1 thread: \(format(median(global1))) ns/op, ratio to baseline \(format(globalRatioMedian)) "
    + "(goal <= 3: \(verdict(globalRatioMedian <= 3)))")
print(
  "append 2 threads: \(format(median(ring2))) ns/op per thread, 1 thread: \(format(median(ring1))) ns/op, "
    + "ratio \(format(twoThreadRatioMedian)) (goal <= 2: \(verdict(twoThreadRatioMedian <= 2))); "
    + "baseline 2 threads / 1 thread: \(format(median(baseline2) / median(baseline1)))")
let best1 = ring1.min()! / baseline1.min()!
let best2 = ring2.min()! / ring1.min()!
print(
  "best chunks: baseline \(format(baseline1.min()!)), ring \(format(ring1.min()!)), "
    + "ring 2 threads \(format(ring2.min()!)) ns/op; ratios \(format(best1)) and \(format(best2))")
if countingWorks {
  let total = ringMallocs + globalMallocs
  print(
    "mallocs in \(mallocAppends) appends: ring \(ringMallocs), addBreadcrumb \(globalMallocs), "
      + "baseline \(baselineMallocs) (goal 0: \(verdict(total == 0)))")
} else {
  print("mallocs: not counted (run with LD_PRELOAD=<bin>/libMallocInterposerSwift.so, as make bench does)")
}
