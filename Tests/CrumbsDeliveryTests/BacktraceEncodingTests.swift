// BacktraceEncodingTests.swift — a report as a Backtrace submission: multipart with the JSON
// report, the breadcrumbs file and the other attachments, the token only on the wire.

import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct BacktraceEncodingTests {
  @Test func backtraceSubmissionIsMultipartWithTheJSONReportAndBreadcrumbs() throws {
    let fixture = try ReportFixture(count: 2, extraAttachmentBytes: 1000)
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let token = "tok/en+s3cret"
    let destination = BacktraceDestination(endpoint: server.baseURL, token: token)
    let uploader = ReportUploader(store: fixture.store, destinations: [destination])
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.count == 2 && pass.finished.allSatisfy { $0.state == .sent })
    #expect(server.requests.count == 2)

    let request = try #require(server.requests.last)  // the clone, with the extra attachment
    let report = fixture.reports[1].report
    #expect(request.target == "/post?format=json&token=tok%2Fen%2Bs3cret")
    let contentType = try #require(request.headers["content-type"])
    let boundary = try #require(contentType.components(separatedBy: "boundary=").last)
    let parts = multipartParts(request.body, boundary: boundary)
    #expect(parts.map(\.name) == ["upload_file", "attachment_bt-breadcrumbs-0", "attachment_blob.bin"])
    #expect(parts[2].body.count == 1000)

    let json = try #require(try JSONSerialization.jsonObject(with: Data(parts[0].body)) as? [String: Any])
    #expect(json["uuid"] as? String == report.id)
    #expect(json["timestamp"] as? Int == Int(report.timeUnixNano / 1_000_000_000))
    #expect(json["lang"] as? String == "swift")
    #expect(json["agent"] as? String == "crumbs")
    #expect(json["agentVersion"] as? String == CrumbsVersion.string)
    #expect((json["langVersion"] as? String)?.isEmpty == false)
    let mainThread = try #require(json["mainThread"] as? String)
    let threads = try #require(json["threads"] as? [String: Any])
    let thread = try #require(threads[mainThread] as? [String: Any])
    #expect(thread["fault"] as? Bool == true)
    #expect(thread["stack"] is [Any])
    let attributes = try #require(json["attributes"] as? [String: Any])
    #expect(attributes["error.message"] as? String == report.exceptionMessage)
    #expect(attributes["application"] as? String == report.resource["service.name"])
    #expect(attributes["crumbs.report.id"] as? String == report.id)
    for value in attributes.values { #expect(value is String || value is NSNumber) }
    #expect(json["annotations"] is [String: Any])

    let breadcrumbs = try #require(
      try JSONSerialization.jsonObject(with: Data(parts[1].body)) as? [[String: Any]])
    #expect(breadcrumbs.count == report.breadcrumbs.count)
    #expect(attributes["breadcrumbs.lastId"] as? Int == breadcrumbs.count)
    #expect(breadcrumbs.last?["id"] as? Int == breadcrumbs.count)
    #expect(breadcrumbs.first?["message"] as? String == "step 0")
    #expect(breadcrumbs.first?["type"] as? String == "manual")
    #expect(
      Set(breadcrumbs.first?.keys.map { $0 } ?? []) == [
        "id", "timestamp", "level", "type", "message", "attributes",
      ])
    #expect(!fixture.everythingStored().contains("s3cret"))
  }
}
