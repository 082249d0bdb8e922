// ReportDestination.swift — the one requirement every backend format meets: turn a stored report
// into one HTTP request. OTLPDestination and BacktraceDestination implement it; a client adds its
// own by conforming. Not signal-safe.

import CrumbsRecorder
import CrumbsReports

/// A backend reports are delivered to.
///
/// Requirements:
/// - `name` is stable across launches and unique among an uploader's destinations: it keys the
///   destination's attempt state in each report's `delivery.json`. Renaming a destination makes
///   every pending report new to it.
/// - `request(for:stored:)` is pure with respect to the store: it reads the report's folder
///   (attachments) but never writes it. It runs on the uploader's thread, may take milliseconds,
///   and must not block on the network.
/// - Every credential the request carries is either a header marked `isSecret` or listed in
///   `DeliveryRequest.secrets`, so that it is redacted from everything the uploader prints or
///   stores.
/// - It throws `DeliveryError.unencodable` only when the report can never be sent (the report is
///   then dropped with that reason); an oversized or unreadable attachment is left out and named
///   in the request instead.
public protocol ReportDestination: Sendable {
  /// Stable key of this destination (e.g. `otlp`, `backtrace`).
  var name: String { get }
  /// The request delivering `report`, whose folder (attachments) is `stored`. `report` may differ
  /// from `stored.report`: the uploader's delegate may have changed it in `willSend`.
  func request(for report: CrashReport, stored: StoredReport) throws(DeliveryError) -> DeliveryRequest
}
