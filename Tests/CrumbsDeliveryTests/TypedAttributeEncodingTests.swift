// TypedAttributeEncodingTests.swift — a report's typed attributes in both OTLP encodings, read by
// the official classes (OTLP/JSON spells an int_value as a string, as its mapping says; the
// decoder must still see an int), and the grouping hint on the record. The end-to-end path (a
// child's session file, the next launch, a loopback server) is TypedAttributesTests.

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsReports

@Suite struct TypedAttributeEncodingTests {
  @Test(arguments: [OTLPDestination.Encoding.protobuf, .json])
  func typedAttributesAreTheirAnyValueMember(encoding: OTLPDestination.Encoding) throws {
    let fixture = try ReportFixture()
    var report = fixture.reports[0].report
    report.attributes = [
      "feature.beta": .bool(false), "cart.items": .int(-7), "cart.weight_kg": .double(4.0),
      "region": .string("eu-west-1"), "big": .int(Int64.max),
    ]
    let destination = OTLPDestination(endpoint: "http://127.0.0.1:1", encoding: encoding)
    let request = try destination.request(for: report, stored: fixture.reports[0])
    if encoding == .json {
      let text = String(decoding: request.body, as: UTF8.self)
      #expect(text.contains(#"{"intValue":"9223372036854775807"}"#), "an int is a string in OTLP/JSON")
    }
    let record = try #require(
      (try decodeOTLP(request.body, json: encoding == .json)["records"] as? [[String: Any]])?.first)
    let types = try #require(record["attribute_types"] as? [String: String])
    let attributes = try #require(record["attributes"] as? [String: Any])
    #expect(types["feature.beta"] == "bool_value" && attributes["feature.beta"] as? Bool == false)
    #expect(types["cart.items"] == "int_value" && attributes["cart.items"] as? Int == -7)
    #expect(types["big"] == "int_value" && (attributes["big"] as? NSNumber)?.int64Value == Int64.max)
    #expect(
      types["cart.weight_kg"] == "double_value"
        && (attributes["cart.weight_kg"] as? NSNumber)?.doubleValue == 4.0)
    #expect(types["region"] == "string_value" && attributes["region"] as? String == "eu-west-1")
    #expect(attributes["crumbs.signature"] as? String == report.signature)
  }
}
