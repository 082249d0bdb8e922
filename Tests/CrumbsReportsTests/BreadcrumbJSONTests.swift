// BreadcrumbJSONTests.swift — the one JSON form of a breadcrumb (the trail's lines, and what
// `crumbs ring dump --json` prints): keys in the documented order, optional keys only when true.

import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct BreadcrumbJSONTests {
  static func breadcrumb(
    message: String = "GET \"/x\"\n", messageTruncated: Bool = false, attributesTruncated: Bool = false,
    fromSignalHandler: Bool = false
  ) -> Breadcrumb {
    Breadcrumb(
      id: 1 << 48 | 7, threadSequence: 42, threadID: 4242, wallTimeNanoseconds: 1_795_320_611_123_456_789,
      monotonicNanoseconds: 5, ticks: 6, level: .warning, type: .http, message: message,
      attributes: [.init(key: "status", value: "500"), .init(key: "url", value: "/x")],
      messageTruncated: messageTruncated, attributesTruncated: attributesTruncated,
      fromSignalHandler: fromSignalHandler)
  }

  @Test func aPlainBreadcrumbHasTheEightKeysInOrder() {
    #expect(
      Self.breadcrumb().jsonLine()
        == #"{"timestamp":"2026-11-22T04:10:11.123456Z","id":281474976710663,"seq":42,"thread":4242,"#
        + #""level":"warning","type":"http","message":"GET \"/x\"\n","#
        + #""attributes":{"status":"500","url":"/x"}}"#)
  }

  @Test func truncationNamesItsPartsAndASignalHandlerSaysSo() {
    #expect(
      Self.breadcrumb(messageTruncated: true).jsonLine().hasSuffix(
        #""attributes":{"status":"500","url":"/x"},"truncated":true,"truncated_parts":["message"]}"#))
    #expect(
      Self.breadcrumb(attributesTruncated: true).jsonLine().hasSuffix(
        #","truncated":true,"truncated_parts":["attributes"]}"#))
    #expect(
      Self.breadcrumb(messageTruncated: true, attributesTruncated: true, fromSignalHandler: true).jsonLine()
        .hasSuffix(#","truncated":true,"truncated_parts":["message","attributes"],"signal_handler":true}"#))
    #expect(Self.breadcrumb(fromSignalHandler: true).jsonLine().hasSuffix(#"},"signal_handler":true}"#))
  }

  @Test func theTrailIsOneLinePerBreadcrumb() throws {
    let crumbs = [Self.breadcrumb(), Self.breadcrumb(message: "second", fromSignalHandler: true)]
    let text = String(decoding: TrailAttachment.jsonLines(crumbs), as: UTF8.self)
    #expect(text == crumbs.map { $0.jsonLine() + "\n" }.joined())
    for line in text.split(separator: "\n") {
      #expect(try JSONSerialization.jsonObject(with: Data(line.utf8)) is [String: Any])
    }
  }
}
