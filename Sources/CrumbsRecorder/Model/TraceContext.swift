// TraceContext.swift — the W3C trace and span a breadcrumb or report was made in.
//
// Where it lives: a breadcrumb made inside a traced operation carries it as three reserved
// attributes in its ring slot, named as swift-otel's logging metadata provider names them
// (`trace_id`, `span_id`, `trace_flags`), so a swift-log event with that provider's metadata
// carries it with no extra work, and a breadcrumb without them costs nothing more. Readers
// (reports, OTLP records) take it back out with `TraceContext(attributes:)`, which accepts only
// well-formed ids. A report names its own in `CrashReport.trace`.
//
// Entry points: TraceContext(traceID:spanID:flags:) or TraceContext(traceparent:) → attributes;
// TraceContext(attributes:) on the way back. Not signal-safe (it allocates).

/// A W3C trace context (https://www.w3.org/TR/trace-context/): trace id, span id and flags.
public struct TraceContext: Sendable, Equatable, Hashable, Codable {
  /// 32 lowercase hex digits, not all zero.
  public var traceID: String
  /// 16 lowercase hex digits, not all zero.
  public var spanID: String
  /// The trace flags (bit 0: sampled).
  public var flags: UInt8

  /// The reserved breadcrumb attribute keys (swift-otel's logging metadata keys).
  public static let traceIDKey = "trace_id"
  public static let spanIDKey = "span_id"
  public static let flagsKey = "trace_flags"

  /// Nil unless both ids are hex of the right length (either case; kept lowercase) and not all
  /// zero, as W3C requires.
  public init?(traceID: String, spanID: String, flags: UInt8 = 0) {
    guard let trace = Self.normalizedHex(traceID, digits: 32),
      let span = Self.normalizedHex(spanID, digits: 16)
    else { return nil }
    self.traceID = trace
    self.spanID = span
    self.flags = flags
  }

  /// A `traceparent` header value: `00-<trace id>-<span id>-<flags>` (later versions' extra
  /// fields are ignored, as W3C says); nil when malformed.
  public init?(traceparent: String) {
    guard let ids = TraceIDs(traceparent: traceparent) else { return nil }
    self = ids.context
  }

  /// The context named by a breadcrumb's or report's attributes (the reserved keys); nil when
  /// they are missing or malformed. `trace_flags` is decimal, as swift-otel writes it, or two
  /// hex digits; missing or malformed flags read as 0.
  public init?(attributes lookup: (String) -> String?) {
    guard let trace = lookup(Self.traceIDKey), let span = lookup(Self.spanIDKey) else { return nil }
    var flags: UInt8 = 0
    if let text = lookup(Self.flagsKey) {
      flags = UInt8(text) ?? (text.utf8.count == 2 ? UInt8(text, radix: 16) : nil) ?? 0
    }
    self.init(traceID: trace, spanID: span, flags: flags)
  }

  /// `init(attributes:)` over a dictionary.
  public init?(attributes: [String: String]) { self.init(attributes: { attributes[$0] }) }

  /// The reserved attributes to record it with.
  public var attributes: [(key: String, value: String)] {
    [(Self.traceIDKey, traceID), (Self.spanIDKey, spanID), (Self.flagsKey, String(flags))]
  }

  /// `00-<trace id>-<span id>-<flags>`.
  public var traceparent: String {
    "00-\(traceID)-\(spanID)-" + (flags < 16 ? "0" : "") + String(flags, radix: 16)
  }

  /// The 16 bytes of the trace id (OTLP `trace_id`).
  public var traceIDBytes: [UInt8] { Self.bytes(traceID) }
  /// The 8 bytes of the span id (OTLP `span_id`).
  public var spanIDBytes: [UInt8] { Self.bytes(spanID) }

  /// Whether `key` is one of the reserved attribute keys.
  public static func isReserved(_ key: String) -> Bool {
    key == traceIDKey || key == spanIDKey || key == flagsKey
  }

  private static func normalizedHex(_ text: String, digits: Int) -> String? {
    guard text.utf8.count == digits else { return nil }
    var result = ""
    var nonZero = false
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
        result.unicodeScalars.append(Unicode.Scalar(byte))
      case UInt8(ascii: "A")...UInt8(ascii: "F"):
        result.unicodeScalars.append(Unicode.Scalar(byte + 32))
      default: return nil
      }
      if byte != UInt8(ascii: "0") { nonZero = true }
    }
    return nonZero ? result : nil
  }

  private static func bytes(_ hex: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var high: UInt8?
    for byte in hex.utf8 {
      let digit = byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : byte - UInt8(ascii: "a") + 10
      if let first = high {
        bytes.append(first << 4 | digit)
        high = nil
      } else {
        high = digit
      }
    }
    return bytes
  }
}
