// RingAppendFigures — the comparison block of `make bench`: the append against the C floor,
// measured in one process, interleaved, so the ratios hold on a noisy machine.
//
// Steps, in order:
//   1. map the rings (TMPDIR), check they really hold the benchmark breadcrumb, warm every loop
//   2. BLOCKS blocks, each a one-thread phase of ROUNDS rounds (one timed chunk of 1000 appends
//      of each kind, AppendKind: floor, floor with a clock read, literals, run-time values,
//      addBreadcrumb, C entry) and a
//      two-thread phase of ROUNDS rounds (both threads append at once, run-time values, each
//      timing the middle of three chunks: see TwoThreadRunner.runTimed); each two-thread round
//      also times the calibration (the same append, the second thread into a ring of its own:
//      what the machine does to two appenders that share no ring). Chunks are tens of µs, so a
//      preemption spoils a few chunks, which the medians ignore, not a whole measurement.
//   3. counts mallocs over 1,000,000 appends of each kind with ordo-one's malloc interposer (the
//      one the benchmark suite uses; `make bench` preloads it)
//   4. prints the medians, the ratios of medians and whether each goal is met, then the best
//      chunk of each kind (the least disturbed figures)
//
// Goals (issues 14 and 26): run-time values ≤ 2.0× the floor (3× before issue 26), all
// literals ≤ 2.5×, two threads at once ≤ 1.1× one thread's cost, 0 mallocs. The two-thread goal is about the append's own
// contention; the calibration says what the machine did to two appenders that share no ring
// (two vCPUs that are hyperthreads of one core, or one taken by another process, slow both), and
// when the raw ratio misses, the verdict is one shared ring over a ring each (none when the
// machine gave two threads hardly more than one core: 1.5× or more).
// Usage: RingAppendFigures [BLOCKS [ROUNDS]]   (defaults 5 and 400). Exit status 0 even when a
// goal is missed: a loaded machine can miss one, and the figures say so.

import AppendWorkloads
import BenchSummary
import CBaselineAppend
import Foundation
import MallocInterposerSwift

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let blocks = max(1, arguments.first ?? 5)
let roundsPerBlock = max(1, arguments.dropFirst().first ?? 400)
/// Appends per timed chunk: short (tens of µs) so most chunks run without being preempted, long
/// enough that the two clock reads are noise.
let chunk = 1000

/// The CPU's model name (/proc/cpuinfo), or "unknown".
func cpuModel() -> String {
  guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
    let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
    let colon = line.firstIndex(of: ":")
  else { return "unknown" }
  return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
}

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }

let workloads: Workloads
do {
  workloads = try Workloads()
} catch {
  print("RingAppendFigures: cannot set up the rings: \(error)")
  exit(1)
}

// 1. Check, then warm up.
guard workloads.check() else {
  print("RingAppendFigures: the rings do not hold the benchmark breadcrumb; figures would lie")
  exit(1)
}
for kind in AppendKind.allCases { workloads.run(kind, count: 100_000) }

// Calibration, in the same blocks (so through the same noise): the same append on two threads
// at once, but the second thread into a ring of its own, so the two share nothing of a ring.
// Whatever slows that down is the machine (two vCPUs that are hyperthreads of one core, or one
// taken by another process; this VM is placed both ways from run to run); what one shared ring
// adds on top is the append's own contention.
let ownRing: RingFixture
do {
  ownRing = try RingFixture()
} catch {
  print("RingAppendFigures: cannot set up the calibration ring: \(error)")
  exit(1)
}
let mainThread = pthread_self()
appendRuntimeValues(ownRing.ring, message: workloads.message, status: workloads.status, count: 100_000)
var calibrationTwo: [Double] = []

