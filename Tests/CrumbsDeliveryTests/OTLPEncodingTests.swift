// OTLPEncodingTests.swift — a report as OTLP logs, sent to a real HTTP server on loopback and
// decoded with the official OTLP decoder (Tests/Tools/decode_otlp.py, PyPI opentelemetry-proto),
// in both encodings.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct OTLPEncodingTests {
  @Test(arguments: [OTLPDestination.Encoding.protobuf, .json])
  func otlpRequestDecodesWithTheOfficialDecoder(encoding: OTLPDestination.Encoding) throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let destination = OTLPDestination(
      endpoint: server.baseURL, headers: [HTTPHeader("Authorization", "Bearer s3cret-otlp", isSecret: true)],
      encoding: encoding, breadcrumbsAsLogRecords: true)
    let delegate = RecordingDelegate(addAttribute: true)
    let uploader = ReportUploader(store: fixture.store, destinations: [destination], delegate: delegate)
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.sent])

    let request = try #require(server.requests.first)
    #expect(server.requests.count == 1)
    #expect(request.target == "/v1/logs")
    #expect(
      request.headers["content-type"]
        == (encoding == .protobuf ? "application/x-protobuf" : "application/json"))
    #expect(request.headers["authorization"] == "Bearer s3cret-otlp")
    #expect(request.headers["x-signed"] == "by-delegate")

    let stored = try fixture.store.load(id: fixture.ids[0])
    #expect(stored.state == .sent)
    let report = stored.report
    let decoded = try decodeOTLP(request.body, json: encoding == .json)
    let records = try #require(decoded["records"] as? [[String: Any]])
    let crash = try #require(records.first)
    let attributes = try #require(crash["attributes"] as? [String: Any])
    #expect(crash["event_name"] as? String == "device.crash")
    #expect(attributes["event.name"] == nil)
    #expect(crash["severity_number"] as? Int == 21)
    #expect(crash["time_unix_nano"] as? String == String(report.timeUnixNano))
    #expect(crash["observed_time_unix_nano"] as? String == String(report.observedTimeUnixNano))
    #expect(attributes["exception.type"] as? String == report.exceptionType)
    #expect(attributes["exception.message"] as? String == report.exceptionMessage)
    #expect(attributes["exception.stacktrace"] as? String == report.exceptionStacktrace)
    #expect(attributes["session.id"] as? String == report.sessionID)
    #expect(attributes["crumbs.report.id"] as? String == report.id)
    #expect(attributes["added.by.delegate"] as? String == "yes")
    let resource = try #require(decoded["resource"] as? [String: Any])
    #expect(resource["service.name"] as? String == report.resource["service.name"])
    #expect(resource["os.type"] as? String == "linux")
    // The bytes attribute is the LZ4 trail: decompressed by the lz4 CLI, it is the stored trail.
    let trailText = try #require(decoded["trail_jsonl"] as? String)
    let storedTrail = try LZ4Frame.decompress(
      try Syscall.readFile(stored.attachmentPath(TrailAttachment.name)))
    #expect(trailText == String(decoding: storedTrail, as: UTF8.self))

    // One record per breadcrumb, stitched to the crash, each with its own time and severity.
    let entries = try stored.trailBreadcrumbs()
    #expect(records.count == 1 + entries.count)
    for (record, entry) in zip(records.dropFirst(), entries) {
      let crumb = try #require(record["attributes"] as? [String: Any])
      #expect(record["event_name"] as? String == "crumbs.breadcrumb")
      #expect(crumb["session.id"] as? String == report.sessionID)
      #expect(crumb["crumbs.report.id"] as? String == report.id)
      #expect(record["body"] as? String == entry.message)
      #expect(record["time_unix_nano"] as? String == String(entry.wallTimeNanoseconds))
      #expect(record["severity_number"] as? Int == (entry.level == .warning ? 13 : 9))
    }
    #expect(delegate.succeeded.withLock { $0 } == [report.id])
    #expect(!fixture.everythingStored().contains("s3cret-otlp"))
  }

  /// Every kind of AnyValue, and a record without body or event name.
  static let batch = OTLPLogBatch(
    resource: [OTLPAttribute("service.name", .string("app"))], scopeName: "crumbs", scopeVersion: "1.0",
    records: [
      OTLPLogRecord(
        timeUnixNano: 1, observedTimeUnixNano: .max, severity: .fatal, body: .string("boom \"x\""),
        attributes: [
          OTLPAttribute("b", .bool(true)), OTLPAttribute("i", .int(-5)), OTLPAttribute("d", .double(0.25)),
          OTLPAttribute("nan", .double(.nan)), OTLPAttribute("inf", .double(-.infinity)),
          OTLPAttribute("bytes", .bytes([0, 1, 0xFF])),
          OTLPAttribute("list", .array([.string(""), .array([])])),
          OTLPAttribute("kv", .keyValueList([OTLPAttribute("k", .int(0))])),
        ], eventName: "device.crash"),
      OTLPLogRecord(
        timeUnixNano: 2, observedTimeUnixNano: 3, severity: .info, body: nil, attributes: [], eventName: nil),
    ])

  @Test func otlpJSONOfAFixedBatchIsExact() throws {
    let expected =
      #"{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]},"#
      + #""scopeLogs":[{"scope":{"name":"crumbs","version":"1.0"},"logRecords":[{"timeUnixNano":"1","#
      + #""observedTimeUnixNano":"18446744073709551615","severityNumber":21,"severityText":"FATAL","#
      + #""body":{"stringValue":"boom \"x\""},"attributes":[{"key":"b","value":{"boolValue":true}},"#
      + #"{"key":"i","value":{"intValue":"-5"}},{"key":"d","value":{"doubleValue":0.25}},"#
      + #"{"key":"nan","value":{"doubleValue":"NaN"}},{"key":"inf","value":{"doubleValue":"-Infinity"}},"#
      + #"{"key":"bytes","value":{"bytesValue":"AAH/"}},"#
      + #"{"key":"list","value":{"arrayValue":{"values":[{"stringValue":""},{"arrayValue":{"values":[]}}]}}},"#
      + #"{"key":"kv","value":{"kvlistValue":{"values":[{"key":"k","value":{"intValue":"0"}}]}}}],"#
      + #""eventName":"device.crash"},{"timeUnixNano":"2","observedTimeUnixNano":"3","severityNumber":9,"#
      + #""severityText":"INFO","attributes":[]}]}]}]}"#
    #expect(String(decoding: Self.batch.json(), as: UTF8.self) == expected)
    // The official decoder reads both encodings to the same records (NaN and infinities left
    // out: the decoder's own JSON output cannot carry them).
    var finite = Self.batch
    finite.records[0].attributes.removeAll { ["nan", "inf"].contains($0.key) }
    let fromJSON = try decodeOTLP(finite.json(), json: true)
    let fromProtobuf = try decodeOTLP(finite.protobuf())
    #expect((fromJSON["records"] as? [Any])?.count == 2)
    #expect(
      NSDictionary(dictionary: fromJSON).isEqual(to: fromProtobuf), "\(fromJSON)\n\(fromProtobuf)")
  }
}
