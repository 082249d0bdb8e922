// OTLPDestination.swift — a report as OTLP/HTTP logs: `POST {endpoint}/v1/logs`.
//
// A report is one log record: event name (the record's `event_name` field; the deprecated
// `event.name` attribute is never sent) `device.crash` for crashes and abnormal ends,
// `exception` for non-fatal reports; the OTel exception conventions (`exception.type`,
// `exception.message`, `exception.stacktrace`), `thread.id`, `thread.name`, `session.id`, the
// stable report id as `crumbs.report.id` (so a backend can dedupe an at-least-once delivery) and
// the LZ4 trail as the bytes attribute `crumbs.breadcrumbs.jsonl.lz4` — only once verified
// (trailAttachment()): a damaged trail is left out and named, with the reason, in
// `crumbs.attachments.omitted`. `time_unix_nano` is when it happened, `observed_time_unix_nano`
// when it was read. `trace_id`, `span_id` and `flags` are the report's trace (CrashReport.trace).
//
// The resource is the report's `resource` (the crashed session's, as it recorded it), typed as
// the semantic-conventions registry types it (`typedValue`), plus `service.instance.id`: the
// crashed process's session id, the same for all of its reports. Values measured at the crash
// (`crumbs.process.uptime_ms`, `crumbs.host.memory.free_bytes_at_crash`) describe the event, not
// the process: they go on the record. Keys the registry does not define are under `crumbs.*`.
// With `breadcrumbsAsLogRecords`, each breadcrumb also becomes a record (event name
// `crumbs.breadcrumb`) with its own time, severity and trace, stitched to the crash by
// `session.id` and `crumbs.report.id`.
//
// The request: at most `maxRequestBytes` before compression (over it, attachments and breadcrumb
// records are left out and named; a report still over it cannot be sent), gzip when
// `compression` says so, `User-Agent` from the transport. Answers follow the OTLP spec
// (OTLPResponse.verdict).
//
// Entry points: OTLPDestination(endpoint:headers:) → batch(for:stored:) → request(for:stored:);
// verdict(on:to:) for the answer. Metrics (the session counts) go to `{endpoint}/v1/metrics`:
// OTLPDestination+Metrics.swift; the spans a death left open to `{endpoint}/v1/traces`:
// OTLPDestination+Traces.swift. Not signal-safe.

import CrumbsRecorder
import CrumbsReports

/// Sends reports to an OTLP/HTTP logs endpoint (an OpenTelemetry Collector, or any backend that
/// speaks OTLP).
public struct OTLPDestination: ReportDestination {
  /// The body encoding: binary protobuf (the OTLP/HTTP default) or OTLP/JSON.
  public enum Encoding: String, Sendable {
    case protobuf, json
  }

  /// The body's compression (`Content-Encoding`).
  public enum Compression: String, Sendable {
    case none, gzip
  }

  /// What a request carries: reports (logs), the spans a death left open (traces), the session
  /// counts (metrics). Each may have headers of its own (`signalHeaders`).
  public enum Signal: String, Sendable, CaseIterable {
    case logs, traces, metrics
  }

  public var name: String
  /// The base URL (`http://collector:4318`); `/v1/logs` is appended unless already there (or
  /// `appendsLogsPath` is false: a signal-specific URL, used as is).
  public var endpoint: String
  /// Whether `/v1/logs` is appended to `endpoint` (false for OTEL_EXPORTER_OTLP_LOGS_ENDPOINT).
  public var appendsLogsPath = true
  /// The traces URL, used as is (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); nil: derived from
  /// `endpoint` (OTLPDestination+Traces.swift).
  public var tracesEndpoint: String?
  /// The metrics URL, used as is (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT); nil: derived from
  /// `endpoint` (OTLPDestination+Metrics.swift).
  public var metricsEndpoint: String?
  /// `.gzip` compresses every body (OTEL_EXPORTER_OTLP_COMPRESSION=gzip).
  public var compression = Compression.none
  /// Seconds the collector may stay silent (nil: the uploader's `requestTimeout`).
  public var timeout: Double?
  /// The largest body sent, before compression (default 16 MiB, under the OpenTelemetry
  /// Collector's 20 MiB default limit).
  public var maxRequestBytes = 16 << 20
  /// Extra headers, e.g. an `Authorization` header marked secret, on every request.
  public var headers: [HTTPHeader]
  /// Headers of one signal's requests only, over `headers` by name
  /// (OTEL_EXPORTER_OTLP_LOGS_HEADERS, _TRACES_HEADERS, _METRICS_HEADERS).
  public var signalHeaders: [Signal: [HTTPHeader]] = [:]
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

