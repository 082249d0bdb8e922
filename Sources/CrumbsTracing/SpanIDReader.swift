// SpanIDReader.swift — the ids of the span current in a context, as the wrapped tracer
// propagates them: what CrumbsTracer reads for every span it records (its own ids and its
// parent's), without asking the tracer to build a header each time once it has learned where
// the tracer keeps them.
//
// The one public way to ask a tracer for a span's ids is `inject`, and swift-otel's builds a
// W3C `traceparent` string for it: six allocations a span, and most of what CrumbsTracer cost
// a request over swift-otel (docs/tracing.md). A tracer keeps a span's ids in its context, as
// the value of a key of its own; swift-otel's (`OTelSpanContext`, not public) holds them as
// bytes, in the header's order. So the reader learns where they are, and checks it:
//
//   learn   (the first spans) inject, parse the header (TraceIDs(_:instrument:)), and look for
//           its trace id's 16 bytes and its span id's 8, each exactly once, in the bytes of one
//           of the context's values, the flags byte right after the span id; keep that
//           value's key type, its type and the three offsets.
//   read    (every later span) the learned key's value, of the learned type, its ids copied
//           from its bytes at the offsets: no call into the tracer, nothing allocated.
//   check   the first 64 reads, then one in 1,024 (counted: not judged by the ids read), are
//           compared with the injected header. Any difference, and the reader asks the
//           tracer by inject from then on (`usesLayout` false), as it does for a tracer that
//           keeps its ids another way (a string, an object, little-endian words): never learned.
//
// Safe whatever the tracer keeps: only a value of the learned type is read, within its size
// (checked when learned), and as plain bytes: nothing in it is ever loaded as a reference. A
// context without the learned key, or with another type under it, is asked by inject.
//
// Entry point: SpanIDReader.ids(in:of:). Not signal-safe.

import Crumbs
import Instrumentation
import ServiceContextModule
import Synchronization

/// Reads the ids of the span in a context, learning where the instrument keeps them.
final class SpanIDReader: Sendable {
  /// Where the ids are: in the value of which key, of which type (their metadata's addresses,
  /// `ObjectIdentifier`'s bits), at which byte offsets.
  struct Layout: Equatable {
    var key: UInt
    var valueType: UInt
    var traceOffset: Int
    var spanOffset: Int
    var flagsOffset: Int { spanOffset + 8 }
  }

  enum Status: UInt8 {
    case learning, learned, givenUp
  }

  /// Spans whose contexts are searched for the ids before the reader gives up learning.
  static let learningAttempts = 8
  /// Reads compared with inject before only the sampled ones are.
  static let firstChecks = 64
  /// Later, a read is checked when the count of reads has these low bits 0 (one in 1,024).
  static let checkMask = 0x3FF

  /// The status, published (releasing) after the layout it announces.
  private let status = Atomic<UInt8>(Status.learning.rawValue)
  private let layoutKey = Atomic<UInt>(0)
  private let layoutValueType = Atomic<UInt>(0)
  /// The trace id's offset in the low 16 bits, the span id's above them.
  private let layoutOffsets = Atomic<UInt>(0)
  /// Reads from the layout so far: which are checked.
  private let reads = Atomic<Int>(0)
  /// Failed attempts to learn; taken only while learning.
  private let learning = Mutex<Int>(0)

  /// Whether ids are read from the learned layout (false while learning and once given up).
  var usesLayout: Bool { status.load(ordering: .acquiring) == Status.learned.rawValue }

  /// The learned layout, if any.
  var layout: Layout? {
    guard usesLayout else { return nil }
    let offsets = layoutOffsets.load(ordering: .relaxed)
    return Layout(
      key: layoutKey.load(ordering: .relaxed), valueType: layoutValueType.load(ordering: .relaxed),
      traceOffset: Int(offsets & 0xFFFF), spanOffset: Int(offsets >> 16))
  }

  /// The ids of the span in `context`, as `instrument` propagates them; nil when it holds none.
  func ids(in context: ServiceContext, of instrument: some Instrument) -> TraceIDs? {
    // An instrument keeps its span in the context: an empty one holds none.
    guard !context.isEmpty else { return nil }
    switch Status(rawValue: status.load(ordering: .acquiring)) {
    case .learned:
      guard let layout, let ids = Self.read(context, at: layout) else {
        return TraceIDs(context, instrument: instrument)
      }
      // Counted, not judged by the ids read: ids read from a wrong place would decide wrongly.
      let read = reads.wrappingAdd(1, ordering: .relaxed).oldValue
      guard read < Self.firstChecks || read & Self.checkMask == 0 else { return ids }
      return checked(ids, in: context, of: instrument)
    case .learning:
      return learn(from: context, of: instrument)
    default:
      return TraceIDs(context, instrument: instrument)
    }
  }

