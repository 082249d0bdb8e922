// TracerFigures — what CrumbsTracer adds to each request of a traced server, as same-run figures
// for `make bench`. Each "request" is what Hummingbird 2's TracingMiddleware does to a span of a
// GET that succeeds: start a `.server` span named "HTTP GET route not found" in the request's
// context, set its request attributes, rename it to the route, set the response attributes, end.
// Through the tracer's look-up InstrumentationSystem makes for each span (the bootstrapped
// `any Instrument` checked and cast to `any Tracer`), as the middleware reaches it:
//
//   traced   NoOpTracer bootstrapped (where swift-otel's would be): what every traced request
//            pays anyway
//   tracer   CrumbsTracer wrapping NoOpTracer: the request also in the ledger
//   floor    the C floor (CBaselineAppend's crumbs_bench_ledger_floor): claim an entry, copy ids
//            and name, publish, free
//   traced with ids / tracer over ids   the same two over IDTracer, a tracer that gives each
//            span W3C ids kept in its context as bytes, as swift-otel's does (none of its export
//            work): CrumbsTracer reads them (SpanIDReader) and adds nothing to the span's context
//
// Then both on two threads at once (TwoThreadRunner: a server's two event loops tracing), the
// wall-clock time of each thread's middle chunk, per request.
//
// Interleaved chunks of 200 requests, medians of the thread's CPU time per request (a busy
// machine preempts a chunk; CPU time leaves that out, as the server script's CPU per request does); mallocs per request (ordo-one's
// interposer, preloaded by `make bench`). The goal is the server's (Benchmarks/server-bench.py:
// throughput within 3% of `traced`); this program says what CrumbsTracer costs per request, to
// set beside the server's CPU per request that script prints.
//
// Usage: TracerFigures [BLOCKS [ROUNDS]]   (defaults 5 and 500).

import AppendWorkloads
import BenchSummary
import Crumbs
import CrumbsTracing
import Foundation
import MallocInterposerSwift
import ServiceContextModule
import Synchronization
import Tracing

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let blocks = max(1, arguments.first ?? 5)
let roundsPerBlock = max(1, arguments.dropFirst().first ?? 500)
let chunk = 200

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }

let directory = "\(temporaryDirectory())/crumbs-tracer-figures-\(getpid())"
var configuration = CrumbsConfiguration(directory: directory)
configuration.automaticBreadcrumbs = nil
configuration.hangs = nil
configuration.environment = [:]
guard let client = try? CrumbsClient.start(configuration, shared: false) else {
  print("TracerFigures: cannot start a client in \(directory)")
  exit(1)
}

/// Run-time strings, as a server has them: the method, the path and the route.
let method = String("TEG".reversed())
let path = "/v1/orders/" + String(Int(getpid()) % 1000 + 1000)
let route = "/v1/orders/" + String(":id".reversed().reversed())

/// One request's span, as Hummingbird 2.28's TracingMiddleware makes it, through
/// InstrumentationSystem's look-up of the bootstrapped tracer.
@Sendable @inline(never) func request(_ instrument: any Instrument, context: ServiceContext) {
  guard instrument is any Tracer, let tracer = instrument as? any Tracer else {
    fatalError("TracerFigures: \(type(of: instrument)) is not a Tracer")
  }
  let span = tracer.startSpan("HTTP \(method) route not found", context: context, ofKind: .server)
  span.updateAttributes { attributes in
    attributes["http.request.method"] = method
    attributes["url.path"] = path
    attributes["user_agent.original"] = "wrk"
    attributes["http.request.body.size"] = nil as Int?
    attributes["net.sock.peer.port"] = 54321
    attributes["net.sock.peer.addr"] = "127.0.0.1"
    attributes["net.sock.family"] = "inet"
  }
  span.operationName = route
  span.updateAttributes { attributes in
    attributes["http.route"] = route
    attributes["http.response.status_code"] = 200
    attributes["http.response.body.size"] = 6
  }
  span.end()
}

/// A tracer that gives its spans ids as swift-otel's does: a value of its own key in the span's
/// context, the W3C ids as bytes in the header's order, the trace kept from the parent span, a new
/// span id from a counter; attributes and name kept under a lock. Its cost is in both `… with ids`
/// figures, so their difference is CrumbsTracer's.
struct IDTracer: Tracer {
  /// The ids' bytes in the header's order (big-endian words), the flags byte after the span id.
  struct SpanIDs: Sendable {
    var trace: (UInt64, UInt64)
    var span: UInt64
    var flags: UInt8
    var spanID: UInt64 { UInt64(bigEndian: span) }
  }
  enum Key: ServiceContextKey { typealias Value = SpanIDs }

