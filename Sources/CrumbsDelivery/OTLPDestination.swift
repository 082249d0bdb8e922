// OTLPDestination.swift — a report as OTLP/HTTP logs: `POST {endpoint}/v1/logs`.
//
// A report is one log record (event name `device.crash`; `crumbs.non_fatal` for non-fatal
// reports) carrying the OTel exception conventions (`exception.type`, `exception.message`,
// `exception.stacktrace`), `thread.id`, `thread.name`, `session.id`, the stable report id as
// `crumbs.report.id` (so a backend can dedupe an at-least-once delivery) and the LZ4 trail as
// the bytes attribute `crumbs.breadcrumbs.jsonl.lz4` — only once verified (trailAttachment()):
// a damaged trail is left out and named, with the reason, in `crumbs.attachments.omitted`. `time_unix_nano` is when it happened,
// `observed_time_unix_nano` when it was read. The resource is the report's `resource`.
// With `breadcrumbsAsLogRecords`, each breadcrumb also becomes a record (event name
// `crumbs.breadcrumb`) with its own time and severity, stitched to the crash by `session.id`
// and `crumbs.report.id`.
//
// Entry points: OTLPDestination(endpoint:headers:) → batch(for:stored:) → request(for:stored:).
// Not signal-safe.

import CrumbsRecorder
import CrumbsReports

/// Sends reports to an OTLP/HTTP logs endpoint (an OpenTelemetry Collector, or any backend that
/// speaks OTLP).
public struct OTLPDestination: ReportDestination {
  /// The body encoding: binary protobuf (the OTLP/HTTP default) or OTLP/JSON.
  public enum Encoding: String, Sendable {
    case protobuf, json
  }

  public var name: String
  /// The base URL (`http://collector:4318`); `/v1/logs` is appended unless already there.
  public var endpoint: String
  /// Extra headers, e.g. an `Authorization` header marked secret.
  public var headers: [HTTPHeader]
  public var encoding: Encoding
  /// Also send each breadcrumb as its own log record.
  public var breadcrumbsAsLogRecords: Bool
  /// Other attachments are inlined as bytes attributes (`crumbs.attachment.<name>`) up to this
  /// size; larger or unreadable ones are listed in `crumbs.attachments.omitted` with the reason.
  public var maxAttachmentBytes: Int

  public init(
    endpoint: String, headers: [HTTPHeader] = [], encoding: Encoding = .protobuf,
    breadcrumbsAsLogRecords: Bool = false, maxAttachmentBytes: Int = 7 << 20, name: String = "otlp"
  ) {
    self.name = name
    self.endpoint = endpoint
    self.headers = headers
    self.encoding = encoding
    self.breadcrumbsAsLogRecords = breadcrumbsAsLogRecords
    self.maxAttachmentBytes = maxAttachmentBytes
  }

  /// The event names this mapping uses.
  public static let crashEventName = "device.crash"
  public static let nonFatalEventName = "crumbs.non_fatal"
  public static let breadcrumbEventName = "crumbs.breadcrumb"
  /// The bytes attribute holding the LZ4 trail.
  public static let trailAttributeKey = "crumbs.breadcrumbs.jsonl.lz4"

  /// `{endpoint}/v1/logs`.
  public var logsURL: String {
    if endpoint.hasSuffix("/v1/logs") { return endpoint }
    return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/logs"
  }

  public func request(for report: CrashReport, stored: StoredReport) throws(DeliveryError) -> DeliveryRequest
  {
    request(for: try batch(for: report, stored: stored), id: report.id)
  }

  /// The POST of any batch of records to `logsURL`, in this destination's encoding and headers
  /// (secret headers are redacted from messages by DeliveryRequest). `id` names it in results.
  public func request(for batch: OTLPLogBatch, id: String) -> DeliveryRequest {
    let contentType = encoding == .protobuf ? "application/x-protobuf" : "application/json"
    return DeliveryRequest(
      destination: name, reportID: id, url: logsURL,
      headers: [HTTPHeader("Content-Type", contentType)] + headers,
      body: encoding == .protobuf ? batch.protobuf() : batch.json())
  }

