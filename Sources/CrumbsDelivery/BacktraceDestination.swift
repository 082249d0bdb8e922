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
// The JSON report's fields, and how each is derived, are described in BacktraceJSON.swift.
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
    var trail: [Breadcrumb] = []
    do {
      trail = try stored.trailBreadcrumbs()
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

  /// The Backtrace JSON report (BacktraceJSON.swift).
  public func json(for report: CrashReport, trail: [Breadcrumb], omitted: [String] = []) -> [UInt8] {
    BacktraceJSON.body(for: report, trail: trail, omitted: omitted)
  }

  /// The trail as Backtrace breadcrumb objects in one JSON array (see the file comment).
  package static func breadcrumbsFile(_ trail: [Breadcrumb]) -> [UInt8] {
    var json = JSONWriter()
    json.array { breadcrumbs in
      for (index, entry) in trail.enumerated() {
        breadcrumbs.object { breadcrumb in
          breadcrumb.field("id", index + 1)
          breadcrumb.field("timestamp", entry.wallTimeNanoseconds / 1_000_000)
          breadcrumb.field("level", entry.level.name)
          breadcrumb.field("type", entry.type.name)
          breadcrumb.field("message", entry.message)
          breadcrumb.object("attributes") { attributes in
            for attribute in entry.attributes.sorted(by: { $0.key < $1.key }) {
              attributes.field(attribute.key, attribute.value)
            }
            attributes.field("crumbs.id", String(entry.id))
            attributes.field("thread.id", String(entry.threadID))
          }
        }
      }
    }
    return json.bytes
  }
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
