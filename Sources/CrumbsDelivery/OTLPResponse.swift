// OTLPResponse.swift — what an OTLP/HTTP collector answers, as far as delivery cares: the
// partial success of an `ExportLogsServiceResponse` (collector/logs/v1/logs_service.proto), in
// binary protobuf or OTLP/JSON, and which statuses the OTLP specification calls retryable.
//
//   ExportLogsServiceResponse:  partial_success 1 (message)
//   ExportLogsPartialSuccess:   rejected_log_records 1 (int64), error_message 2 (string)
//   (ExportMetricsPartialSuccess: rejected_data_points 1, error_message 2; ExportTracePartialSuccess:
//   rejected_spans 1, error_message 2: the same fields)
//
// Entry points: OTLPResponse.verdict(on:itemCount:) → partialSuccess(in:). The body comes from the
// network: every read is bounds-checked and nothing here traps. Not signal-safe.

import FoundationEssentials

enum OTLPResponse {
  /// The OTLP/HTTP answer policy (OTLP specification, "Failures" and "Throttling"): 2xx
  /// delivered, with its partial success if any (never retried); 429, 502, 503 and 504
  /// retryable — 429 pauses the destination, the others back off, and a Retry-After is honoured
  /// on either; every other 4xx and 5xx dropped (a 500 included); 1xx and 3xx as the general
  /// policy says (retried: a redirect is never followed). A partial success that rejected
  /// every record is a drop: nothing of the report arrived.
  static func verdict(on answer: HTTPResponse, itemCount: Int) -> AnswerVerdict {
    switch answer.status {
    case 200..<300:
      guard let partial = partialSuccess(in: answer) else { return .delivered(nil) }
      if partial.rejected >= Int64(max(itemCount, 1)) {
        return .dropped("the collector rejected every record (\(partial))")
      }
      return .delivered(partial)
    case 429: return .throttled
    case 502, 503, 504: return .retry
    case 400..<600: return .dropped(statusMessage(in: answer))
    // Not a refusal: a redirect (never followed) or an informational answer, as elsewhere.
    default: return OTLPDestination.generalVerdict(on: answer)
    }
  }

  /// The message of a refusal's `google.rpc.Status` body (field 2), when it is binary protobuf
  /// (an OTLP/JSON or text body is excerpted by the uploader as it is).
  static func statusMessage(in answer: HTTPResponse) -> String? {
    guard answer.headers["content-type"]?.lowercased().contains("protobuf") == true else { return nil }
    var reader = ProtobufReader(answer.body[...])
    var message: String?
    while let (field, value) = reader.next() {
      if field == 2, case .bytes(let text) = value {
        message = String(decoding: text.prefix(200), as: UTF8.self)
      }
    }
    return reader.isValid ? message : nil
  }

  /// The partial success in a 2xx answer's body: nil when there is none (no body, an empty
  /// message, zero rejected and no message) or the body is not a response of either encoding.
  static func partialSuccess(in answer: HTTPResponse) -> PartialSuccess? {
    guard !answer.body.isEmpty, !answer.bodyTruncated else { return nil }
    let type = answer.headers["content-type"]?.lowercased() ?? ""
    let found: PartialSuccess?
    if type.contains("json") || answer.body.first == UInt8(ascii: "{") {
      found = json(answer.body)
    } else {
      found = protobuf(answer.body)
    }
    guard let found, found.rejected != 0 || !found.message.isEmpty else { return nil }
    return found
  }

  /// A binary `ExportLogsServiceResponse`.
  static func protobuf(_ body: [UInt8]) -> PartialSuccess? {
    var outer = ProtobufReader(body[...])
    var result: PartialSuccess?
    while let (field, value) = outer.next() {
      guard field == 1, case .bytes(let inner) = value else { continue }
      var reader = ProtobufReader(inner)
      var partial = PartialSuccess(rejected: 0, message: "")
      while let (field, value) = reader.next() {
        switch (field, value) {
        case (1, .varint(let number)): partial.rejected = Int64(bitPattern: number)
        case (2, .bytes(let text)): partial.message = String(decoding: text, as: UTF8.self)
        default: continue
        }
      }
      guard reader.isValid else { return nil }
      result = partial
    }
    return outer.isValid ? result : nil
  }