  /// The records for `report` (read from `stored`'s folder for the attachments).
  public func batch(for report: CrashReport, stored: StoredReport) throws(DeliveryError) -> OTLPLogBatch {
    let resource = report.resource.sorted { $0.key < $1.key }.map { OTLPAttribute($0.key, .string($0.value)) }
    var records = [crashRecord(report, stored: stored)]
    if breadcrumbsAsLogRecords {
      // A damaged or missing trail was already named in the crash record's omitted list.
      for entry in (try? stored.trailEntries()) ?? [] {
        records.append(Self.breadcrumbRecord(entry, report: report))
      }
    }
    return OTLPLogBatch(
      resource: resource, scopeName: "crumbs", scopeVersion: CrumbsVersion.string, records: records)
  }

  func crashRecord(_ report: CrashReport, stored: StoredReport) -> OTLPLogRecord {
    let eventName = report.kind == .nonFatal ? Self.nonFatalEventName : Self.crashEventName
    var attributes: [OTLPAttribute] = [
      OTLPAttribute("event.name", .string(eventName)),
      OTLPAttribute("exception.type", .string(report.exceptionType)),
      OTLPAttribute("exception.message", .string(report.exceptionMessage)),
      OTLPAttribute("exception.stacktrace", .string(report.exceptionStacktrace)),
    ]
    if let thread = report.threadID { attributes.append(OTLPAttribute("thread.id", .int(Int64(thread)))) }
    if let thread = report.threadName { attributes.append(OTLPAttribute("thread.name", .string(thread))) }
    attributes += [
      OTLPAttribute("session.id", .string(report.sessionID)),
      OTLPAttribute("crumbs.report.id", .string(report.id)),
      OTLPAttribute("crumbs.report.kind", .string(report.kind.rawValue)),
    ]
    if let reader = report.reportingSessionID {
      attributes.append(OTLPAttribute("crumbs.reporting_session.id", .string(reader)))
    }
    if let signal = report.signal {
      attributes += [
        OTLPAttribute("crumbs.signal.number", .int(Int64(signal.number))),
        OTLPAttribute("crumbs.signal.name", .string(signal.name)),
        OTLPAttribute("crumbs.signal.code", .int(Int64(signal.code))),
        OTLPAttribute("crumbs.signal.code_name", .string(signal.codeName)),
        OTLPAttribute("crumbs.signal.fault_address", .string(signal.faultAddress)),
      ]
      if let sender = signal.senderPID {
        attributes.append(OTLPAttribute("crumbs.signal.sender_pid", .int(Int64(sender))))
      }
    }
    if let duration = report.handlerDurationNanoseconds {
      attributes.append(OTLPAttribute("crumbs.handler_duration_ns", .int(Int64(clamping: duration))))
    }
    if !report.frames.isEmpty {
      attributes.append(OTLPAttribute("crumbs.frames", .array(report.frames.map(Self.frameValue))))
    }
    if !report.modules.isEmpty {
      attributes.append(
        OTLPAttribute(
          "crumbs.modules",
          .array(
            report.modules.map { module in
              var fields = [
                OTLPAttribute("path", .string(module.path)),
                OTLPAttribute("load_address", .string(CrashReport.hex(module.loadBias))),
              ]
              if !module.buildID.isEmpty {
                fields.append(OTLPAttribute("build_id", .string(module.buildIDHex)))
              }
              return .keyValueList(fields)
            })))
    }
    if !report.damage.isEmpty {
      attributes.append(OTLPAttribute("crumbs.damage", .array(report.damage.map { .string($0) })))
    }
    if !report.evidence.isEmpty {
      attributes.append(OTLPAttribute("crumbs.evidence", .array(report.evidence.map { .string($0) })))
    }
    attributes.append(OTLPAttribute("crumbs.breadcrumbs.count", .int(Int64(report.breadcrumbs.count))))
    if let last = report.breadcrumbs.lastMessage {
      attributes.append(OTLPAttribute("crumbs.breadcrumbs.last_message", .string(last)))
    }
    var omitted: [String] = []
    do {
      if let trail = try stored.trailAttachment() {
        attributes.append(OTLPAttribute(Self.trailAttributeKey, .bytes(trail)))
      }
    } catch {
      omitted.append("\(error)")
    }
    for attachment in report.attachments where attachment.name != report.breadcrumbs.attachment {
      if let reason = attachment.omittedReason {
        omitted.append("\(attachment.name): \(reason)")
      } else if attachment.size > maxAttachmentBytes {
        omitted.append(
          "\(attachment.name): \(attachment.size) bytes, over the \(maxAttachmentBytes)-byte limit")
      } else if let bytes = try? stored.readFile(
        attachment.name, limit: maxAttachmentBytes)
      {
        attributes.append(OTLPAttribute("crumbs.attachment." + attachment.name, .bytes(bytes)))
      } else {
        omitted.append("\(attachment.name): unreadable")
      }
    }
    if !omitted.isEmpty {
      attributes.append(OTLPAttribute("crumbs.attachments.omitted", .array(omitted.map { .string($0) })))
    }
    // The app's attributes last; a key this mapping already uses keeps the mapping's value.
    let used = Set(attributes.map(\.key))
    for (key, value) in report.attributes.sorted(by: { $0.key < $1.key }) where !used.contains(key) {
      attributes.append(OTLPAttribute(key, .string(value)))
    }
    return OTLPLogRecord(
      timeUnixNano: report.timeUnixNano, observedTimeUnixNano: report.observedTimeUnixNano,
      severity: report.kind == .nonFatal ? .error : .fatal,
      body: .string(report.exceptionType + ": " + report.exceptionMessage),
      attributes: attributes, eventName: eventName)
  }

