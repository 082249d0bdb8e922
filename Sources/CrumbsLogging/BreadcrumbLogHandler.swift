// BreadcrumbLogHandler.swift — swift-log events become `log` breadcrumbs.
//
// Entry points, in call order:
//   BreadcrumbLogHandler(label:)                  or LoggingSystem.bootstrap(BreadcrumbLogHandler.init)
//                                                 or inside MultiplexLogHandler next to a printing handler
//   log(event:)  (swift-log calls it)             level mapped, ring filters checked first, then one
//                                                 append: message, `category` = label, the trace
//                                                 (`trace_id`, `span_id`, `trace_flags`, as
//                                                 swift-otel's metadata provider sets them) right
//                                                 after it, so the slot's attribute limit never cuts
//                                                 it, then metadata (handler < provider < event,
//                                                 flattened to strings), `error`, and optionally
//                                                 `source`/`file`/`line`
//
// Cost: no lock, no system call, no formatting of a time stamp; the handler's own metadata is
// flattened once when it is set, not per event; `.string` values are copied straight from their
// storage into the slot. What allocates is what the event brings: a metadata provider's
// dictionary, `.stringConvertible` descriptions longer than 15 bytes, nested dictionaries/arrays.
// Not signal-safe (swift-log is not).

import CrumbsRecorder
import Logging

/// A swift-log `LogHandler` that records every event as a `log` breadcrumb in the ring.
///
/// Levels: trace/debug → debug, info/notice → info, warning → warning, error → error,
/// critical → fatal. The logger's label is the `category` attribute; metadata becomes attributes
/// (nested dictionaries as `key.sub`, arrays as `[a, b]`); a slot keeps at most 16 attributes and
/// cuts what does not fit (the breadcrumb is then flagged truncated). The trace metadata a
/// tracing metadata provider adds (`trace_id`, `span_id`, `trace_flags`: swift-otel's
/// `Logger.MetadataProvider.otel`) is written first, so a breadcrumb made inside a span always
/// names it, and a crash report can name the crashing thread's last span.
///
/// Use it alone (`LoggingSystem.bootstrap { BreadcrumbLogHandler(label: $0) }`) or with another
/// handler: `MultiplexLogHandler([StreamLogHandler.standardError(label: label),
/// BreadcrumbLogHandler(label: label)])`.
public struct BreadcrumbLogHandler: LogHandler {
  /// The logger's label, recorded as `category`.
  public let label: String
  /// Where breadcrumbs go (the process-wide ring by default).
  public var target: BreadcrumbTarget
  /// Record `source`, `file` and `line` too (off by default: they cost slot space).
  public var includesSourceLocation: Bool
  public var logLevel: Logger.Level
  public var metadataProvider: Logger.MetadataProvider?

  public var metadata: Logger.Metadata {
    didSet {
      flattenedMetadata = Self.flatten(metadata)
      hasTraceMetadata = flattenedMetadata.contains { TraceContext.isReserved($0.key) }
    }
  }

  /// `metadata` flattened to string pairs, kept so events do not redo it.
  private var flattenedMetadata: [(key: String, value: String)] = []
  /// Whether `metadata` holds a trace key (set with it, so events without one skip the search).
  private var hasTraceMetadata = false

  /// A handler for `label` writing to `target`, recording events of `logLevel` and above.
  public init(
    label: String, target: BreadcrumbTarget = .installedRing, logLevel: Logger.Level = .info,
    metadataProvider: Logger.MetadataProvider? = nil, includesSourceLocation: Bool = false
  ) {
    self.label = label
    self.target = target
    self.logLevel = logLevel
    self.metadataProvider = metadataProvider
    self.includesSourceLocation = includesSourceLocation
    self.metadata = [:]
  }

  public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  /// The breadcrumb level of a swift-log level.
  public static func breadcrumbLevel(_ level: Logger.Level) -> BreadcrumbLevel {
    switch level {
    case .trace, .debug: .debug
    case .info, .notice: .info
    case .warning: .warning
    case .error: .error
    case .critical: .fatal
    }
  }

  /// The trace keys, in the order written.
  private static let traceKeys = [TraceContext.traceIDKey, TraceContext.spanIDKey, TraceContext.flagsKey]

