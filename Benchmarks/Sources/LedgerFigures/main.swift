// LedgerFigures — what the in-flight ledger costs, as same-run figures for `make bench`:
//
//   1. One thread, in blocks of interleaved chunks of 1000 calls (medians of ns per call):
//      `crumbs.beginOperation(name).end()` against one `crumbs.addBreadcrumb(name)` of the same
//      name, with the name a literal and again built at run time (a native heap string), and the
//      C floor (CBaselineAppend's crumbs_bench_ledger_floor: claim, ids and name copied,
//      publish, free, on one entry of a MAP_SHARED table). Goal: begin + end ≤ 2× addBreadcrumb.
//   2. Two threads at once (TwoThreadRunner.runTimed: each times the middle of three chunks)
//      beginning and ending literal operations in the same ledger, against one thread; with the
//      same calibration as RingAppendFigures (the second thread in a ring's ledger of its own:
//      what the machine does to two threads that share nothing). Goal: ≤ 1.1× one thread.
//   3. Mallocs over 1,000,000 begin + end of each kind (ordo-one's interposer; `make bench`
//      preloads it). Goal: 0 for a literal name.
//
// Usage: LedgerFigures [BLOCKS [ROUNDS]]   (defaults 5 and 300). Exit status 0 even when a goal
// is missed: a loaded machine can miss one, and the figures say so.

import AppendWorkloads
import BenchSummary
import CBaselineAppend
import Crumbs
import Foundation
import MallocInterposerSwift

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let blocks = max(1, arguments.first ?? 5)
let roundsPerBlock = max(1, arguments.dropFirst().first ?? 300)
let chunk = 1000

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }

/// A client of its own in a scratch directory (no hang watchdog, no automatic breadcrumbs, no
/// destination): only the ring and its ledger are measured.
func startClient(_ tag: String) -> (CrumbsClient, String) {
  let directory = "\(temporaryDirectory())/crumbs-ledger-figures-\(getpid())-\(tag)"
  var configuration = CrumbsConfiguration(directory: directory)
  configuration.automaticBreadcrumbs = nil
  configuration.hangs = nil
  configuration.environment = [:]
  guard let client = try? CrumbsClient.start(configuration, shared: false) else {
    print("LedgerFigures: cannot start a client in \(directory)")
    exit(1)
  }
  return (client, directory)
}

/// The name every kind uses, a route template of 18 bytes (beyond a small string's 15), here
/// built at run time, as a server's router hands it over; the literal kinds spell it inline.
let runtimeName = "GET /v1/orders/" + String(":id".reversed().reversed())

@inline(never) func operationsLiteral(_ client: CrumbsClient, _ count: Int) {
  for _ in 0..<count { client.beginOperation("GET /v1/orders/:id").end() }
}

@inline(never) func operationsRuntime(_ client: CrumbsClient, _ name: String, _ count: Int) {
  for _ in 0..<count { client.beginOperation(name).end() }
}

@inline(never) func breadcrumbsLiteral(_ client: CrumbsClient, _ count: Int) {
  for _ in 0..<count { client.addBreadcrumb("GET /v1/orders/:id") }
}

@inline(never) func breadcrumbsRuntime(_ client: CrumbsClient, _ name: String, _ count: Int) {
  for _ in 0..<count { client.addBreadcrumb(name) }
}

let floor: LedgerFloor
do {
  floor = try LedgerFloor()
} catch {
  print("LedgerFigures: \(error)")
  exit(1)
}
@inline(never) func floorOperations(_ count: Int) { floor.run(name: "GET /v1/orders/:id", count: count) }

enum Kind: String, CaseIterable {
  case floor = "C floor (claim, 32 B ids + name, publish, free)"
  case operationLiteral = "beginOperation + end, literal name"
  case breadcrumbLiteral = "addBreadcrumb, literal name"
  case operationRuntime = "beginOperation + end, run-time name"
  case ringOperation = "ring.beginOperation + endOperation, literal"
  case breadcrumbRuntime = "addBreadcrumb, run-time name"
}