  final class Span: Tracing.Span, Sendable {
    struct State {
      var name: String
      var attributes = SpanAttributes()
    }
    let context: ServiceContext
    let state: Mutex<State>
    init(_ name: String, context: ServiceContext) {
      self.context = context
      state = Mutex(State(name: name))
    }
    var operationName: String {
      get { state.withLock { $0.name } }
      set { state.withLock { $0.name = newValue } }
    }
    var attributes: SpanAttributes {
      get { state.withLock { $0.attributes } }
      set { state.withLock { $0.attributes = newValue } }
    }
    var isRecording: Bool { true }
    func setStatus(_ status: SpanStatus) {}
    func addEvent(_ event: SpanEvent) {}
    func addLink(_ link: SpanLink) {}
    func recordError<Instant: TracerInstant>(
      _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {}
    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {}
  }

  static let next = Atomic<UInt64>(1)

  func startSpan<Instant: TracerInstant>(
    _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
    at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
  ) -> Span {
    var spanContext = context()
    let number = Self.next.wrappingAdd(1, ordering: .relaxed).oldValue
    let trace =
      spanContext[Key.self]?.trace
      ?? (UInt64(0x4bf9_2f35_77b3_4da6).bigEndian, (0xa3ce_0000_0000_0000 | number).bigEndian)
    spanContext[Key.self] = SpanIDs(trace: trace, span: (0x00f0_0000_0000_0000 | number).bigEndian, flags: 1)
    return Span(operationName, context: spanContext)
  }

  func forceFlush() {}

  func inject<Carrier, Inject: Injector>(
    _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
  ) where Inject.Carrier == Carrier {
    guard let ids = context[Key.self] else { return }
    let (high, low) = (UInt64(bigEndian: ids.trace.0), UInt64(bigEndian: ids.trace.1))
    let header = "00-\(Self.hex(high))\(Self.hex(low))-\(Self.hex(ids.spanID))-01"
    injector.inject(header, forKey: "traceparent", into: &carrier)
  }