// 2. Blocks of interleaved chunks: a one-thread phase, then a two-thread phase (the second
// thread spins between rounds, so it only exists during its phase).
var one: [AppendKind: [Double]] = [:]
var two: [Double] = []
var twoBaseline: [Double] = []
/// What both threads run in the two-thread phase (an append loop; with `twoThreadCalibration`,
/// the run-time append with the second thread into its own ring); set before a round (the
/// runner's hand-over publishes it to the second thread).
nonisolated(unsafe) var twoThreadKind = AppendKind.runtime
nonisolated(unsafe) var twoThreadCalibration = false
for _ in 0..<blocks {
  for _ in 0..<roundsPerBlock {
    for kind in AppendKind.allCases {
      let start = AppendWorkloads.monotonicNanoseconds()
      workloads.run(kind, count: chunk)
      one[kind, default: []].append(Double(AppendWorkloads.monotonicNanoseconds() - start) / Double(chunk))
    }
  }
  let runner = TwoThreadRunner(work: { count in
    if twoThreadCalibration, pthread_equal(pthread_self(), mainThread) == 0 {
      appendRuntimeValues(ownRing.ring, message: workloads.message, status: workloads.status, count: count)
    } else if twoThreadCalibration {
      workloads.run(.runtime, count: count)
    } else {
      workloads.run(twoThreadKind, count: count)
    }
  })
  for kind in [AppendKind.runtime, .baseline] {  // warm: each thread's first append asks for its tid
    twoThreadKind = kind
    runner.run(count: 10_000)
  }
  for _ in 0..<roundsPerBlock {
    twoThreadKind = .runtime
    let (mine, theirs) = runner.runTimed(chunk: chunk)
    two += [mine, theirs]
    twoThreadKind = .baseline
    let (baseMine, baseTheirs) = runner.runTimed(chunk: chunk)
    twoBaseline += [baseMine, baseTheirs]
    twoThreadCalibration = true
    let (ownMine, ownTheirs) = runner.runTimed(chunk: chunk)
    calibrationTwo += [ownMine, ownTheirs]
    twoThreadCalibration = false
  }
  runner.stop()
}
let machineTwoThreads = median(calibrationTwo) / median(one[.runtime]!)

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
var mallocCounts: [AppendKind: Int] = [:]
for kind in AppendKind.allCases { mallocCounts[kind] = mallocs { workloads.run(kind, count: mallocAppends) } }

// 4. The block.
let floor = median(one[.baseline]!)
@MainActor func ratio(_ kind: AppendKind) -> Double { median(one[kind]!) / floor }
let runtimeRatio = ratio(.runtime)
let literalRatio = ratio(.literal)
let twoRatio = median(two) / median(one[.runtime]!)
print("")
print(
  "== Append figures: one process, medians of \(blocks * roundsPerBlock) interleaved chunks of "
    + "\(chunk) appends per kind ==")
for kind in AppendKind.allCases {
  let ns = median(one[kind]!)
  let label = kind.label.padding(toLength: 52, withPad: " ", startingAt: 0)
  print("  \(label) \(format(ns)) ns/op  \(kind == .baseline ? "" : "\(format(ns / floor))× the floor")")
}
print(
  "  ring.append, run-time values, 2 threads at once     \(format(median(two))) ns/op per thread; "
    + "the floor's shared counter, 2 threads: \(format(median(twoBaseline))) ns/op")
// The two-thread verdict: the raw ratio when it meets the goal; else, when the machine itself
// slowed two appenders that share no ring (calibration above), one shared ring over a ring each,
// which is the append's own contention; none when the machine gave two threads hardly more than
// one core (then any ratio says more about the machine than about the append).
let overMachine = twoRatio / machineTwoThreads
let twoMeasurable = machineTwoThreads <= 1.5
let twoMet: Bool? = twoRatio <= 1.1 ? true : (twoMeasurable ? overMachine <= 1.1 : nil)
let twoVerdict =
  twoRatio <= 1.1
  ? "met" : !twoMeasurable ? "not measurable here" : "\(verdict(overMachine <= 1.1)) over the machine's"
print(
  "run-time values: \(format(runtimeRatio))× the floor (goal ≤ 2.0: \(verdict(runtimeRatio <= 2))); "
    + "all literals: \(format(literalRatio))× (goal ≤ 2.5: \(verdict(literalRatio <= 2.5))); "
    + "2 threads / 1 thread: \(format(twoRatio))× (goal ≤ 1.1: \(twoVerdict))")
print(
  "this machine, two threads at once (same phases): the same append with a ring per thread "
    + "(nothing of a ring shared) takes \(format(machineTwoThreads))× as long as on one thread "
    + "(1.0: two cores to themselves; more: hyperthreads of one core, or a vCPU taken); one shared "
    + "ring over a ring each: \(format(overMachine))×")
