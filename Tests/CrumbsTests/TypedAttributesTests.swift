// TypedAttributesTests.swift — issue 25 (f): attributes set as Bool, Int and Double arrive typed
// (OTLP AnyValue members, decoded with the official classes; Backtrace JSON booleans and
// numbers), for a non-fatal report and for a crash reported by the next launch (a real child
// process that crashed), with `enduser.id` from setUser and the grouping hint: `crumbs.signature`
// equal to the stored report's signature, and Backtrace's `_mod_fingerprint` the same for two
// crashes of one bug.

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct TypedAttributesTests {
  /// The attributes the `client-typed-attributes` child sets, with the AnyValue member each must
  /// arrive as, and its value as the decoder prints it.
  static let expected: [(key: String, member: String, value: String)] = [
    ("feature.beta", "bool_value", "true"), ("cart.items", "int_value", "3"),
    ("cart.weight_kg", "double_value", "4.0"), ("cart.total", "double_value", "2.5"),
    ("region", "string_value", "eu-west-1"), ("enduser.id", "string_value", "user-42"),
  ]

  func checkTyped(_ record: [String: Any], _ what: String) {
    let attributes = record["attributes"] as? [String: Any] ?? [:]
    let types = record["attribute_types"] as? [String: String] ?? [:]
    for (key, member, value) in Self.expected {
      #expect(types[key] == member, "\(what): \(key) sent as \(types[key] ?? "nothing")")
      // The member says the type (a parsed JSON number alone does not keep 4.0 apart from 4).
      if member == "double_value" {
        #expect((attributes[key] as? NSNumber)?.doubleValue == Double(value), "\(what): \(key)")
      } else if member == "bool_value" {
        #expect((attributes[key] as? Bool) == (value == "true"), "\(what): \(key)")
      } else {
        #expect("\(attributes[key] ?? "nil")" == value, "\(what): \(key)")
      }
    }
  }

  @Test func typedAttributesTheUserAndTheSignatureArriveLiveAndFromTheNextLaunch() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      // Two runs crash at the same place: two crashes of one bug. The second run reports the
      // first one's crash (read at its start, from the session file the first run wrote).
      for run in 1...2 {
        let child = try ChildProcess(
          ChildProcess.testChild, ["client-typed-attributes", directory.path, server.baseURL],
          environment: ["SWIFT_BACKTRACE": "enable=no"])
        let lines = child.readLines(until: "crashing", seconds: 120)
        child.wait(seconds: 120)
        #expect(child.terminatingSignal == SIGSEGV, "run \(run): \(lines)")
        #expect(lines.contains("sent yes"), "run \(run): \(lines)")
      }
      // The next launch reports the second crash.
      var configuration = CrumbsConfiguration(directory: directory.path)
      configuration.hangs = nil
      configuration.appVersion = "2.0"
      configuration.automaticBreadcrumbs = nil
      configuration.destinations = [
        .otlp(endpoint: server.baseURL),
        .backtraceSubmissionURL(server.baseURL + "/post?format=json&token=t"),
      ]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      _ = client.uploader?.deliverPendingNow()

      let stored = client.store.list(.sent).reports.map(\.report)
      let crashes = stored.filter { $0.kind == .crash }
      let nonFatals = stored.filter { $0.kind == .nonFatal }
      #expect(crashes.count == 2, "\(stored.map(\.kind))")
      #expect(nonFatals.count == 2, "\(stored.map(\.kind))")
      // The type survived the session file and the store: the stored crash holds it.
      for crash in crashes {
        #expect(crash.attributes["cart.weight_kg"] == .double(4.0))
        #expect(crash.attributes["cart.items"] == .int(3))
        #expect(crash.attributes["feature.beta"] == .bool(true))
        #expect(crash.attributes["enduser.id"] == "user-42")
      }

      // OTLP: every report's record, decoded with the official classes.
      var records: [String: [String: Any]] = [:]
      for request in server.requests where request.target.hasSuffix("/v1/logs") {
        for record in try decodeOTLP(request.body)["records"] as? [[String: Any]] ?? [] {
          let attributes = record["attributes"] as? [String: Any] ?? [:]
          // The reports' own records (not session summaries, not breadcrumb records).
          if let id = attributes["crumbs.report.id"] as? String, attributes["crumbs.report.kind"] != nil {
            records[id] = record
          }
        }
      }
      for report in crashes + nonFatals {
        let record = try #require(
          records[report.id], "report \(report.kind) \(report.id) did not arrive over OTLP")
        checkTyped(record, "\(report.kind.rawValue) over OTLP")
        let attributes = record["attributes"] as? [String: Any] ?? [:]
        #expect(attributes["crumbs.signature"] as? String == report.signature)
      }
      #expect(crashes.count == 2 && crashes[0].signature == crashes[1].signature)

      // Backtrace: typed JSON values, and the fingerprint of the signature.
      var fingerprints: [String: String] = [:]
      for request in server.requests where request.target.hasPrefix("/post?format=json") {
        let boundary = try #require(
          request.headers["content-type"]?.components(separatedBy: "boundary=").last)
        let json = try #require(
          multipartParts(request.body, boundary: boundary).first { $0.name == "upload_file" })
        let body = try #require(try JSONSerialization.jsonObject(with: Data(json.body)) as? [String: Any])
        let attributes = try #require(body["attributes"] as? [String: Any])
        let text = String(decoding: json.body, as: UTF8.self)
        for fragment in [
          #""feature.beta":true"#, #""cart.items":3"#, #""cart.weight_kg":4"#, #""cart.total":2.5"#,
          #""enduser.id":"user-42""#,
        ] {
          #expect(text.contains(fragment), "Backtrace body lacks \(fragment)")
        }
        let id = try #require(attributes["crumbs.report.id"] as? String)
        fingerprints[id] = attributes["_mod_fingerprint"] as? String
        let report = try #require(stored.first { $0.id == id })
        #expect(attributes["crumbs.signature"] as? String == report.signature)
      }
      let crashPrints = crashes.map { fingerprints[$0.id] }
      #expect(crashPrints.count == 2 && crashPrints[0] != nil && crashPrints[0] == crashPrints[1])
      #expect(crashPrints[0]?.count == 64 && crashPrints[0]?.allSatisfy(\.isHexDigit) == true)
      #expect(crashPrints[0] == crashes.first?.signatureDigest)
      // Another bug (a non-fatal report) is another fingerprint.
      #expect(nonFatals.first.flatMap { fingerprints[$0.id] } != crashPrints[0])
    }
  }

  @Test func setUserNilClearsTheUser() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = CrumbsConfiguration(directory: directory.path)
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.setUser(id: "user-42")
      #expect(client.send(message: "with")?.report.attributes["enduser.id"] == "user-42")
      client.setUser(id: nil)
      #expect(client.attributes["enduser.id"] == nil)
      let report = try #require(client.send(message: "without")?.report)
      #expect(report.attributes["enduser.id"] == nil)
    }
  }
}