  /// An OTLP/JSON `ExportLogsServiceResponse` (lowerCamelCase or the proto names; the int64 as a
  /// string or a number).
  static func json(_ body: [UInt8]) -> PartialSuccess? {
    struct Response: Decodable {
      var partial: Partial?
      enum CodingKeys: String, CodingKey { case partialSuccess, partial_success }
      init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        partial =
          try container.decodeIfPresent(Partial.self, forKey: .partialSuccess)
          ?? container.decodeIfPresent(Partial.self, forKey: .partial_success)
      }
    }
    struct Partial: Decodable {
      var rejected: Int64 = 0
      var message = ""
      enum CodingKeys: String, CodingKey {
        // Metrics and traces responses (ExportMetricsPartialSuccess, ExportTracePartialSuccess)
        // name field 1 rejected_data_points and rejected_spans.
        case rejectedLogRecords, rejected_log_records, rejectedDataPoints, rejected_data_points
        case rejectedSpans, rejected_spans
        case errorMessage, error_message
      }
      init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        for key in [
          CodingKeys.rejectedLogRecords, .rejected_log_records, .rejectedDataPoints, .rejected_data_points,
          .rejectedSpans, .rejected_spans,
        ]
        where container.contains(key) {
          if let number = try? container.decode(Int64.self, forKey: key) {
            rejected = number
          } else if let text = try? container.decode(String.self, forKey: key), let number = Int64(text) {
            rejected = number
          }
        }
        message =
          (try? container.decodeIfPresent(String.self, forKey: .errorMessage))
          ?? (try? container.decodeIfPresent(String.self, forKey: .error_message)) ?? ""
      }
    }
    guard let response = try? JSONDecoder().decode(Response.self, from: Data(body)) else { return nil }
    return response.partial.map { PartialSuccess(rejected: $0.rejected, message: $0.message) }
  }
}

/// Reads protobuf fields one at a time: varints, length-delimited payloads, and fixed-size
/// fields skipped. Stops (and `isValid` turns false) at the first malformed byte.
struct ProtobufReader {
  enum Value {
    case varint(UInt64)
    case bytes(ArraySlice<UInt8>)
    case fixed
  }

  private var remaining: ArraySlice<UInt8>
  private(set) var isValid = true

  init(_ bytes: ArraySlice<UInt8>) { remaining = bytes }

  mutating func next() -> (UInt64, Value)? {
    guard isValid, !remaining.isEmpty else { return nil }
    guard let key = varint() else { return fail() }
    switch key & 7 {
    case 0:
      guard let number = varint() else { return fail() }
      return (key >> 3, .varint(number))
    case 1, 5:
      let size = key & 7 == 1 ? 8 : 4
      guard remaining.count >= size else { return fail() }
      remaining = remaining.dropFirst(size)
      return (key >> 3, .fixed)
    case 2:
      guard let length = varint(), length <= UInt64(remaining.count) else { return fail() }
      let payload = remaining.prefix(Int(length))
      remaining = remaining.dropFirst(Int(length))
      return (key >> 3, .bytes(payload))
    default:
      return fail()
    }
  }

  private mutating func fail() -> (UInt64, Value)? {
    isValid = false
    return nil
  }

  private mutating func varint() -> UInt64? {
    var value: UInt64 = 0
    var shift: UInt64 = 0
    while let byte = remaining.first {
      remaining = remaining.dropFirst()
      guard shift < 64 else { return nil }
      value |= UInt64(byte & 0x7f) << shift
      if byte < 0x80 { return value }
      shift += 7
    }
    return nil
  }
}
