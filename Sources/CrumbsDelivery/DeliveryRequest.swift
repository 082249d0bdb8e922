// DeliveryRequest.swift — what every destination hands the transport: one HTTP request for one
// report, with headers that know whether they are secret, and the redaction every log line,
// error and stored reason passes through.
//
// Secrets (auth headers, the Backtrace token) live only in the request that goes on the wire.
// Anything that leaves the uploader as text — DeliveryError descriptions, dropped.reason,
// delivery.json, delegate results, CLI output — is built from `Redactor.redact(_:)`.
// Not signal-safe.

/// One HTTP header. A secret header's value is sent but never printed, logged or stored.
public struct HTTPHeader: Sendable, Equatable, CustomStringConvertible {
  public var name: String
  public var value: String
  /// Marks the value as a credential (e.g. `Authorization`, an API key).
  public var isSecret: Bool

  public init(_ name: String, _ value: String, isSecret: Bool = false) {
    self.name = name
    self.value = value
    self.isSecret = isSecret
  }

  /// `Name: value`, or `Name: <redacted>` for a secret header.
  public var description: String { "\(name): \(isSecret ? Redactor.placeholder : value)" }

  /// Parses `Name: value` (as given on a command line); nil without a colon or with an empty name.
  public init?(parsing text: String, isSecret: Bool = false) {
    guard let colon = text.firstIndex(of: ":") else { return nil }
    let name = text[..<colon].trimmed(of: " \t")
    guard !name.isEmpty else { return nil }
    self.init(name, text[text.index(after: colon)...].trimmed(of: " \t"), isSecret: isSecret)
  }
}

extension [HTTPHeader] {
  /// These headers but those whose names `other` has (names compare without case): what to keep
  /// of a list that `other` goes over, or what to add of it to `other` without changing a name
  /// `other` sets.
  func notNamed(in other: [HTTPHeader]) -> [HTTPHeader] {
    let named = Set(other.map { $0.name.lowercased() })
    return filter { !named.contains($0.name.lowercased()) }
  }
}

/// One HTTP request carrying one report to one destination.
public struct DeliveryRequest: Sendable {
  /// The destination's `name` (the key of its state in delivery.json).
  public var destination: String
  public var reportID: String
  public var method: String = "POST"
  /// The full URL, secrets included (a Backtrace token may be in the query).
  public var url: String
  public var headers: [HTTPHeader]
  public var body: [UInt8]
  /// The values that must never be printed: secret header values, tokens.
  public var secrets: [String]
  /// Seconds the server may stay silent (nil: the transport's own timeout).
  public var timeout: Double?
  /// How many items (OTLP: log records) the body carries, for reading a partial success.
  public var itemCount: Int
  /// The most bytes of the answer's body kept, for a download (a debug file): an answer whose
  /// Content-Length claims more is cut before its first body byte, one that streams more is cut
  /// there; either comes back with `bodyTruncated`. Nil (a delivery): the first
  /// `CurlTransport.maxResponseBodyBytes` of the body are read, whatever it claims.
  public var maxResponseBodyBytes: Int? = nil

  public init(
    destination: String, reportID: String, url: String, headers: [HTTPHeader], body: [UInt8],
    secrets: [String] = [], timeout: Double? = nil, itemCount: Int = 1
  ) {
    self.destination = destination
    self.reportID = reportID
    self.url = url
    self.headers = headers
    self.body = body
    self.secrets = secrets
    self.timeout = timeout
    self.itemCount = itemCount
  }

  /// Everything this request must hide: the given secrets and every secret header's value.
  public var redactor: Redactor { Redactor(secrets: secrets + headers.filter(\.isSecret).map(\.value)) }

  /// The URL with secrets replaced, for messages.
  public var redactedURL: String { redactor.redact(url) }

  /// The value of the first header called `name` (case-insensitive).
  public func header(_ name: String) -> String? {
    headers.first { $0.name.lowercased() == name.lowercased() }?.value
  }
}