  public func log(event: LogEvent) {
    let level = Self.breadcrumbLevel(event.level)
    guard target.accepts(level: level, type: .log) else { return }
    let eventMetadata = event.metadata
    let provided = metadataProvider?.get()
    // The trace, event over provider over handler; looked up only where there is metadata.
    var trace: [(key: String, value: String)] = []
    if eventMetadata != nil || provided != nil || hasTraceMetadata {
      for key in Self.traceKeys {
        if let value = eventMetadata?[key] ?? provided?[key] {
          trace.append((key, Self.text(value)))
        } else if hasTraceMetadata, let pair = flattenedMetadata.first(where: { $0.key == key }) {
          trace.append(pair)
        }
      }
    }
    let traced = !trace.isEmpty
    var attributeBytes = 10 + label.utf8.count
    for pair in trace { attributeBytes &+= 2 &+ pair.key.utf8.count &+ pair.value.utf8.count }
    for pair in flattenedMetadata { attributeBytes &+= 2 &+ pair.key.utf8.count &+ pair.value.utf8.count }
    if let eventMetadata {
      for (key, value) in eventMetadata {
        attributeBytes &+= 2 &+ key.utf8.count &+ Self.estimatedCount(value)
      }
    }
    target.compose(event.message.description, level: level, type: .log, attributeBytes: attributeBytes) {
      writer in
      writer.add("category", label)
      for pair in trace { writer.add(pair.key, pair.value) }
      for pair in flattenedMetadata
      where eventMetadata?[pair.key] == nil && provided?[pair.key] == nil
        && !(traced && TraceContext.isReserved(pair.key))
      {
        writer.add(pair.key, pair.value)
      }
      if let provided {
        for (key, value) in provided
        where eventMetadata?[key] == nil && !(traced && TraceContext.isReserved(key)) {
          Self.add(key, value, to: &writer)
        }
      }
      if let eventMetadata {
        for (key, value) in eventMetadata where !(traced && TraceContext.isReserved(key)) {
          Self.add(key, value, to: &writer)
        }
      }
      if let error = event.error { writer.add("error", String(describing: error)) }
      if includesSourceLocation {
        writer.add("source", event.source)
        writer.add("file", event.file)
        writer.add("line", String(event.line))
      }
    }
  }

  /// Adds one metadata value, flattening nested ones.
  private static func add(
    _ key: String, _ value: Logger.Metadata.Value, to writer: inout BreadcrumbAttributeWriter
  ) {
    switch value {
    case .string(let text): writer.add(key, text)
    case .stringConvertible(let convertible): writer.add(key, convertible.description)
    case .dictionary, .array:
      for pair in flatten([key: value]) { writer.add(pair.key, pair.value) }
    }
  }

  /// A metadata value as one string (nested values flattened as `flatten` does).
  private static func text(_ value: Logger.Metadata.Value) -> String {
    switch value {
    case .string(let text): text
    case .stringConvertible(let convertible): convertible.description
    case .dictionary, .array: flatten(["": value]).map(\.value).joined(separator: ", ")
    }
  }

  private static func estimatedCount(_ value: Logger.Metadata.Value) -> Int {
    if case .string(let text) = value { return text.utf8.count }
    return 16
  }

  /// Metadata as string pairs: dictionaries become `key.sub`, arrays `[a, b]`; sorted by key.
  static func flatten(_ metadata: Logger.Metadata) -> [(key: String, value: String)] {
    var pairs: [(key: String, value: String)] = []
    func walk(_ prefix: String, _ value: Logger.Metadata.Value) {
      switch value {
      case .string(let text): pairs.append((prefix, text))
      case .stringConvertible(let convertible): pairs.append((prefix, convertible.description))
      case .dictionary(let nested):
        for (key, inner) in nested { walk(prefix + "." + key, inner) }
      case .array(let items): pairs.append((prefix, "[" + items.map(text).joined(separator: ", ") + "]"))
      }
    }
    func text(_ value: Logger.Metadata.Value) -> String {
      switch value {
      case .string(let text): text
      case .stringConvertible(let convertible): convertible.description
      case .dictionary(let nested):
        "[" + nested.sorted { $0.key < $1.key }.map { "\($0.key): \(text($0.value))" }.joined(separator: ", ")
          + "]"
      case .array(let items): "[" + items.map(text).joined(separator: ", ") + "]"
      }
    }
    for (key, value) in metadata { walk(key, value) }
    return pairs.sorted { $0.key < $1.key }
  }
}
