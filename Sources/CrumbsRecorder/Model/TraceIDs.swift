// TraceIDs.swift — a W3C trace context as numbers: what the ledger stores for an operation and
// what an operation carries while it is open, so that beginning one in a trace (CrumbsTracer's
// every span) parses no hex into strings and makes none. Strings are made only when asked for
// (`context`: a TraceContext).
//
// Entry points: TraceIDs(traceparent:) (a W3C header's bytes, parsed in place), TraceIDs(_:) (a
// TraceContext), TraceIDs.madeUp(in:) (ids no tracer gave) → context, spanIDHex.

import Synchronization

/// A trace id (two words, high first: the hex digits' order), a span id and the trace flags.
/// Ids are never zero (W3C's invalid value).
@usableFromInline package struct TraceIDs: Sendable, Hashable {
  package var traceHigh: UInt64
  package var traceLow: UInt64
  package var spanID: UInt64
  package var flags: UInt8

  /// Nil when the trace id or the span id is zero.
  package init?(traceHigh: UInt64, traceLow: UInt64, spanID: UInt64, flags: UInt8 = 0) {
    guard traceHigh | traceLow != 0, spanID != 0 else { return nil }
    self.traceHigh = traceHigh
    self.traceLow = traceLow
    self.spanID = spanID
    self.flags = flags
  }

  /// The ids of a TraceContext (well-formed by construction).
  @usableFromInline package init?(_ context: TraceContext) {
    var trace = context.traceID.utf8.makeIterator()
    var span = context.spanID.utf8.makeIterator()
    guard let high = Self.word(&trace), let low = Self.word(&trace), let spanID = Self.word(&span) else {
      return nil
    }
    self.init(traceHigh: high, traceLow: low, spanID: spanID, flags: context.flags)
  }

  /// A `traceparent` header value, `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, read
  /// from its bytes with nothing allocated. A later version may carry more fields after a `-`, as
  /// W3C says; version `ff`, zero ids, or anything else malformed give nil.
  package init?(traceparent: String) {
    var text = traceparent
    guard
      let ids = text.withUTF8({ bytes -> TraceIDs? in
        guard bytes.count >= 55, let version = Self.byte(bytes, at: 0), version != 0xff,
          bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
          bytes.count == 55 || (version != 0 && bytes[55] == UInt8(ascii: "-"))
        else { return nil }
        var trace = bytes[3..<35].makeIterator()
        var span = bytes[36..<52].makeIterator()
        guard let high = Self.word(&trace), let low = Self.word(&trace), let spanID = Self.word(&span),
          let flags = Self.byte(bytes, at: 53)
        else { return nil }
        return TraceIDs(traceHigh: high, traceLow: low, spanID: spanID, flags: flags)
      })
    else { return nil }
    self = ids
  }

  /// A span id of 16 hex digits as a number; 0 (no span) for nil or anything else.
  @usableFromInline package static func spanID(hex: String?) -> UInt64 {
    guard let hex, hex.utf8.count == 16 else { return 0 }
    var digits = hex.utf8.makeIterator()
    return word(&digits) ?? 0
  }

  /// The same ids as a TraceContext (lowercase hex strings).
  package var context: TraceContext {
    // Well-formed by construction: 32 and 16 hex digits, not all zero.
    TraceContext(
      traceID: Self.hex(traceHigh) + Self.hex(traceLow), spanID: Self.hex(spanID), flags: flags)!
  }

  /// The span id as 16 lowercase hex digits.
  package var spanIDHex: String { Self.hex(spanID) }

  /// New ids for an operation no tracer gave any: in the trace `trace` when given (a span nested
  /// in another), else a new trace; always a new span id.
  package static func madeUp(in trace: TraceIDs?) -> TraceIDs {
    guard let trace else {
      return TraceIDs(traceHigh: madeUpWord(), traceLow: madeUpWord(), spanID: madeUpWord())!
    }
    return TraceIDs(
      traceHigh: trace.traceHigh, traceLow: trace.traceLow, spanID: madeUpWord(), flags: trace.flags)!
  }

  /// A made-up id word, never zero: unique in this process (SplitMix64's mix of a counter is
  /// one-to-one), random across processes (the counter starts at a value from the system's
  /// generator), and with no system call. Ids need to be unique, not secret: only ours are made
  /// up this way, never a tracer's.
  package static func madeUpWord() -> UInt64 {
    var z = madeUpCounter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    return z == 0 ? 1 : z
  }

  private static let madeUpCounter = Atomic<UInt64>(UInt64.random(in: 1...UInt64.max))

  /// The next sixteen hex digits (either case) as a number; nil when one is not a hex digit or
  /// there are fewer than sixteen.
  package static func word<Bytes: IteratorProtocol<UInt8>>(_ digits: inout Bytes) -> UInt64? {
    var value: UInt64 = 0
    for _ in 0..<16 {
      guard let byte = digits.next(), let digit = [UInt8].hexDigitValue(byte) else { return nil }
      value = value << 4 | UInt64(digit)
    }
    return value
  }

  /// Two hex digits at `offset` as a byte.
  static func byte(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt8? {
    guard let high = [UInt8].hexDigitValue(bytes[offset]), let low = [UInt8].hexDigitValue(bytes[offset + 1])
    else { return nil }
    return high << 4 | low
  }

  /// Sixteen lowercase hex digits of `value`.
  package static func hex(_ value: UInt64) -> String {
    String(unsafeUninitializedCapacity: 16) { buffer in
      for index in 0..<16 {
        let digit = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * index)) & 0xF
        buffer[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
      }
      return 16
    }
  }
}
