// TrailAttachment+Benchmarks.swift — the report path's trail steps on a ring's contents as read
// (their text as bytes, BreadcrumbSlots), for the benchmarks' step-by-step figures
// (Benchmarks/Sources/ReportFigures): what PostMortemProcessor and NonFatalReportBuilder do, one
// step at a time. SPI, not API for apps: an app works on `Breadcrumb`s (`redacting(_:)`,
// `jsonLines(_:)` over arrays). Not signal-safe.

import CrumbsRecorder

extension Redaction {
  /// `contents` with its breadcrumbs redacted on their bytes, as a report's trail is.
  @_spi(Benchmarks) public func redacting(_ contents: RingContents) -> RingContents {
    redactor().contents(contents)
  }
}

extension TrailAttachment {
  /// The trail's JSON Lines of `contents`, written from its bytes, as a report's is.
  @_spi(Benchmarks) public static func jsonLines(_ contents: RingContents) -> [UInt8] {
    jsonLines(contents.slots)
  }
}