  /// `ids` compared with what `instrument` injects: the injected ids, and the reader stops
  /// reading the layout when they differ.
  private func checked(_ ids: TraceIDs, in context: ServiceContext, of instrument: some Instrument)
    -> TraceIDs?
  {
    let injected = TraceIDs(context, instrument: instrument)
    if injected != ids { status.store(Status.givenUp.rawValue, ordering: .releasing) }
    return injected
  }

  /// The injected ids, and the layout they are found at in the context's values, learned when
  /// found.
  private func learn(from context: ServiceContext, of instrument: some Instrument) -> TraceIDs? {
    guard let ids = TraceIDs(context, instrument: instrument) else { return nil }
    var found: Layout?
    context.forEach { key, value in
      guard found == nil, let offsets = Self.offsets(of: ids, in: value) else { return }
      found = Layout(
        key: Self.bits(key.keyType), valueType: Self.bits(type(of: value)),
        traceOffset: offsets.trace, spanOffset: offsets.span)
    }
    learning.withLock { attempts in
      guard status.load(ordering: .relaxed) == Status.learning.rawValue else { return }
      guard let found else {
        attempts += 1
        if attempts >= Self.learningAttempts { status.store(Status.givenUp.rawValue, ordering: .releasing) }
        return
      }
      layoutKey.store(found.key, ordering: .relaxed)
      layoutValueType.store(found.valueType, ordering: .relaxed)
      layoutOffsets.store(UInt(found.traceOffset) | UInt(found.spanOffset) << 16, ordering: .relaxed)
      status.store(Status.learned.rawValue, ordering: .releasing)
    }
    return ids
  }

  /// The ids in `context` at `layout`: nil when no value of its type is under its key.
  static func read(_ context: ServiceContext, at layout: Layout) -> TraceIDs? {
    var ids: TraceIDs?
    context.forEach { key, value in
      guard ids == nil, bits(key.keyType) == layout.key, bits(type(of: value)) == layout.valueType
      else { return }
      ids = read(value, at: layout)
    }
    return ids
  }

  /// The ids in the bytes of `value` (of the layout's type, so at least as large as the layout
  /// needs: checked when it was learned).
  static func read<Value>(_ value: Value, at layout: Layout) -> TraceIDs? {
    withUnsafeBytes(of: value) { bytes in
      guard layout.flagsOffset < bytes.count else { return nil }
      return TraceIDs(
        traceHigh: word(bytes, at: layout.traceOffset), traceLow: word(bytes, at: layout.traceOffset + 8),
        spanID: word(bytes, at: layout.spanOffset), flags: bytes[layout.flagsOffset])
    }
  }

  /// Where `ids` are in the bytes of `value`: the trace id's 16 bytes and the span id's 8, in
  /// the header's order, each found exactly once, and the flags byte right after the span id.
  static func offsets<Value>(of ids: TraceIDs, in value: Value) -> (trace: Int, span: Int)? {
    withUnsafeBytes(of: value) { bytes in
      let trace = occurrences(in: bytes, length: 16) {
        word(bytes, at: $0) == ids.traceHigh && word(bytes, at: $0 + 8) == ids.traceLow
      }
      let span = occurrences(in: bytes, length: 8) { word(bytes, at: $0) == ids.spanID }
      // The trace offset is kept in 16 bits (layoutOffsets).
      guard trace.count == 1, span.count == 1, span[0] + 8 < bytes.count, bytes[span[0] + 8] == ids.flags,
        trace[0] <= Int(UInt16.max)
      else { return nil }
      return (trace[0], span[0])
    }
  }

  /// The offsets at which `length` bytes of `bytes` satisfy `matches`.
  private static func occurrences(
    in bytes: UnsafeRawBufferPointer, length: Int, where matches: (Int) -> Bool
  ) -> [Int] {
    guard bytes.count >= length else { return [] }
    return (0...(bytes.count - length)).filter(matches)
  }

  /// Eight bytes at `offset`, the first the most significant (a hex id's order).
  private static func word(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
    UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
  }

  /// A type's identity as a word.
  private static func bits(_ type: any Any.Type) -> UInt { UInt(bitPattern: ObjectIdentifier(type)) }
}
