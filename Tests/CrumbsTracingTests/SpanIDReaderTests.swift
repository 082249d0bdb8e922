// SpanIDReaderTests.swift — CrumbsTracer reads its spans' ids from where the wrapped tracer
// keeps them once it has learned and checked that place (as swift-otel keeps them: the header's
// bytes in a struct under its own key), and asks by inject whenever it cannot trust it: a
// tracer that keeps text, a context without the learned key, a tracer whose layout changed.

import Synchronization
import Testing
import Tracing

@testable import Crumbs
@testable import CrumbsTracing

/// A span's ids as swift-otel's OTelSpanContext keeps them: the trace id's and the span id's
/// bytes in the header's order, the flags after them, beside fields that hold references. The
/// ids sit in `first`, or in `second` once the tracer has `moved` them.
struct ByteSpanContext: Sendable {
  struct Slot: Sendable {
    var traceHigh: UInt64 = 0
    var traceLow: UInt64 = 0
    var spanID: UInt64 = 0
    var flags: UInt8 = 0

    init() {}

    init(_ ids: TraceIDs) {
      traceHigh = ids.traceHigh.bigEndian
      traceLow = ids.traceLow.bigEndian
      spanID = ids.spanID.bigEndian
      flags = ids.flags
    }
  }

  var state: [String] = ["vendor=1"]
  var first = Slot()
  var parentSpanID: UInt64? = nil
  var second = Slot()
  var ids: TraceIDs
}

private enum ByteSpanKey: ServiceContextKey {
  typealias Value = ByteSpanContext
  static var nameOverride: String? { "byte-span-context" }
}

/// A remote parent kept as text, under another key.
private enum RemoteParentKey: ServiceContextKey {
  typealias Value = String
}

/// A tracer keeping its spans' ids in ByteSpanContext and injecting them as `traceparent`,
/// counting the injects. Once `moved`, new spans keep their ids in the second slot, and a stale
/// copy of other ids in the first.
final class ByteTracer: Tracer, Sendable {
  let injects = Atomic<Int>(0)
  let moved = Atomic<Bool>(false)
  let counter = Atomic<UInt64>(0)
  static let stale = TraceIDs(traceHigh: 0x1111, traceLow: 0x2222, spanID: 0x3333, flags: 1)!

  /// A context holding a span with `ids`, kept as the tracer keeps them now.
  func context(_ ids: TraceIDs) -> ServiceContext {
    var value = ByteSpanContext(ids: ids)
    if moved.load(ordering: .relaxed) {
      value.first = .init(Self.stale)
      value.second = .init(ids)
    } else {
      value.first = .init(ids)
    }
    var context = ServiceContext.topLevel
    context[ByteSpanKey.self] = value
    return context
  }

  /// New ids.
  func nextIDs() -> TraceIDs {
    let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
    return TraceIDs(traceHigh: 0xabcd, traceLow: number, spanID: number << 10 | 1, flags: 1)!
  }

  func startSpan<Instant: TracerInstant>(
    _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
    at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
  ) -> RecordingSpan {
    RecordingSpan(name: operationName, kind: kind, context: self.context(nextIDs()))
  }

  func forceFlush() {}

  func inject<Carrier, Inject: Injector>(
    _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
  ) where Inject.Carrier == Carrier {
    injects.wrappingAdd(1, ordering: .relaxed)
    if let ids = context[ByteSpanKey.self]?.ids {
      injector.inject("00-\(ids.context.traceID)-\(ids.spanIDHex)-01", forKey: "traceparent", into: &carrier)
    } else if let header = context[RemoteParentKey.self] {
      injector.inject(header, forKey: "traceparent", into: &carrier)
    }
  }

  func extract<Carrier, Extract: Extractor>(
    _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
  ) where Extract.Carrier == Carrier {}
}

