// ReportDestination.swift — the one requirement every backend format meets: turn a stored report
// into one HTTP request; and what a destination's answers mean (`verdict(on:to:)`, with the
// general HTTP policy as its default). OTLPDestination and BacktraceDestination implement it; a
// client adds its own by conforming. Not signal-safe.

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
  /// What an answer to `request` means. Called for every answer whose request was sent whole
  /// (a 2xx that came before that is retried by the uploader whatever this says). Must not
  /// trap on any body: it comes from the network. Default: `generalVerdict(on:)`.
  func verdict(on answer: HTTPResponse, to request: DeliveryRequest) -> AnswerVerdict
}

extension ReportDestination {
  public func verdict(on answer: HTTPResponse, to request: DeliveryRequest) -> AnswerVerdict {
    Self.generalVerdict(on: answer)
  }

  /// The policy for a server that says nothing more specific: 2xx delivered; 429 throttled;
  /// 408, 5xx, 1xx and 3xx retried; 413 and every other 4xx dropped (the same bytes would be
  /// refused again).
  public static func generalVerdict(on answer: HTTPResponse) -> AnswerVerdict {
    switch answer.status {
    case 200..<300: .delivered(nil)
    case 429: .throttled
    case 408, 500..<600, 100..<200, 300..<400: .retry
    default: .dropped(nil)
    }
  }
}

/// What an HTTP answer means for a report (see ReportDestination.verdict(on:to:)).
public enum AnswerVerdict: Sendable, Equatable {
  /// Accepted, possibly in part (the server's own account of what it rejected).
  case delivered(PartialSuccess?)
  /// Paused: this destination is not tried again before the answer's Retry-After (or the
  /// default pause); the attempt is not counted.
  case throttled
  /// Failed; retried with backoff while attempts remain (later, when the answer's Retry-After
  /// asks for longer).
  case retry
  /// Refused for good: the report is not sent there again. The reason, when given, replaces
  /// the default ("HTTP <status>: <start of the body>").
  case dropped(String?)
}

/// A server's account of what it rejected from an accepted request (OTLP's partial success).
public struct PartialSuccess: Sendable, Equatable, CustomStringConvertible {
  /// How many items (OTLP: log records) it rejected.
  public var rejected: Int64
  /// Its explanation (may be empty).
  public var message: String

  public init(rejected: Int64, message: String) {
    self.rejected = rejected
    self.message = message
  }

  public var description: String {
    "partial success: \(rejected) record(s) rejected" + (message.isEmpty ? "" : ": " + message)
  }
}
