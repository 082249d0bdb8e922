// OpenOperationsDelivery.swift — the operations (requests, jobs) a death left open, as they leave
// the machine: attributes of the OTLP crash record, and one closing span each over
// `/v1/traces` (Backtrace's annotations and attributes: BacktraceJSON.swift).
//
// Entry points:
//   OTLPDestination.openOperationAttributes(_:)   the crash record's `crumbs.open_operations*`
//   ClosingSpans(report:)                         the spans to close, from a stored report: nil
//                                                 for a report of a process that lived on (hang,
//                                                 non-fatal) or without an operation that has a
//                                                 trace id; Codable, so whoever queues them
//                                                 (the Crumbs directory's outbox) keeps them as is
//   ClosingSpans.batch()                          the OTLPTraceBatch to send
//   ClosingSpans.status(of:)                      the death as a span's status message
//
// The record's shape, for a backend to query: flat scalars for the counts and for the operation
// marked as the crashing thread's (`crumbs.open_operations.crashing.*`: "which request killed
// it"), parallel string arrays of the names and trace ids (oldest first: "which requests died"),
// and the whole list as an array of key/value lists (`crumbs.open_operations`). The arrays and
// the list hold the oldest `maxListedOperations` (a ledger may hold 65536, which would not fit
// in one request); `crumbs.open_operations.omitted` counts the rest, and the count is all of them.
//
// A closing span is the open operation's own span — its trace id, span id, parent, name, kind
// and start — ended at the death (start + its age at the death, the report's own clock), with
// status ERROR and the death as its message ("crashed: SIGSEGV"), the operation's attributes,
// `crumbs.report.id` and `session.id` (the crash record has both), and a link to the crash
// record's trace and span when the record carries one (CrashReport.trace) that is not the span
// itself. Everything comes from the stored report, which the report's redaction already went
// through: names and attribute values leave redacted. Not signal-safe.

import CrumbsRecorder
import CrumbsReports

extension OTLPDestination {
  /// The most operations listed on a crash record (and in Backtrace's annotation), oldest first.
  public static let maxListedOperations = 1024

  /// The report's open operations as crash-record attributes (none when its ring had no ledger).
  public static func openOperationAttributes(_ report: CrashReport) -> [OTLPAttribute] {
    guard let open = report.openOperations else { return [] }
    var attributes = [
      OTLPAttribute("crumbs.open_operations.count", .int(Int64(open.operations.count))),
      OTLPAttribute("crumbs.open_operations.capacity", .int(Int64(open.capacity))),
      OTLPAttribute("crumbs.open_operations.not_held", .int(Int64(clamping: open.notHeld))),
      OTLPAttribute("crumbs.open_operations.unreadable", .int(Int64(open.unreadable))),
    ]
    if let damage = open.damage {
      attributes.append(OTLPAttribute("crumbs.open_operations.damage", .string(damage)))
    }
    if let crashing = open.operations.first(where: { $0.onCrashingThread == true }) {
      attributes.append(OTLPAttribute("crumbs.open_operations.crashing.name", .string(crashing.name)))
      if let trace = crashing.traceID {
        attributes.append(OTLPAttribute("crumbs.open_operations.crashing.trace_id", .string(trace)))
      }
      if let span = crashing.spanID {
        attributes.append(OTLPAttribute("crumbs.open_operations.crashing.span_id", .string(span)))
      }
    }
    guard !open.operations.isEmpty else { return attributes }
    let listed = open.operations.prefix(maxListedOperations)
    if listed.count < open.operations.count {
      attributes.append(
        OTLPAttribute("crumbs.open_operations.omitted", .int(Int64(open.operations.count - listed.count))))
    }
    attributes += [
      OTLPAttribute("crumbs.open_operations.names", .array(listed.map { .string($0.name) })),
      OTLPAttribute("crumbs.open_operations.trace_ids", .array(listed.map { .string($0.traceID ?? "") })),
      OTLPAttribute("crumbs.open_operations", .array(listed.map(operationValue))),
    ]
    return attributes
  }

  static func operationValue(_ operation: CrashReport.OpenOperations.Operation) -> OTLPValue {
    var fields = [
      OTLPAttribute("name", .string(operation.name)), OTLPAttribute("kind", .string(operation.kind)),
    ]
    if let trace = operation.traceID { fields.append(OTLPAttribute("trace_id", .string(trace))) }
    if let span = operation.spanID { fields.append(OTLPAttribute("span_id", .string(span))) }
    if let parent = operation.parentSpanID { fields.append(OTLPAttribute("parent_span_id", .string(parent))) }
    fields += [
      OTLPAttribute("start_time_unix_nano", .int(Int64(clamping: operation.startTimeUnixNano))),
      OTLPAttribute("age_ns", .int(Int64(clamping: operation.ageNanoseconds))),
      OTLPAttribute("thread.id", .int(Int64(operation.threadID))),
    ]
    if let marked = operation.onCrashingThread {
      fields.append(OTLPAttribute("on_crashing_thread", .bool(marked)))
    }
    if !operation.attributes.isEmpty {
      fields.append(
        OTLPAttribute(
          "attributes", .keyValueList(operation.attributes.map { OTLPAttribute($0.key, .string($0.value)) })))
    }
    return .keyValueList(fields)
  }
}