nonisolated(unsafe) let (client, directory) = startClient("shared")
// The calibration's ledger: a ring of its own (one client a process), begun and ended through
// the ring, as the client does underneath.
nonisolated(unsafe) let ownRing: RingFixture
do {
  ownRing = try RingFixture()
} catch {
  print("LedgerFigures: \(error)")
  exit(1)
}
// Two threads sharing one ring without the client: the same ledger calls, so that the
// calibration (a ring each) and this differ only in what the threads share.
nonisolated(unsafe) let sharedRing: RingFixture
do {
  sharedRing = try RingFixture()
} catch {
  print("LedgerFigures: \(error)")
  exit(1)
}
@inline(never) func ringOperationsLiteral(_ ring: BreadcrumbRing, _ count: Int) {
  for _ in 0..<count { ring.endOperation(ring.beginOperation("GET /v1/orders/:id")) }
}
// Check: an operation begun is in the ledger with its name, and gone once ended.
let probe = client.beginOperation(runtimeName)
guard probe.isRecorded, client.ring.snapshot().ledger?.open.map(\.name) == [runtimeName] else {
  print("LedgerFigures: the ledger does not hold the operation; figures would lie")
  exit(1)
}
probe.end()
guard client.ring.snapshot().ledger?.open.isEmpty == true else {
  print("LedgerFigures: the operation stayed open; figures would lie")
  exit(1)
}

func run(_ kind: Kind, count: Int) {
  switch kind {
  case .floor: floorOperations(count)
  case .operationLiteral: operationsLiteral(client, count)
  case .breadcrumbLiteral: breadcrumbsLiteral(client, count)
  case .operationRuntime: operationsRuntime(client, runtimeName, count)
  case .ringOperation: ringOperationsLiteral(sharedRing.ring, count)
  case .breadcrumbRuntime: breadcrumbsRuntime(client, runtimeName, count)
  }
}
for kind in Kind.allCases { run(kind, count: 100_000) }
ringOperationsLiteral(ownRing.ring, 100_000)

var one: [Kind: [Double]] = [:]
var two: [Double] = []
var twoRing: [Double] = []
var calibrationTwo: [Double] = []
nonisolated(unsafe) let mainThread = pthread_self()
/// What the two threads run: the client on its ring, the ring's calls on one shared ring, or
/// (calibrating) each on a ring of its own.
enum TwoThreadPhase { case client, sharedRing, calibrating }
nonisolated(unsafe) var phase = TwoThreadPhase.client
for _ in 0..<blocks {
  for _ in 0..<roundsPerBlock {
    for kind in Kind.allCases {
      let start = AppendWorkloads.monotonicNanoseconds()
      run(kind, count: chunk)
      one[kind, default: []].append(Double(AppendWorkloads.monotonicNanoseconds() - start) / Double(chunk))
    }
  }
  let runner = TwoThreadRunner(work: { count in
    switch phase {
    case .client: operationsLiteral(client, count)
    case .sharedRing: ringOperationsLiteral(sharedRing.ring, count)
    case .calibrating:
      let own = pthread_equal(pthread_self(), mainThread) == 0
      ringOperationsLiteral(own ? ownRing.ring : sharedRing.ring, count)
    }
  })
  runner.run(count: 10_000)  // warm: each thread's first operation asks for its tid
  for _ in 0..<roundsPerBlock {
    phase = .client
    let (mine, theirs) = runner.runTimed(chunk: chunk)
    two += [mine, theirs]
    phase = .sharedRing
    let (ringMine, ringTheirs) = runner.runTimed(chunk: chunk)
    twoRing += [ringMine, ringTheirs]
    phase = .calibrating
    let (ownMine, ownTheirs) = runner.runTimed(chunk: chunk)
    calibrationTwo += [ownMine, ownTheirs]
  }
  runner.stop()
}

func mallocs(_ body: () -> Void) -> Int {
  MallocInterposerSwift.initialize()
  MallocInterposerSwift.hook()
  body()
  MallocInterposerSwift.unhook()
  return MallocInterposerSwift.getStatistics().mallocCount
}
// The interposer counts only when preloaded: a count of 0 means something only if an
// allocation is counted.
let countingWorks = mallocs { _ = Array(repeating: runtimeName, count: Int(getpid() % 2) + 8) } > 0
let literalMallocs = mallocs { operationsLiteral(client, 1_000_000) }
let runtimeMallocs = mallocs { operationsRuntime(client, runtimeName, 1_000_000) }