  /// Sixteen hex digits.
  static func hex(_ word: UInt64) -> String {
    let digits = String(word, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
  }

  func extract<Carrier, Extract: Extractor>(
    _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
  ) where Extract.Carrier == Carrier {}
}

let traced: any Instrument = NoOpTracer()
let crumbsTracer = CrumbsTracer(wrapping: NoOpTracer(), client: client)
let tracedWithIDs: any Instrument = IDTracer()
let crumbsTracerOverIDs = CrumbsTracer(wrapping: IDTracer(), client: client)

// Check: a request through CrumbsTracer is in the ledger while open, under its route once
// renamed, with the path; and gone once ended.
do {
  let span = crumbsTracer.startSpan("probe", context: .topLevel, ofKind: .server)
  span.updateAttributes { $0["url.path"] = path }
  span.operationName = route
  let open = client.ring.snapshot().ledger?.open ?? []
  guard open.count == 1, open[0].name == route, open[0].attributes.contains(where: { $0.value == path })
  else {
    print("TracerFigures: CrumbsTracer's span is not in the ledger as it should be; figures would lie")
    exit(1)
  }
  span.end()
  guard client.ring.snapshot().ledger?.open.isEmpty == true else {
    print("TracerFigures: the span's operation stayed open; figures would lie")
    exit(1)
  }
}
// And over IDTracer: the entry has the span's own ids (read from where the tracer keeps them
// once the first spans have taught CrumbsTracer where that is).
for _ in 0..<100 { request(crumbsTracerOverIDs, context: .topLevel) }
do {
  let span = crumbsTracerOverIDs.startSpan("probe", context: .topLevel, ofKind: .server)
  let ids = span.context[IDTracer.Key.self]
  let open = client.ring.snapshot().ledger?.open ?? []
  guard open.count == 1, let ids, open[0].trace?.spanID == IDTracer.hex(ids.spanID) else {
    print("TracerFigures: CrumbsTracer over IDTracer does not read its ids; figures would lie")
    exit(1)
  }
  span.end()
}

let floor: LedgerFloor
do {
  floor = try LedgerFloor()
} catch {
  print("TracerFigures: \(error)")
  exit(1)
}

enum Kind: String, CaseIterable {
  case floor = "C floor (one ledger entry claimed, filled, freed)"
  case traced = "traced: NoOpTracer"
  case tracer = "tracer: CrumbsTracer wrapping NoOpTracer"
  case tracedWithIDs = "traced with ids: IDTracer (ids as swift-otel's)"
  case tracerOverIDs = "tracer over ids: CrumbsTracer wrapping IDTracer"
}

func run(_ kind: Kind, count: Int) {
  switch kind {
  case .floor: floor.run(name: route, count: count)
  case .traced: for _ in 0..<count { request(traced, context: .topLevel) }
  case .tracer: for _ in 0..<count { request(crumbsTracer, context: .topLevel) }
  case .tracedWithIDs: for _ in 0..<count { request(tracedWithIDs, context: .topLevel) }
  case .tracerOverIDs: for _ in 0..<count { request(crumbsTracerOverIDs, context: .topLevel) }
  }
}
for kind in Kind.allCases { run(kind, count: 20_000) }

var samples: [Kind: [Double]] = [:]
for _ in 0..<blocks {
  for _ in 0..<roundsPerBlock {
    for kind in Kind.allCases {
      let start = threadCPUNanoseconds()
      run(kind, count: chunk)
      samples[kind, default: []].append(Double(threadCPUNanoseconds() - start) / Double(chunk))
    }
  }
}

func mallocs(_ kind: Kind) -> Int {
  MallocInterposerSwift.initialize()
  MallocInterposerSwift.hook()
  run(kind, count: 100_000)
  MallocInterposerSwift.unhook()
  return MallocInterposerSwift.getStatistics().mallocCount
}
let countingWorks = {
  MallocInterposerSwift.initialize()
  MallocInterposerSwift.hook()
  _ = Array(repeating: path, count: Int(getpid() % 2) + 8)
  MallocInterposerSwift.unhook()
  return MallocInterposerSwift.getStatistics().mallocCount > 0
}()
let tracedMallocs = countingWorks ? mallocs(.traced) : 0
let tracerMallocs = countingWorks ? mallocs(.tracer) : 0

// Two threads at once (a server's event loops): what each request costs each thread when both
// trace, wall-clock per request of the middle of three chunks (TwoThreadRunner.runTimed).
var twoThreads: [Kind: [Double]] = [:]
for (kind, instrument) in [(Kind.traced, traced), (.tracer, crumbsTracer as any Instrument)] {
  let runner = TwoThreadRunner(work: { count in
    for _ in 0..<count { request(instrument, context: .topLevel) }
  })
  for _ in 0..<(blocks * roundsPerBlock / 3) {
    let (mine, theirs) = runner.runTimed(chunk: chunk)
    twoThreads[kind, default: []] += [mine, theirs]
  }
  runner.stop()
}

let medians = samples.mapValues(median)
print(
  "== One traced request's span (TracingMiddleware's calls), medians of \(blocks * roundsPerBlock) chunks of \(chunk) =="
)
for kind in Kind.allCases {
  print("  \(kind.rawValue.padding(toLength: 52, withPad: " ", startingAt: 0)) \(format(medians[kind]!)) ns")
}
let extra = medians[.tracer]! - medians[.traced]!
print("  CrumbsTracer adds \(format(extra)) ns a request (\(format(extra / medians[.floor]!))× the C floor)")
let extraOverIDs = medians[.tracerOverIDs]! - medians[.tracedWithIDs]!
print(
  "  over a tracer that gives ids, CrumbsTracer adds \(format(extraOverIDs)) ns a request (\(format(extraOverIDs / medians[.floor]!))× the C floor)"
)
if countingWorks {
  print(
    "  mallocs a request: traced \(format(Double(tracedMallocs) / 100_000)), tracer \(format(Double(tracerMallocs) / 100_000))"
  )
} else {
  print("  mallocs not counted: preload libMallocInterposerSwift.so (make bench does)")
}
let tracedTwo = median(twoThreads[.traced]!)
let tracerTwo = median(twoThreads[.tracer]!)
print(
  "  two threads at once, wall-clock a request: traced \(format(tracedTwo)) ns, tracer \(format(tracerTwo)) ns: CrumbsTracer adds \(format(tracerTwo - tracedTwo)) ns"
)
BenchSummary.record("CrumbsTracer's extra time a request (span calls only)", "\(format(extra)) ns")
BenchSummary.record(
  "CrumbsTracer's extra time a request over a tracer that gives ids", "\(format(extraOverIDs)) ns")

client.close()
if directory.contains("/crumbs-tracer-figures-") { _ = system("rm -rf '\(directory)'") }