  /// The event names this mapping uses (`exception`: the name the exception conventions give).
  public static let crashEventName = "device.crash"
  public static let nonFatalEventName = "exception"
  /// A hang the process lived through (an exception-style record: `exception.*` attributes,
  /// every thread's stack), named apart so that backends count hangs apart from errors.
  public static let hangEventName = "crumbs.hang"
  public static let breadcrumbEventName = "crumbs.breadcrumb"
  /// The bytes attribute holding the LZ4 trail.
  public static let trailAttributeKey = "crumbs.breadcrumbs.jsonl.lz4"

  /// `{endpoint}/v1/logs`.
  public var logsURL: String {
    if !appendsLogsPath || endpoint.hasSuffix("/v1/logs") { return endpoint }
    return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/logs"
  }

  public func request(for report: CrashReport, stored: StoredReport) throws(DeliveryError) -> DeliveryRequest
  {
    var batch = try batch(for: report, stored: stored)
    var body = encoded(batch)
    if body.count > maxRequestBytes {
      // Too large for one request: the report without its attachments and breadcrumb records
      // (named in the record), rather than nothing.
      batch.records = [crashRecord(report, stored: stored, withoutAttachmentsOver: maxRequestBytes)]
      body = encoded(batch)
      guard body.count <= maxRequestBytes else {
        throw .unencodable("the report alone is over the \(maxRequestBytes)-byte request limit")
      }
    }
    return try request(
      body: body, records: batch.records.count, id: report.id, compressing: compression == .gzip)
  }

  /// The POST of any batch of records to `logsURL`, in this destination's encoding, compression
  /// and headers (secret headers are redacted from messages by DeliveryRequest). `id` names it in
  /// results. Sent uncompressed if gzip fails (it only fails when out of memory).
  public func request(for batch: OTLPLogBatch, id: String) -> DeliveryRequest {
    request(body: encoded(batch), records: batch.records.count, id: id, url: logsURL, signal: .logs)
  }

  private func encoded(_ batch: OTLPLogBatch) -> [UInt8] {
    encoding == .protobuf ? batch.protobuf() : batch.json()
  }

  /// A request's headers: its body's type and encoding, `headers`, and `signal`'s own over
  /// them by name.
  func headers(gzip: Bool, signal: Signal) -> [HTTPHeader] {
    let own = signalHeaders[signal] ?? []
    return [HTTPHeader("Content-Type", encoding == .protobuf ? "application/x-protobuf" : "application/json")]
      + (gzip ? [HTTPHeader("Content-Encoding", "gzip")] : []) + headers.notNamed(in: own) + own
  }

  /// The POST of `body` to `url` (the logs URL unless said), with `signal`'s headers.
  func request(
    body: [UInt8], records: Int, id: String, compressing: Bool, url: String? = nil, signal: Signal = .logs
  ) throws(DeliveryError) -> DeliveryRequest {
    var body = body
    if compressing {
      do {
        body = try OTLPGzip.compress(body)
      } catch {
        throw .unencodable("\(error)")
      }
    }
    return DeliveryRequest(
      destination: name, reportID: id, url: url ?? logsURL,
      headers: headers(gzip: compressing, signal: signal),
      body: body,
      timeout: timeout, itemCount: records)
  }