/// Replaces secret values (as given, and percent-encoded as they appear in URLs) in text.
public struct Redactor: Sendable {
  public static let placeholder = "<redacted>"
  public var secrets: [String]

  public init(secrets: [String]) {
    // Longest first, so a secret that contains another is replaced whole.
    self.secrets = Set(secrets.filter { !$0.isEmpty }).sorted { $0.count > $1.count }
  }

  public func redact(_ text: String) -> String {
    var text = text
    for secret in secrets {
      for form in Set([secret, Self.percentEncoded(secret)]) where text.contains(form) {
        text = text.replacing(form, with: Self.placeholder)
      }
    }
    return text
  }

  /// RFC 3986 unreserved characters kept, everything else %XX (what a query value needs).
  public static func percentEncoded(_ text: String) -> String {
    var result = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "~"):
        result.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        let hex = String(byte, radix: 16, uppercase: true)
        result += "%" + (hex.count == 1 ? "0" + hex : hex)
      }
    }
    return result
  }
}

/// What a destination answered, as far as delivery cares.
public struct HTTPResponse: Sendable, Equatable {
  public var status: Int
  /// Header names lowercased.
  public var headers: [String: String]
  /// The start of the body: at most the request's `maxResponseBodyBytes` are read.
  public var body: [UInt8]
  /// Whether the body went on past what was read (over the limit, or cut by the connection).
  public var bodyTruncated: Bool
  /// Whether the whole request body had been sent when the answer came. A server may answer
  /// before reading the request; a 2xx then does not mean the report arrived.
  public var requestSent: Bool

  public init(
    status: Int, headers: [String: String] = [:], body: [UInt8] = [], bodyTruncated: Bool = false,
    requestSent: Bool = true
  ) {
    self.status = status
    self.headers = Dictionary(
      headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
    self.body = body
    self.bodyTruncated = bodyTruncated
    self.requestSent = requestSent
  }
}

/// Why a request got no HTTP answer. Descriptions never contain secrets (they carry no URL).
public enum TransportError: Error, Sendable, Equatable, CustomStringConvertible {
  /// No answer within the request timeout.
  case timedOut
  /// Nobody listening (connection refused, host unreachable, name not resolved).
  case cannotConnect
  /// The connection broke during the exchange (reset, closed mid-upload).
  case connectionLost
  /// The URL could not be parsed.
  case invalidURL
  /// No HTTP stack to send with (libcurl.so.4 could not be loaded), and why.
  case unavailable(String)
  /// The answer's header lines went past `ResponseHeaders.maxBytes` or `maxLines` before a final
  /// status and its headers ended (a server or proxy streaming headers).
  case headersTooLarge
  /// Anything else the HTTP stack reported, by its code (libcurl's CURLcode).
  case other(code: Int)

  public var description: String {
    switch self {
    case .timedOut: "timed out"
    case .cannotConnect: "cannot connect"
    case .connectionLost: "connection lost"
    case .invalidURL: "invalid URL"
    case .unavailable(let reason): "no HTTP transport: \(reason)"
    case .headersTooLarge:
      "the answer's headers went past \(ResponseHeaders.maxBytes >> 10) KiB or \(ResponseHeaders.maxLines) lines"
    case .other(let code): "transport error \(code)"
    }
  }
}

/// Why a report could not be turned into a request.
public enum DeliveryError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The report or an attachment could not be read or encoded (never retried).
  case unencodable(String)
  /// The destination's configuration is unusable (e.g. a malformed URL).
  case misconfigured(String)

  public var description: String {
    switch self {
    case .unencodable(let reason): "cannot encode report: \(reason)"
    case .misconfigured(let reason): "destination misconfigured: \(reason)"
    }
  }
}

extension StringProtocol {
  package func trimmed(of set: String) -> String {
    let characters = Set(set)
    var slice = Substring(self)
    while let first = slice.first, characters.contains(first) { slice = slice.dropFirst() }
    while let last = slice.last, characters.contains(last) { slice = slice.dropLast() }
    return String(slice)
  }
}
