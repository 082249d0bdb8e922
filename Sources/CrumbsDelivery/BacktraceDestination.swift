// BacktraceDestination.swift — a report in Backtrace's JSON crash format, posted as
// multipart/form-data to `{endpoint}/post?format=json&token=TOKEN` (or a full submission URL).
//
// Parts:
//   upload_file                    the JSON report (uuid = the report id, so resubmits dedupe)
//   attachment_bt-breadcrumbs-0    the trail, decompressed and converted to Backtrace's
//                                  breadcrumb objects ({id, timestamp ms, level, type, message,
//                                  attributes}) as one JSON array; ids are 1…n oldest first, and
//                                  the report's `breadcrumbs.lastId` attribute is n
//   attachment_<name>              every other attachment up to `maxAttachmentBytes`
// The JSON's `attributes` are flat strings and numbers: the report's resource, Backtrace's usual
// names derived from it (`application`, `application.version`, `uname.*`, `hostname`), the app's
// attributes, `error.message`, `error.type`, `breadcrumbs.lastId`. Structured extras (signal,
// registers, modules, damage) go to `annotations`.
//
// Entry points: BacktraceDestination(endpoint:token:) or (submissionURL:) → json(for:trail:)
// → request(for:stored:). Not signal-safe.

import CrumbsRecorder
import CrumbsReports
import FoundationEssentials

/// Sends reports to a Backtrace (backtrace.io / Sauce Labs) instance.
public struct BacktraceDestination: ReportDestination {
  public var name: String
  /// Where reports are posted, token included.
  public var submissionURL: String
  /// The submission token (redacted from everything printed or stored).
  public var token: String?
  public var headers: [HTTPHeader]
  /// Attachments larger than this are left out and listed in the report's annotations.
  public var maxAttachmentBytes: Int

  /// Posts to `{endpoint}/post?format=json&token=TOKEN`.
  public init(
    endpoint: String, token: String, headers: [HTTPHeader] = [], maxAttachmentBytes: Int = 7 << 20,
    name: String = "backtrace"
  ) {
    let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
    self.init(
      submissionURL: base + "/post?format=json&token=" + Redactor.percentEncoded(token), token: token,
      headers: headers, maxAttachmentBytes: maxAttachmentBytes, name: name)
  }

  /// Posts to `submissionURL` as given (e.g. `https://submit.backtrace.io/UNIVERSE/TOKEN/json`);
  /// pass the token too when the URL contains it, so it is redacted.
  public init(
    submissionURL: String, token: String? = nil, headers: [HTTPHeader] = [],
    maxAttachmentBytes: Int = 7 << 20, name: String = "backtrace"
  ) {
    self.name = name
    self.submissionURL = submissionURL
    self.token = token
    self.headers = headers
    self.maxAttachmentBytes = maxAttachmentBytes
  }

  /// The multipart part name of the trail.
  public static let breadcrumbsPartName = "attachment_bt-breadcrumbs-0"