  static func frameValue(_ frame: CrashReport.Frame) -> OTLPValue {
    var fields = [
      OTLPAttribute("index", .int(Int64(frame.index))), OTLPAttribute("address", .string(frame.address)),
    ]
    if let module = frame.module { fields.append(OTLPAttribute("module", .string(module))) }
    if let offset = frame.moduleOffset { fields.append(OTLPAttribute("module_offset", .string(offset))) }
    if let buildID = frame.buildID { fields.append(OTLPAttribute("build_id", .string(buildID))) }
    if let function = frame.function { fields.append(OTLPAttribute("function", .string(function))) }
    if let file = frame.file { fields.append(OTLPAttribute("file", .string(file))) }
    if let line = frame.line { fields.append(OTLPAttribute("line", .int(Int64(line)))) }
    // How the handler found it (`exception.stacktrace` says it too: `{guessed}`).
    if let origin = frame.foundBy { fields.append(OTLPAttribute("found_by", .string(origin.rawValue))) }
    return .keyValueList(fields)
  }

  package static func breadcrumbRecord(_ entry: TrailEntry, report: CrashReport) -> OTLPLogRecord {
    var attributes = [
      OTLPAttribute("event.name", .string(breadcrumbEventName)),
      OTLPAttribute("session.id", .string(report.sessionID)),
      OTLPAttribute("crumbs.report.id", .string(report.id)),
      OTLPAttribute("thread.id", .int(Int64(entry.thread))),
      OTLPAttribute("crumbs.breadcrumb.id", .int(Int64(bitPattern: entry.id))),
      OTLPAttribute("crumbs.breadcrumb.seq", .int(Int64(entry.seq))),
      OTLPAttribute("crumbs.breadcrumb.type", .string(entry.type)),
    ]
    if !entry.attributes.isEmpty {
      attributes.append(
        OTLPAttribute(
          "crumbs.breadcrumb.attributes",
          .keyValueList(
            entry.attributes.sorted { $0.key < $1.key }.map { OTLPAttribute($0.key, .string($0.value)) })))
    }
    if entry.truncated == true {
      attributes.append(OTLPAttribute("crumbs.breadcrumb.truncated", .bool(true)))
    }
    if entry.signalHandler == true {
      attributes.append(OTLPAttribute("crumbs.breadcrumb.signal_handler", .bool(true)))
    }
    return OTLPLogRecord(
      timeUnixNano: entry.timeUnixNano, observedTimeUnixNano: report.observedTimeUnixNano,
      severity: OTLPSeverity(breadcrumbLevel: entry.level), body: .string(entry.message),
      attributes: attributes, eventName: breadcrumbEventName)
  }
}
