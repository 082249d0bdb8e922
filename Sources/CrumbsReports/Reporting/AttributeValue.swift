// AttributeValue.swift — the value of one of the app's report attributes (`setAttribute`,
// `CrashReport.attributes`): a string, a bool, an integer or a double, sent typed (OTLP AnyValue
// string_value/bool_value/int_value/double_value; Backtrace JSON strings, booleans and numbers),
// so a backend can sum, compare and filter them without parsing.
//
// Persisted (report.json, the session file) as JSON: a string as a JSON string (so reports and
// session files written before attributes were typed, all strings, read as they were), a bool as
// a JSON bool, an integer as a JSON integer, and a double as `{"double": 2.5}` — a JSON number
// alone does not keep 3.0 apart from 3, and a reader would turn the double into an integer. A
// double that is not finite (JSON has no NaN nor infinity) is written as its text and reads
// back as that string.
//
// Breadcrumb attributes stay strings: they are written on the hot path into fixed ring slots.
// Not signal-safe (ordinary Swift).

/// The value of a report attribute.
public enum AttributeValue: Sendable, Hashable {
  case string(String)
  case bool(Bool)
  case int(Int64)
  case double(Double)

  /// The value as text, the way a string attribute would hold it (`true`, `42`, `2.5`).
  public var text: String {
    switch self {
    case .string(let text): text
    case .bool(let flag): flag ? "true" : "false"
    case .int(let number): String(number)
    case .double(let number): String(number)
    }
  }

  /// The string, for a string value; nil for the other types.
  public var stringValue: String? {
    if case .string(let text) = self { return text }
    return nil
  }

  /// The JSON this value is persisted as (see the file comment), for the writers that build JSON
  /// by hand (SessionMetadata.encoded).
  package var json: String {
    switch self {
    case .string(let text): jsonQuoted(text)
    case .bool, .int: text
    case .double(let number) where number.isFinite: "{\"double\":" + String(number) + "}"
    case .double: jsonQuoted(text)
    }
  }
}

extension AttributeValue: CustomStringConvertible {
  public var description: String { text }
}

extension AttributeValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral,
  ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral
{
  public init(stringLiteral value: String) { self = .string(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(integerLiteral value: Int64) { self = .int(value) }
  public init(floatLiteral value: Double) { self = .double(value) }
}

extension AttributeValue: Codable {
  private enum CodingKeys: String, CodingKey {
    case double
  }

  public init(from decoder: any Decoder) throws {
    if let keyed = try? decoder.container(keyedBy: CodingKeys.self) {
      self = .double(try keyed.decode(Double.self, forKey: .double))
      return
    }
    let container = try decoder.singleValueContainer()
    if let text = try? container.decode(String.self) {
      self = .string(text)
    } else if let flag = try? container.decode(Bool.self) {
      self = .bool(flag)
    } else if let number = try? container.decode(Int64.self) {
      self = .int(number)
    } else {
      // A fraction written by another writer than ours.
      self = .double(try container.decode(Double.self))
    }
  }

  public func encode(to encoder: any Encoder) throws {
    switch self {
    case .string(let text):
      var container = encoder.singleValueContainer()
      try container.encode(text)
    case .bool(let flag):
      var container = encoder.singleValueContainer()
      try container.encode(flag)
    case .int(let number):
      var container = encoder.singleValueContainer()
      try container.encode(number)
    case .double(let number) where number.isFinite:
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(number, forKey: .double)
    case .double:
      var container = encoder.singleValueContainer()
      try container.encode(text)
    }
  }
}

extension [String: AttributeValue] {
  /// String attributes as report attributes (what `send(message:attributes:)` and the reserved
  /// trace keys take).
  package init(strings: [String: String]) {
    self = strings.mapValues { .string($0) }
  }

  /// The string attributes alone (the reserved trace keys are strings).
  package var strings: [String: String] {
    compactMapValues(\.stringValue)
  }
}