// How far the clock read alone takes a ring from the floor on this CPU (RDTSC: about 9 ns on the
// Intel VMs the goal was set on, 5-12 ns on AMD EPYC ones, where the floor's locked add is 3 ns
// against 13): the ratio above depends on the CPU as much as on the append.
let stampedFloor = median(one[.stampedBaseline]!)
print(
  "CPU: \(cpuModel()); the floor with one clock read: \(format(stampedFloor / floor))× the floor; "
    + "run-time values over it: \(format(median(one[.runtime]!) / stampedFloor))×")
let best = AppendKind.allCases.map { "\($0.rawValue) \(format(one[$0]!.min()!))" }.joined(separator: ", ")
print("best chunks (ns/op): \(best), 2 threads \(format(two.min()!))")
/// The ratio of the best chunks: what the append costs when nothing else runs on its core (a
/// neighbour on the core's other hyperthread slows the append far more than the floor).
@MainActor func bestRatio(_ kind: AppendKind) -> Double { one[kind]!.min()! / one[.baseline]!.min()! }
print(
  "best chunks over the floor's best: run-time values \(format(bestRatio(.runtime)))×, all literals "
    + "\(format(bestRatio(.literal)))× (the least disturbed figures; the goals are judged on the medians)")
let mallocTotal = mallocCounts.filter { !$0.key.isFloor }.values.reduce(0, +)
if countingWorks {
  let counts = AppendKind.allCases.map { "\($0.rawValue) \(mallocCounts[$0]!)" }.joined(separator: ", ")
  print("mallocs in \(mallocAppends) appends of each kind: \(counts) (goal 0: \(verdict(mallocTotal == 0)))")
} else {
  print("mallocs: not counted (run with LD_PRELOAD=<bin>/libMallocInterposerSwift.so, as make bench does)")
}

// A disturbed run flatters the append: a busy neighbour slows the floor (one locked
// instruction waiting on its core) far more than the append. When the floor's median is more
// than 1.5× its best chunk, the run-time goal is not judged (seen: floor median 66 ns against
// 19–26 ns quiet, and the ratio read 1.5× where quiet runs give 2.25×).
let floorDisturbed = floor > 1.5 * one[.baseline]!.min()!
BenchSummary.record(
  "C floor, 1 thread",
  "\(format(floor)) ns/op (best chunk \(format(one[.baseline]!.min()!))\(floorDisturbed ? ": disturbed run" : ""))"
)
BenchSummary.record(
  "C floor + one clock read, 1 thread",
  "\(format(stampedFloor)) ns/op = \(format(stampedFloor / floor))× floor (\(cpuModel()))")
BenchSummary.record(
  "append, run-time message and value",
  "\(format(median(one[.runtime]!))) ns/op = \(format(runtimeRatio))× floor (best chunks: \(format(bestRatio(.runtime)))×; "
    + "\(format(median(one[.runtime]!) / stampedFloor))× the floor with a clock read)"
    + (floorDisturbed ? "; not judged: the floor's median is over 1.5× its best chunk" : ""),
  goal: "≤ 2.0×", met: floorDisturbed ? nil : runtimeRatio <= 2)
BenchSummary.record(
  "append, all literals",
  "\(format(median(one[.literal]!))) ns/op = \(format(literalRatio))× floor (best chunks: \(format(bestRatio(.literal)))×)",
  goal: "≤ 2.5×", met: literalRatio <= 2.5)
BenchSummary.record(
  "addBreadcrumb, run-time values",
  "\(format(median(one[.global]!))) ns/op = \(format(ratio(.global)))× floor")
BenchSummary.record(
  "C entry (lengths), for comparison",
  "\(format(median(one[.cEntry]!))) ns/op = \(format(ratio(.cEntry)))× floor")
BenchSummary.record(
  "2 threads at once, per thread",
  "\(format(median(two))) ns/op = \(format(twoRatio))× 1 thread (a ring each: \(format(machineTwoThreads))×; shared over that: \(format(overMachine))×)",
  goal: "≤ 1.1×", met: twoMet)
if countingWorks {
  BenchSummary.record(
    "mallocs per append", "\(mallocTotal) in \(mallocAppends) of each kind", goal: "0", met: mallocTotal == 0)
}
