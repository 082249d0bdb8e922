// DeliveryState.swift — what delivery remembers about a report, kept with the report so that it
// survives restarts and moves with the folder. The store owns the format (as crashpad's report
// database owns RecordUploadAttempt); the uploader (CrumbsDelivery) decides what goes in it:
//
//   reports/pending/<id>/delivery.json   per destination: attempts, next attempt time, last error
//   reports/dropped/<id>/dropped.reason  why it was dropped (413, other 4xx, retry limit, eviction)
//
// delivery.json is written temp + fsync + rename like every store file. An attempt is counted
// (and written) *before* the request goes out, as crashpad does: a report whose upload crashes
// or hangs the process still uses up its attempts instead of retrying forever.
// Why a file next to report.json and not crashpad's retry count in the folder name: the state
// has several fields per destination (attempts, next time, last error, outcome), and a folder
// name change would be a rename the reader of `pending/` must race with.
//
// Entry points: StoredReport.deliveryState() (read, before each attempt) →
// writeDeliveryState(_:) (the attempt counted, then its outcome) → droppedReason() (CLI).
// Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import FoundationEssentials

/// A report's delivery history (`delivery.json`).
public struct DeliveryState: Codable, Sendable, Equatable {
  /// How delivery to one destination ended.
  public enum Outcome: String, Codable, Sendable {
    /// A 2xx answer.
    case delivered
    /// Refused for good (413, another 4xx, unencodable) or given up (retry limit).
    case dropped
  }

  /// One destination's history.
  public struct Destination: Codable, Sendable, Equatable {
    /// Attempts made and counted towards `retryLimit` (a 429 answer is not counted).
    public var attempts: Int = 0
    /// Not before this time (ns since the epoch); 0 means as soon as possible.
    public var nextAttemptUnixNano: UInt64 = 0
    public var lastAttemptUnixNano: UInt64?
    /// The last failure, redacted (e.g. `HTTP 503`, `timed out`).
    public var lastError: String?
    /// The last HTTP status received.
    public var lastStatus: Int?
    /// Set once the destination is done with this report.
    public var outcome: Outcome?

    public init() {}

    enum CodingKeys: String, CodingKey {
      case attempts
      case nextAttemptUnixNano = "next_attempt_unix_nano"
      case lastAttemptUnixNano = "last_attempt_unix_nano"
      case lastError = "last_error"
      case lastStatus = "last_status"
      case outcome
    }
  }

  /// By destination name.
  public var destinations: [String: Destination] = [:]
  /// Sent to no destination before this time (ns since the epoch); nil: no hold. A hang report
  /// waits so for its hang to end (HangDetection.deliveryHold), to go out with its duration.
  public var heldUntilUnixNano: UInt64?

  enum CodingKeys: String, CodingKey {
    case destinations
    case heldUntilUnixNano = "held_until_unix_nano"
  }

  public init() {}

  public static let fileName = ReportStore.deliveryStateFileName
  public static let droppedReasonFileName = ReportStore.droppedReasonFileName
}

extension StoredReport {
  /// The report's delivery state; empty when it has never been attempted (or the file is
  /// damaged, which then costs at most one extra delivery: at-least-once).
  public func deliveryState() -> DeliveryState {
    guard let bytes = try? readFile(DeliveryState.fileName, limit: 1 << 20),
      let state = try? JSONDecoder().decode(DeliveryState.self, from: Data(bytes))
    else { return DeliveryState() }
    return state
  }

  /// Why the report was dropped, when it was.
  public func droppedReason() -> String? {
    (try? readFile(DeliveryState.droppedReasonFileName, limit: 1 << 16)).map { bytes in
      let newline = UInt8(ascii: "\n")
      let text = bytes.drop { $0 == newline }.reversed().drop { $0 == newline }.reversed()
      return String(decoding: text, as: UTF8.self)
    }
  }

  package func writeDeliveryState(_ state: DeliveryState) throws(SystemCallError) {
    try writeFile(DeliveryState.fileName, state.encoded)
  }

  /// Replaces the report of a folder still pending (a hang report when its hang ended) and
  /// releases its hold: delivery then sends the new one. Atomic per file; a folder that
  /// delivery has moved on meanwhile is left as it is (`notFound`).
  package func replaceReport(_ report: CrashReport) throws(ReportStoreError) {
    guard state == .pending, report.id == self.report.id else { throw .notFound(report.id) }
    do throws(SystemCallError) {
      try writeFile("report.json", try ReportStore.encode(report))
      var delivery = deliveryState()
      delivery.heldUntilUnixNano = nil
      try writeDeliveryState(delivery)
    } catch {
      throw error.errno == .noSuchFileOrDirectory ? .notFound(report.id) : .system(error)
    }
  }
}

extension DeliveryState {
  /// delivery.json's bytes.
  var encoded: [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return (try? encoder.encode(self)).map(Array.init) ?? []
  }
}