/// The spans a death left open, closed at the death: what `/v1/traces` receives once per report.
public struct ClosingSpans: Codable, Sendable, Equatable {
  public var reportID: String
  public var sessionID: String
  /// The crashed session's resource, as the crash record's (OTLPDestination.resourceStrings).
  public var resource: [String: String]
  /// The death, as every span's status message ("crashed: SIGSEGV").
  public var status: String
  /// The report's exception type (`SIGSEGV`, `OutOfMemory`, …): `crumbs.death.cause`.
  public var cause: String
  /// The crash record's own trace, linked to from each span but its own.
  public var recordTrace: TraceContext?
  /// The operations with a trace id and a span id, oldest first.
  public var operations: [CrashReport.OpenOperations.Operation]

  /// The spans `report` leaves open; nil when there are none to close (see the file comment).
  public init?(report: CrashReport) {
    guard report.kind == .crash || report.kind == .abnormalTermination,
      let open = report.openOperations?.operations
    else { return nil }
    let traced = open.filter { operation in
      guard let trace = operation.traceID, let span = operation.spanID else { return false }
      return TraceContext(traceID: trace, spanID: span) != nil
    }
    guard !traced.isEmpty else { return nil }
    reportID = report.id
    sessionID = report.sessionID
    resource = OTLPDestination.resourceStrings(report)
    status = Self.status(of: report)
    cause = report.exceptionType
    recordTrace = report.trace
    operations = traced
  }

  /// The death in the words of a span's status: `crashed: <signal>` for a crash (the signal
  /// named by the one signal-name table, as the report does), `killed: SIGKILL (out of memory)`
  /// for the OOM killer's kill, and the report's own cause for every other unclean end.
  public static func status(of report: CrashReport) -> String {
    if report.kind == .crash {
      return report.signal.map { "crashed: " + $0.name } ?? "crashed (no crash record)"
    }
    switch UncleanEndCause(exceptionType: report.exceptionType) {
    case .outOfMemory: return "killed: SIGKILL (out of memory)"
    case .shutdownTimeout: return "killed: shutdown did not finish after a stop request"
    case .resourceLimit: return "killed: a resource limit"
    case .machineRestart: return "ended: the machine restarted"
    case .hang, nil:
      return "killed: no crash record and no clean exit (SIGKILL, the OOM killer, or power loss)"
    }
  }

  /// OTLP's span kind for a ledger kind (a job is an internal span).
  static func kind(_ name: String) -> OTLPSpan.Kind {
    switch OpenOperation.Kind(rawValue: name) {
    case .server: .server
    case .consumer: .consumer
    default: .internal
    }
  }

  /// The spans, one per operation, under the crashed session's resource.
  public func batch() -> OTLPTraceBatch {
    let spans = operations.compactMap { operation -> OTLPSpan? in
      guard let trace = operation.traceID, let spanID = operation.spanID,
        let context = TraceContext(traceID: trace, spanID: spanID)
      else { return nil }
      var attributes = operation.attributes.filter { !TraceContext.isReserved($0.key) }.map {
        OTLPAttribute($0.key, .string($0.value))
      }
      attributes += [
        OTLPAttribute("crumbs.report.id", .string(reportID)),
        OTLPAttribute("session.id", .string(sessionID)),
        OTLPAttribute("thread.id", .int(Int64(operation.threadID))),
        OTLPAttribute("crumbs.operation.kind", .string(operation.kind)),
        OTLPAttribute("crumbs.death.cause", .string(cause)),
      ]
      if let marked = operation.onCrashingThread {
        attributes.append(OTLPAttribute("crumbs.operation.on_crashing_thread", .bool(marked)))
      }
      var links: [OTLPSpanLink] = []
      if let record = recordTrace, record.traceID != context.traceID || record.spanID != context.spanID {
        links.append(
          OTLPSpanLink(
            context: record,
            attributes: [
              OTLPAttribute("crumbs.report.id", .string(reportID)),
              OTLPAttribute("crumbs.link", .string("crash_record")),
            ]))
      }
      let (end, overflow) = operation.startTimeUnixNano.addingReportingOverflow(operation.ageNanoseconds)
      return OTLPSpan(
        context: context, parentSpanID: operation.parentSpanID, name: operation.name,
        kind: Self.kind(operation.kind), startTimeUnixNano: operation.startTimeUnixNano,
        endTimeUnixNano: overflow ? .max : end, attributes: attributes, links: links, errorMessage: status)
    }
    return OTLPTraceBatch(
      resource: OTLPDestination.resourceAttributes(resource), scopeName: "crumbs",
      scopeVersion: CrumbsVersion.string, spans: spans)
  }
}