  /// The POST of `body` to `url` with `signal`'s headers, gzipped when `compression` says so, and
  /// sent uncompressed if gzip fails (it only fails when out of memory): for batches that are
  /// sent as they are (logs, traces, metrics), never cut down.
  func request(body: [UInt8], records: Int, id: String, url: String, signal: Signal) -> DeliveryRequest {
    (try? request(
      body: body, records: records, id: id, compressing: compression == .gzip, url: url, signal: signal))
      ?? DeliveryRequest(
        destination: name, reportID: id, url: url, headers: headers(gzip: false, signal: signal), body: body,
        timeout: timeout, itemCount: records)
  }

  /// The OTLP specification's answer policy (OTLPResponse.verdict): 429, 502, 503, 504 retried,
  /// every other 4xx and 5xx dropped, a partial success handed to the delegate.
  public func verdict(on answer: HTTPResponse, to request: DeliveryRequest) -> AnswerVerdict {
    OTLPResponse.verdict(on: answer, itemCount: request.itemCount)
  }

  /// The records for `report` (read from `stored`'s folder for the attachments).
  public func batch(for report: CrashReport, stored: StoredReport) throws(DeliveryError) -> OTLPLogBatch {
    var records = [crashRecord(report, stored: stored)]
    if breadcrumbsAsLogRecords {
      // A damaged or missing trail was already named in the crash record's omitted list.
      for entry in (try? stored.trailBreadcrumbs()) ?? [] {
        records.append(Self.breadcrumbRecord(entry, report: report))
      }
    }
    return OTLPLogBatch(
      resource: Self.resource(report), scopeName: "crumbs", scopeVersion: CrumbsVersion.string,
      records: records)
  }

  /// Frames of each thread other than the crashing one in `crumbs.threads`.
  static let framesPerOtherThread = 8

  /// Resource keys whose values were measured at the crash: they go on the record.
  static let measuredAtCrash: Set<String> = [
    "crumbs.process.uptime_ms", "crumbs.host.memory.free_bytes_at_crash",
  ]
  /// Keys the registry (or Crumbs, for `crumbs.*`) types as integers; every other key is a string.
  static let integerKeys: Set<String> = [
    "process.pid", "process.parent_pid", "thread.id", "crumbs.process.uptime_ms",
    "crumbs.host.memory.total_bytes", "crumbs.host.memory.free_bytes_at_crash",
  ]

  /// A resource or report attribute as its type says (a value that does not parse as its type
  /// is sent as the string it is).
  public static func typedValue(_ key: String, _ value: String) -> OTLPValue {
    if integerKeys.contains(key), let number = Int64(value) { return .int(number) }
    return .string(value)
  }

  /// The report attribute holding the report's signature (the grouping hint).
  public static let signatureKey = "crumbs.signature"

  /// A report's resource, typed, with `service.instance.id` (unless the resource names its own).
  public static func resource(_ report: CrashReport) -> [OTLPAttribute] {
    resourceAttributes(resourceStrings(report))
  }

  /// `resource(_:)` before it is typed.
  public static func resourceStrings(_ report: CrashReport) -> [String: String] {
    var resource = report.resource.filter { !measuredAtCrash.contains($0.key) }
    if resource["service.instance.id"] == nil { resource["service.instance.id"] = report.sessionID }
    return resource
  }

  /// Resource attributes from strings, typed and sorted by key.
  public static func resourceAttributes(_ resource: [String: String]) -> [OTLPAttribute] {
    resource.sorted { $0.key < $1.key }.map { OTLPAttribute($0.key, typedValue($0.key, $0.value)) }
  }