@Suite struct SpanIDReaderTests {
  @Test func theLayoutIsLearnedCheckedAndThenReadWithNoInject() throws {
    let tracer = ByteTracer()
    let reader = SpanIDReader()
    for _ in 0..<300 {
      let ids = tracer.nextIDs()
      #expect(reader.ids(in: tracer.context(ids), of: tracer) == ids)
    }
    #expect(reader.usesLayout)
    let layout = try #require(reader.layout)
    #expect(layout.traceOffset == MemoryLayout<ByteSpanContext>.offset(of: \.first.traceHigh))
    #expect(layout.spanOffset == MemoryLayout<ByteSpanContext>.offset(of: \.first.spanID))
    // One inject to learn, then one for each of the first checks: none for the other 235.
    #expect(tracer.injects.load(ordering: .relaxed) == 1 + SpanIDReader.firstChecks)
    // Then one read in 1,024 is checked still.
    for _ in 0..<1024 { _ = reader.ids(in: tracer.context(tracer.nextIDs()), of: tracer) }
    #expect(tracer.injects.load(ordering: .relaxed) == 2 + SpanIDReader.firstChecks)
  }

  @Test func crumbsTracerStopsAskingTheWrappedTracerForEverySpansIDs() throws {
    try withClient { client in
      let wrapped = ByteTracer()
      let tracer = CrumbsTracer(wrapping: wrapped, client: client)
      let parent = wrapped.context(wrapped.nextIDs())
      for _ in 0..<500 {
        let span = tracer.startSpan("GET /hello", context: parent, ofKind: .server)
        let ids = try #require(span.context[ByteSpanKey.self]?.ids)
        let entry = try #require(span.operation?.contents)
        #expect(entry.trace == ids.context.withoutFlags)
        #expect(entry.parentSpanID == parent[ByteSpanKey.self]?.ids.spanIDHex)
        span.end()
      }
      // Asking by inject, it took two a span (its own ids, its parent's): 1,000.
      #expect(wrapped.injects.load(ordering: .relaxed) <= 2 + 2 * SpanIDReader.firstChecks)
    }
  }

  @Test func aTracerThatMovesItsIDsIsCaughtByACheckAndAskedFromThenOn() {
    let tracer = ByteTracer()
    let reader = SpanIDReader()
    for _ in 0..<100 { _ = reader.ids(in: tracer.context(tracer.nextIDs()), of: tracer) }
    #expect(reader.usesLayout)
    tracer.moved.store(true, ordering: .relaxed)
    // Between two checks a move goes unseen (the stale ids are read); the next check sees it,
    // though the stale ids never change.
    var stale = 0
    for _ in 0..<1024 where reader.usesLayout {
      let ids = tracer.nextIDs()
      if reader.ids(in: tracer.context(ids), of: tracer) != ids { stale += 1 }
    }
    #expect(!reader.usesLayout)
    #expect(stale > 0 && stale < 1024)
    for _ in 0..<20 {
      let ids = tracer.nextIDs()
      #expect(reader.ids(in: tracer.context(ids), of: tracer) == ids)
    }
  }

  @Test func idsKeptAsTextAreNeverLearnedAndAlwaysInjected() {
    let tracer = RecordingTracer()
    let reader = SpanIDReader()
    for _ in 0..<20 {
      let span = tracer.startSpan("job", context: .topLevel, ofKind: .server)
      #expect(reader.ids(in: span.context, of: tracer)?.context.withoutFlags == span.ids?.withoutFlags)
    }
    #expect(!reader.usesLayout && reader.layout == nil)
  }

  @Test func aContextWithoutTheLearnedKeyIsAskedByInject() {
    let tracer = ByteTracer()
    let reader = SpanIDReader()
    for _ in 0..<3 { _ = reader.ids(in: tracer.context(tracer.nextIDs()), of: tracer) }
    #expect(reader.usesLayout)
    var remote = ServiceContext.topLevel
    remote[RemoteParentKey.self] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    let before = tracer.injects.load(ordering: .relaxed)
    #expect(reader.ids(in: remote, of: tracer)?.spanIDHex == "00f067aa0ba902b7")
    #expect(tracer.injects.load(ordering: .relaxed) == before + 1)
    #expect(reader.ids(in: .topLevel, of: tracer) == nil, "an empty context holds no span")
  }
}

extension TraceContext {
  /// The same ids with no flags: the ledger keeps none.
  var withoutFlags: TraceContext { TraceContext(traceID: traceID, spanID: spanID)! }
}