let medians = one.mapValues(median)
let floorNs = medians[.floor]!
print("== In-flight ledger: one thread, medians of \(blocks * roundsPerBlock) chunks of \(chunk) ==")
for kind in Kind.allCases {
  let ns = medians[kind]!
  print(
    "  \(kind.rawValue.padding(toLength: 50, withPad: " ", startingAt: 0)) \(format(ns)) ns  \(format(ns / floorNs))× floor"
  )
}
let literalRatio = medians[.operationLiteral]! / medians[.breadcrumbLiteral]!
let runtimeRatio = medians[.operationRuntime]! / medians[.breadcrumbRuntime]!
print(
  "  begin + end / addBreadcrumb, literal:  \(format(literalRatio))×  (goal ≤ 2×: \(verdict(literalRatio <= 2)))"
)
print(
  "  begin + end / addBreadcrumb, run-time: \(format(runtimeRatio))×  (goal ≤ 2×: \(verdict(runtimeRatio <= 2)))"
)
let twoRatio = median(two) / medians[.operationLiteral]!
let ringTwoRatio = median(twoRing) / medians[.ringOperation]!
// The machine: the ring's calls on two threads with a ring each (nothing shared) over one thread.
let machineRatio = median(calibrationTwo) / medians[.ringOperation]!
// The two-thread verdict, as RingAppendFigures': the raw ratio when it meets the goal; else,
// when the machine itself slowed two threads that share nothing, the ratio over the machine's
// (what sharing one client and ledger adds); none when the machine gave two threads hardly
// more than one core (1.5× or more).
let overMachine = twoRatio / machineRatio
let twoMeasurable = machineRatio <= 1.5
let twoMet: Bool? = twoRatio <= 1.1 ? true : (twoMeasurable ? overMachine <= 1.1 : nil)
let twoVerdict =
  twoRatio <= 1.1
  ? "met" : !twoMeasurable ? "not measurable here" : "\(verdict(overMachine <= 1.1)) over the machine's"
print("== Two threads at once, literal name (per call each thread sees / one thread's) ==")
print(
  "  client, one ledger:        \(format(median(two))) / \(format(medians[.operationLiteral]!)) ns = \(format(twoRatio))×  (goal ≤ 1.1×: \(twoVerdict))"
)
print(
  "  ring calls, one ledger:    \(format(median(twoRing))) / \(format(medians[.ringOperation]!)) ns = \(format(ringTwoRatio))×"
)
print(
  "  ring calls, a ring each:   \(format(median(calibrationTwo))) / \(format(medians[.ringOperation]!)) ns = \(format(machineRatio))×  (the machine)"
)
print(
  "  client over the machine \(format(overMachine))×, ring calls over the machine \(format(ringTwoRatio / machineRatio))×"
)
print("== Mallocs per 1,000,000 begin + end ==")
if countingWorks {
  print(
    "  literal name \(literalMallocs) (goal 0: \(verdict(literalMallocs == 0))), run-time name \(runtimeMallocs)"
  )
} else {
  print("  not counted: preload libMallocInterposerSwift.so (make bench does)")
}

BenchSummary.record(
  "beginOperation + end / addBreadcrumb, literal", "\(format(literalRatio))×", goal: "≤ 2×",
  met: literalRatio <= 2)
BenchSummary.record(
  "beginOperation + end / addBreadcrumb, run-time", "\(format(runtimeRatio))×", goal: "≤ 2×",
  met: runtimeRatio <= 2)
BenchSummary.record(
  "beginOperation + end, two threads / one",
  "\(format(twoRatio))× (the machine: \(format(machineRatio))×; over it: \(format(overMachine))×)",
  goal: "≤ 1.1×", met: twoMet)
if countingWorks {
  BenchSummary.record(
    "beginOperation + end mallocs, literal", "\(literalMallocs) per 1,000,000", goal: "0",
    met: literalMallocs == 0)
}

client.close()
if directory.contains("/crumbs-ledger-figures-") { _ = system("rm -rf '\(directory)'") }