  /// The report's own record; with `withoutAttachmentsOver`, its attachments and trail are left
  /// out and named in `crumbs.attachments.omitted` (the request would be over that size).
  func crashRecord(_ report: CrashReport, stored: StoredReport, withoutAttachmentsOver limit: Int? = nil)
    -> OTLPLogRecord
  {
    let eventName =
      switch report.kind {
      case .nonFatal: Self.nonFatalEventName
      case .hang: Self.hangEventName
      case .crash, .abnormalTermination: Self.crashEventName
      }
    var attributes: [OTLPAttribute] = [
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
    // The other threads: a count, and their top frames as text (the crashing thread's are
    // `exception.stacktrace` and `crumbs.frames`); small on purpose, the stored report has all.
    if let threads = report.threads {
      attributes.append(
        OTLPAttribute("crumbs.thread_count", .int(Int64(threads.count + (report.threadsNotRecorded ?? 0)))))
      // A hang report's leading thread is `exception.stacktrace` already.
      let text = CrashReport.otherThreadsText(
        threads.filter { $0.id != report.threadID || report.kind != .hang },
        framesPerThread: Self.framesPerOtherThread)
      if !text.isEmpty { attributes.append(OTLPAttribute("crumbs.threads", .string(text))) }
    }
    for key in Self.measuredAtCrash.sorted() {
      if let value = report.resource[key] {
        attributes.append(OTLPAttribute(key, Self.typedValue(key, value)))
      }
    }
    if let origin = report.traceBreadcrumb {
      attributes.append(
        OTLPAttribute(
          "crumbs.trace.breadcrumb",
          .keyValueList([
            OTLPAttribute("thread.id", .int(Int64(origin.threadID))),
            OTLPAttribute("seq", .int(Int64(origin.threadSequence))),
            OTLPAttribute("message", .string(origin.message)),
            OTLPAttribute("time", .string(origin.time)),
          ])))
    }
    // The operations open at the death (OpenOperationsDelivery.swift).
    attributes += Self.openOperationAttributes(report)
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
    // The grouping hint: the store's signature (CrashReport.signature), the same for every
    // report of one bug, for a backend (or a query) to group by.
    attributes.append(OTLPAttribute(Self.signatureKey, .string(report.signature)))
    attributes.append(OTLPAttribute("crumbs.breadcrumbs.count", .int(Int64(report.breadcrumbs.count))))
    if let last = report.breadcrumbs.lastMessage {
      attributes.append(OTLPAttribute("crumbs.breadcrumbs.last_message", .string(last)))
    }
    var omitted: [String] = []
    if let limit {
      omitted = report.attachments.map { "\($0.name): left out to keep the request under \(limit) bytes" }
      if breadcrumbsAsLogRecords { omitted.append("breadcrumb records: left out for the same reason") }
    }
    do {
      if limit == nil, let trail = try stored.trailAttachment() {
        attributes.append(OTLPAttribute(Self.trailAttributeKey, .bytes(trail)))
      }
    } catch {
      omitted.append("\(error)")
    }
    for attachment in report.attachments
    where limit == nil && attachment.name != report.breadcrumbs.attachment {
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
    // The app's attributes last; a key this mapping already uses keeps the mapping's value, and
    // the trace keys are the record's trace fields.
    let used = Set(attributes.map(\.key))
    for (key, value) in report.attributes.sorted(by: { $0.key < $1.key })
    where !used.contains(key) && !TraceContext.isReserved(key) {
      attributes.append(OTLPAttribute(key, OTLPValue(value)))
    }
    return OTLPLogRecord(
      timeUnixNano: report.timeUnixNano, observedTimeUnixNano: report.observedTimeUnixNano,
      severity: report.kind == .nonFatal || report.kind == .hang ? .error : .fatal,
      body: .string(report.exceptionType + ": " + report.exceptionMessage),
      attributes: attributes, eventName: eventName, trace: report.trace)
  }

  /// The semantic conventions' stable `code.*` attribute names, used in each `crumbs.frames` entry.
  package static let functionKey = "code.function.name"
  package static let filePathKey = "code.file.path"
  package static let lineNumberKey = "code.line.number"
  package static let columnNumberKey = "code.column.number"

  static func frameValue(_ frame: CrashReport.Frame) -> OTLPValue {
    var fields = [
      OTLPAttribute("index", .int(Int64(frame.index))), OTLPAttribute("address", .string(frame.address)),
    ]
    if let module = frame.module { fields.append(OTLPAttribute("module", .string(module))) }
    if let offset = frame.moduleOffset { fields.append(OTLPAttribute("module_offset", .string(offset))) }
    if let buildID = frame.buildID { fields.append(OTLPAttribute("build_id", .string(buildID))) }
    // The source location under the semantic conventions' `code.*` names: the stable ones
    // (renamed in semconv 1.30, stable since), which replaced `code.function`, `code.filepath`,
    // `code.lineno` and `code.column` (deprecated, not sent: docs/delivery.md).
    if let function = frame.function { fields.append(OTLPAttribute(Self.functionKey, .string(function))) }
    if let file = frame.file { fields.append(OTLPAttribute(Self.filePathKey, .string(file))) }
    if let line = frame.line { fields.append(OTLPAttribute(Self.lineNumberKey, .int(Int64(line)))) }
    if let column = frame.column { fields.append(OTLPAttribute(Self.columnNumberKey, .int(Int64(column)))) }
    // The lines of source around `line` (no convention names them): the first one's number, and
    // the lines, as report.json holds them.
    if let source = frame.source {
      fields.append(OTLPAttribute("source_start_line", .int(Int64(source.startLine))))
      fields.append(OTLPAttribute("source_lines", .array(source.lines.map { .string($0) })))
      fields.append(OTLPAttribute("source_origin", .string(source.origin)))
      if source.newerThanModule == true {
        fields.append(OTLPAttribute("source_newer_than_module", .bool(true)))
      }
    }
    // A call inlined into the next frame (`exception.stacktrace` says `[inlined]`).
    if frame.isInlined { fields.append(OTLPAttribute("inlined", .bool(true))) }
    // How the handler found it (`exception.stacktrace` says it too: `{guessed}`).
    if let origin = frame.foundBy { fields.append(OTLPAttribute("found_by", .string(origin.rawValue))) }
    return .keyValueList(fields)
  }

  package static func breadcrumbRecord(_ entry: Breadcrumb, report: CrashReport) -> OTLPLogRecord {
    var attributes = [
      OTLPAttribute("session.id", .string(report.sessionID)),
      OTLPAttribute("crumbs.report.id", .string(report.id)),
      OTLPAttribute("thread.id", .int(Int64(entry.threadID))),
      OTLPAttribute("crumbs.breadcrumb.id", .int(Int64(bitPattern: entry.id))),
      OTLPAttribute("crumbs.breadcrumb.seq", .int(Int64(entry.threadSequence))),
      OTLPAttribute("crumbs.breadcrumb.type", .string(entry.type.name)),
    ]
    let own = entry.attributes.filter { !TraceContext.isReserved($0.key) }
    if !own.isEmpty {
      attributes.append(
        OTLPAttribute(
          "crumbs.breadcrumb.attributes",
          .keyValueList(own.sorted { $0.key < $1.key }.map { OTLPAttribute($0.key, .string($0.value)) })))
    }
    if entry.truncated {
      attributes.append(OTLPAttribute("crumbs.breadcrumb.truncated", .bool(true)))
    }
    if entry.fromSignalHandler {
      attributes.append(OTLPAttribute("crumbs.breadcrumb.signal_handler", .bool(true)))
    }
    return OTLPLogRecord(
      timeUnixNano: entry.wallTimeNanoseconds, observedTimeUnixNano: report.observedTimeUnixNano,
      severity: OTLPSeverity(breadcrumbLevel: entry.level.name), body: .string(entry.message),
      attributes: attributes, eventName: breadcrumbEventName,
      trace: TraceContext { key in entry.attributes.first { $0.key == key }?.value })
  }
}

extension OTLPValue {
  /// An app attribute as its type says (AnyValue string_value, bool_value, int_value,
  /// double_value).
  public init(_ value: AttributeValue) {
    switch value {
    case .string(let text): self = .string(text)
    case .bool(let flag): self = .bool(flag)
    case .int(let number): self = .int(number)
    case .double(let number): self = .double(number)
    }
  }
}