  public func request(for report: CrashReport, stored: StoredReport) throws(DeliveryError) -> DeliveryRequest
  {
    var form = MultipartForm()
    var omitted: [String] = []
    var trail: [TrailEntry] = []
    do {
      trail = try stored.trailEntries()
    } catch {
      omitted.append("\(error)")
    }
    var parts: [(name: String, filename: String, contentType: String, bytes: [UInt8])] = []
    if !trail.isEmpty {
      parts.append(
        (Self.breadcrumbsPartName, "bt-breadcrumbs-0", "application/json", Self.breadcrumbsFile(trail)))
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
        parts.append(("attachment_" + attachment.name, attachment.name, attachment.contentType, bytes))
      } else {
        omitted.append("\(attachment.name): unreadable")
      }
    }
    form.add(
      name: "upload_file", filename: "upload_file.json", contentType: "application/json",
      bytes: json(for: report, trail: trail, omitted: omitted))
    for part in parts {
      form.add(name: part.name, filename: part.filename, contentType: part.contentType, bytes: part.bytes)
    }
    let body = form.finish()
    return DeliveryRequest(
      destination: name, reportID: report.id, url: submissionURL,
      headers: [HTTPHeader("Content-Type", "multipart/form-data; boundary=" + form.boundary)] + headers,
      body: body, secrets: token.map { [$0] } ?? [])
  }

  /// The Backtrace JSON report.
  public func json(for report: CrashReport, trail: [TrailEntry], omitted: [String] = []) -> [UInt8] {
    let threadName =
      report.threadName.flatMap { $0.isEmpty ? nil : $0 } ?? report.threadID.map { "thread-\($0)" } ?? "main"
    var json = JSONWriter()
    json.object { object in
      object.field("uuid", Self.uuid(for: report.id))
      object.field("timestamp", report.timeUnixNano / 1_000_000_000)
      object.field("lang", "swift")
      object.field("langVersion", report.resource["process.runtime.version"] ?? Self.swiftVersion)
      object.field("agent", "crumbs")
      object.field("agentVersion", CrumbsVersion.string)
      object.field("mainThread", threadName)
      object.object("threads") { threads in
        threads.object(threadName) { thread in
          thread.field("name", threadName)
          thread.field("fault", true)
          thread.array("stack") { stack in
            for frame in report.frames { stack.object { Self.json(frame, into: &$0) } }
          }
        }
      }
      object.object("attributes") { attributes in
        for (key, value) in self.attributes(for: report, trail: trail) {
          switch value {
          case .string(let text): attributes.field(key, text)
          case .number(let number): attributes.field(key, number)
          }
        }
      }
      object.object("annotations") { annotations in
        annotations.object("Crumbs") { crumbs in
          crumbs.field("report.id", report.id)
          crumbs.field("kind", report.kind.rawValue)
          crumbs.field("time", report.time)
          crumbs.field("observedTime", report.observedTime)
          for (key, values) in [
            ("damage", report.damage), ("evidence", report.evidence), ("omittedAttachments", omitted),
          ] {
            crumbs.array(key) { array in
              for value in values { array.append(value) }
            }
          }
          crumbs.object("trail") { summary in
            summary.field("count", report.breadcrumbs.count)
            summary.field("valid", report.breadcrumbs.valid)
            summary.field("torn", report.breadcrumbs.torn)
            summary.field("overwritten", report.breadcrumbs.overwritten)
          }
        }
        if let signal = report.signal {
          annotations.object("Signal") { fields in
            fields.field("number", signal.number)
            fields.field("name", signal.name)
            fields.field("code", signal.code)
            fields.field("codeName", signal.codeName)
            fields.field("faultAddress", signal.faultAddress)
            if let sender = signal.senderPID { fields.field("senderPid", sender) }
          }
        }
        if !report.registers.isEmpty {
          annotations.object("Registers") { registers in
            for register in report.registers { registers.field(register.name, register.value) }
          }
        }
        if !report.modules.isEmpty {
          annotations.array("Modules") { modules in
            for module in report.modules {
              modules.object { fields in
                fields.field("path", module.path)
                fields.field("loadAddress", CrashReport.hex(module.loadBias))
                if !module.buildID.isEmpty { fields.field("buildId", module.buildIDHex) }
              }
            }
          }
        }
        annotations.field("Stacktrace", report.exceptionStacktrace)
      }
    }
    return json.bytes
  }

  /// One frame of the faulting thread's stack.
  static func json(_ frame: CrashReport.Frame, into json: inout JSONObject) {
    json.field(
      "funcName",
      frame.function ?? frame.moduleOffset.map { "\(Self.basename(frame.module ?? "?"))+\($0)" }
        ?? frame.address)
    json.field("address", frame.address)
    if let module = frame.module {
      json.field("library", Self.basename(module))
      json.field("path", module)
    }
    if let offset = frame.moduleOffset { json.field("moduleOffset", offset) }
    if let buildID = frame.buildID { json.field("buildId", buildID) }
    if let file = frame.file { json.field("sourceCode", file) }
    if let line = frame.line { json.field("line", line) }
    // Backtrace's own flag for a frame recovered by a stack scan rather than unwound.
    if frame.guessed { json.field("guessed_frame", true) }
  }

  enum AttributeValue {
    case string(String)
    case number(Int64)
  }

  /// The flat attribute map, sorted by key.
  func attributes(for report: CrashReport, trail: [TrailEntry]) -> [(String, AttributeValue)] {
    var attributes: [String: AttributeValue] = [:]
    for (key, value) in report.resource { attributes[key] = .string(value) }
    let derived: [(String, String)] = [
      ("application", "service.name"), ("application.version", "service.version"),
      ("uname.machine", "host.arch"), ("uname.version", "os.version"), ("hostname", "host.name"),
    ]
    for (name, source) in derived {
      if let value = report.resource[source] { attributes[name] = .string(value) }
    }
    attributes["uname.sysname"] = .string("Linux")
    if let pid = report.resource["process.pid"].flatMap({ Int64($0) }) {
      attributes["process.id"] = .number(pid)
    }
    for (key, value) in report.attributes { attributes[key] = .string(value) }
    attributes["error.message"] = .string(report.exceptionMessage)
    attributes["error.type"] = .string(report.kind == .nonFatal ? "Exception" : "Crash")
    attributes["crumbs.exception.type"] = .string(report.exceptionType)
    attributes["crumbs.report.id"] = .string(report.id)
    attributes["crumbs.report.kind"] = .string(report.kind.rawValue)
    attributes["session.id"] = .string(report.sessionID)
    if let thread = report.threadID { attributes["thread.id"] = .number(Int64(thread)) }
    attributes["breadcrumbs.lastId"] = .number(Int64(trail.count))
    return attributes.sorted { $0.key < $1.key }
  }

  /// The trail as Backtrace breadcrumb objects in one JSON array (see the file comment).
  package static func breadcrumbsFile(_ trail: [TrailEntry]) -> [UInt8] {
    var json = JSONWriter()
    json.array { breadcrumbs in
      for (index, entry) in trail.enumerated() {
        breadcrumbs.object { breadcrumb in
          breadcrumb.field("id", index + 1)
          breadcrumb.field("timestamp", entry.timeUnixNano / 1_000_000)
          breadcrumb.field("level", entry.level)
          breadcrumb.field("type", entry.type)
          breadcrumb.field("message", entry.message)
          breadcrumb.object("attributes") { attributes in
            for (key, value) in entry.attributes.sorted(by: { $0.key < $1.key }) {
              attributes.field(key, value)
            }
            attributes.field("crumbs.id", String(entry.id))
            attributes.field("thread.id", String(entry.thread))
          }
        }
      }
    }
    return json.bytes
  }

  /// The report id when it is a UUID (session ids are); otherwise a UUID derived from it, the
  /// same on every attempt, so Backtrace can dedupe resubmissions.
  static func uuid(for id: String) -> String {
    if let uuid = SessionID(id) { return uuid.description }
    var bytes: [UInt8] = []
    for seed: UInt64 in [0xcbf2_9ce4_8422_2325, 0x8422_2325_cbf2_9ce4] {
      var hash = seed
      for byte in id.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01b3
      }
      for shift in stride(from: 56, through: 0, by: -8) {
        bytes.append(UInt8(truncatingIfNeeded: hash >> UInt64(shift)))
      }
    }
    bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8: custom
    bytes[8] = (bytes[8] & 0x3F) | 0x80
    return SessionID(bytes: bytes)!.description
  }

  static func basename(_ path: String) -> String { path.split(separator: "/").last.map(String.init) ?? path }

  static let swiftVersion: String = {
    #if swift(>=6.3)
      "6.3"
    #elseif swift(>=6.2)
      "6.2"
    #else
      "6"
    #endif
  }()
}

/// A multipart/form-data body (RFC 7578) with a random boundary.
package struct MultipartForm {
  package let boundary: String
  private(set) var bytes: [UInt8] = []

  package init() {
    var generator = SystemRandomNumberGenerator()
    boundary = "crumbs-" + (0..<4).map { _ in String(generator.next() as UInt32, radix: 16) }.joined()
  }

  package mutating func add(name: String, filename: String, contentType: String, bytes part: [UInt8]) {
    func quoted(_ text: String) -> String {
      text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"").replacing("\r", with: "").replacing(
        "\n", with: "")
    }
    bytes.append(contentsOf: "--\(boundary)\r\n".utf8)
    bytes.append(
      contentsOf:
        "Content-Disposition: form-data; name=\"\(quoted(name))\"; filename=\"\(quoted(filename))\"\r\n".utf8)
    bytes.append(contentsOf: "Content-Type: \(contentType)\r\n\r\n".utf8)
    bytes.append(contentsOf: part)
    bytes.append(contentsOf: "\r\n".utf8)
  }

  package mutating func finish() -> [UInt8] {
    bytes.append(contentsOf: "--\(boundary)--\r\n".utf8)
    return bytes
  }
}
