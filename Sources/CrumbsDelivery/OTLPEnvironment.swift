// OTLPEnvironment.swift — the OpenTelemetry SDK environment variables Crumbs honours, read from
// an environment dictionary (the process's, or one a test or app hands in).
//
//   OTEL_SERVICE_NAME                     service.name (wins over the one in the next)
//   OTEL_RESOURCE_ATTRIBUTES              key=value,… (values percent-decoded); a malformed
//                                         list is discarded whole, as the SDK spec says
//   OTEL_EXPORTER_OTLP_LOGS_ENDPOINT      the logs URL, used as is
//   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT    the traces URL (closing spans), used as is
//   OTEL_EXPORTER_OTLP_METRICS_ENDPOINT   the metrics URL (session counts), used as is
//   OTEL_EXPORTER_OTLP_ENDPOINT           a base URL: /v1/logs (and /v1/traces, /v1/metrics) is
//                                         appended
//   OTEL_EXPORTER_OTLP_HEADERS            Name=value,… on every request (values percent-decoded;
//                                         all treated as secrets)
//   OTEL_EXPORTER_OTLP_{LOGS,TRACES,METRICS}_HEADERS
//                                         the same for one signal's requests, over the generic
//                                         list by name
//   OTEL_EXPORTER_OTLP_[LOGS_]PROTOCOL    http/protobuf or http/json; grpc is refused by name
//   OTEL_EXPORTER_OTLP_[LOGS_]COMPRESSION gzip or none
//   OTEL_EXPORTER_OTLP_[LOGS_]TIMEOUT     milliseconds
//
// Configuration in code wins: `apply(to:)` fills in only what the destination leaves unset
// (headers by name, compression, timeout, a traces or metrics URL given as is); an endpoint from
// the environment makes a destination only when the code configured no OTLP destination
// (CrumbsConfiguration). A malformed value is ignored and named in `problems`; nothing here traps.
//
// Entry points: OTLPEnvironment(_:) → problems, resource(appName:), destination(), apply(to:).
// Not signal-safe.

/// What the OTEL_* environment variables ask of an OTLP exporter.
public struct OTLPEnvironment: Sendable, Equatable {
  /// OTEL_SERVICE_NAME.
  public var serviceName: String?
  /// OTEL_RESOURCE_ATTRIBUTES, decoded.
  public var resourceAttributes: [String: String] = [:]
  /// The logs URL: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT with
  /// `/v1/logs` appended.
  public var logsURL: String?
  /// The traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT with
  /// `/v1/traces` appended; nil: derived from the logs URL (OTLPDestination.tracesURL).
  public var tracesURL: String?
  /// `tracesURL` came from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (it then applies to a destination
  /// configured in code too).
  public var tracesURLGivenAsIs = false
  /// The metrics URL: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT
  /// with `/v1/metrics` appended; nil: derived from the logs URL (OTLPDestination.metricsURL).
  public var metricsURL: String?
  /// `metricsURL` came from OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (it then applies to a destination
  /// configured in code too).
  public var metricsURLGivenAsIs = false
  /// OTEL_EXPORTER_OTLP_HEADERS: on every request, all secret.
  public var headers: [HTTPHeader] = []
  /// OTEL_EXPORTER_OTLP_LOGS_HEADERS, _TRACES_HEADERS and _METRICS_HEADERS: on that signal's
  /// requests only, over `headers` by name; all secret.
  public var signalHeaders: [OTLPDestination.Signal: [HTTPHeader]] = [:]
  public var encoding: OTLPDestination.Encoding?
  public var compression: OTLPDestination.Compression?
  /// Seconds.
  public var timeout: Double?
  /// Each malformed or unsupported value, with what was done instead.
  public var problems: [String] = []

  /// Reads `environment` (names are case-sensitive, as on Linux).
  public init(_ environment: [String: String]) {
    func value(_ name: String) -> (name: String, value: String)? {
      for full in ["OTEL_EXPORTER_OTLP_LOGS_" + name, "OTEL_EXPORTER_OTLP_" + name] {
        if let text = environment[full]?.trimmed(of: " \t"), !text.isEmpty { return (full, text) }
      }
      return nil
    }

    if let name = environment["OTEL_SERVICE_NAME"]?.trimmed(of: " \t"), !name.isEmpty { serviceName = name }
    if let list = environment["OTEL_RESOURCE_ATTRIBUTES"], !list.trimmed(of: " \t").isEmpty {
      switch Self.keyValueList(list) {
      case .success(let pairs): resourceAttributes = Dictionary(pairs, uniquingKeysWith: { _, last in last })
      case .failure(let reason): problems.append("OTEL_RESOURCE_ATTRIBUTES ignored: \(reason)")
      }
    }

    // A signal's own URL, as is; else the generic base with the signal's path.
    func signalURL(_ variable: String) -> String? {
      if let url = environment[variable]?.trimmed(of: " \t"), !url.isEmpty {
        if Self.isHTTPURL(url) { return url }
        problems.append("\(variable) ignored: \"\(url)\" is not an http(s) URL")
      }
      return nil
    }
    var base: String?
    if let text = environment["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trimmed(of: " \t"), !text.isEmpty {
      if Self.isHTTPURL(text) {
        base = text.hasSuffix("/") ? String(text.dropLast()) : text
      } else {
        problems.append("OTEL_EXPORTER_OTLP_ENDPOINT ignored: \"\(text)\" is not an http(s) URL")
      }
    }
    logsURL = signalURL("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") ?? base.map { $0 + "/v1/logs" }
    if let traces = signalURL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
      tracesURL = traces
      tracesURLGivenAsIs = true
    } else {
      tracesURL = base.map { $0 + "/v1/traces" }
    }
    if let metrics = signalURL("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
      metricsURL = metrics
      metricsURLGivenAsIs = true
    } else {
      metricsURL = base.map { $0 + "/v1/metrics" }
    }

    func headerList(_ name: String) -> [HTTPHeader] {
      guard let list = environment[name], !list.trimmed(of: " \t").isEmpty else { return [] }
      switch Self.keyValueList(list) {
      case .success(let pairs):
        // A name given twice: the last value.
        var headers: [HTTPHeader] = []
        for (key, value) in pairs {
          let header = HTTPHeader(key, value, isSecret: true)
          headers = headers.notNamed(in: [header]) + [header]
        }
        return headers
      case .failure(let reason):
        problems.append("\(name) ignored: \(reason)")
        return []
      }
    }
    headers = headerList("OTEL_EXPORTER_OTLP_HEADERS")
    for signal in OTLPDestination.Signal.allCases {
      let own = headerList("OTEL_EXPORTER_OTLP_\(signal.rawValue.uppercased())_HEADERS")
      if !own.isEmpty { signalHeaders[signal] = own }
    }

    if let (name, text) = value("PROTOCOL") {
      switch text {
      case "http/protobuf": encoding = .protobuf
      case "http/json": encoding = .json
      case "grpc":
        problems.append(
          "\(name)=grpc is not supported: Crumbs sends OTLP over HTTP; set http/protobuf or http/json "
            + "(sending http/protobuf)")
      default: problems.append("\(name)=\(text) is not a known protocol (sending http/protobuf)")
      }
    }
    if let (name, text) = value("COMPRESSION") {
      switch text {
      case "gzip": compression = .gzip
      case "none": compression = OTLPDestination.Compression.none
      default: problems.append("\(name)=\(text) is not gzip or none (sending uncompressed)")
      }
    }
    if let (name, text) = value("TIMEOUT") {
      if let milliseconds = Double(text), milliseconds > 0, milliseconds.isFinite {
        timeout = milliseconds / 1000
      } else {
        problems.append("\(name)=\(text) is not a positive number of milliseconds (ignored)")
      }
    }
  }

  /// The resource the environment describes: OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME
  /// over its `service.name`, then `appName` (configuration in code) over both.
  public func resource(appName: String?) -> [String: String] {
    var resource = resourceAttributes
    if let name = serviceName(appName: appName) { resource["service.name"] = name }
    return resource
  }

  /// The resource's `service.name`: `appName` when set, else OTEL_SERVICE_NAME, else none.
  public func serviceName(appName: String?) -> String? {
    if let appName, !appName.isEmpty { return appName }
    return serviceName
  }

  /// The destination the environment alone describes (nil without an endpoint).
  public func destination(maxAttachmentBytes: Int = 7 << 20) -> OTLPDestination? {
    guard let logsURL else { return nil }
    var destination = OTLPDestination(
      endpoint: logsURL, headers: headers, encoding: encoding ?? .protobuf,
      maxAttachmentBytes: maxAttachmentBytes)
    destination.appendsLogsPath = false
    destination.tracesEndpoint = tracesURL
    destination.metricsEndpoint = metricsURL
    destination.signalHeaders = signalHeaders
    destination.compression = compression ?? .none
    destination.timeout = timeout
    return destination
  }

  /// `destination` with what its configuration leaves unset taken from the environment: headers
  /// it does not name (a signal's own among that signal's, unless the code names them for every
  /// request or for that signal), compression, timeout, a traces or metrics URL given as is.
  public func apply(to destination: OTLPDestination, compressionSetInCode: Bool) -> OTLPDestination {
    var destination = destination
    let inCode = destination.headers
    destination.headers += headers.notNamed(in: inCode)
    for (signal, own) in signalHeaders {
      let added = own.notNamed(in: inCode + (destination.signalHeaders[signal] ?? []))
      if !added.isEmpty { destination.signalHeaders[signal, default: []] += added }
    }
    if !compressionSetInCode, let compression { destination.compression = compression }
    if destination.timeout == nil { destination.timeout = timeout }
    if destination.tracesEndpoint == nil, tracesURLGivenAsIs { destination.tracesEndpoint = tracesURL }
    if destination.metricsEndpoint == nil, metricsURLGivenAsIs { destination.metricsEndpoint = metricsURL }
    return destination
  }

  /// A W3C-Baggage-like list `key=value,key=value` with percent-encoded values (what
  /// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS hold); empty members are skipped.
  package static func keyValueList(_ text: String) -> Result<[(String, String)], ListError> {
    var pairs: [(String, String)] = []
    for (index, member) in text.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
      let member = member.trimmed(of: " \t")
      if member.isEmpty { continue }
      guard let equals = member.firstIndex(of: "=") else {
        return .failure(ListError(reason: "member \(index + 1) has no '='"))
      }
      let key = member[..<equals].trimmed(of: " \t")
      guard !key.isEmpty else { return .failure(ListError(reason: "member \(index + 1) has an empty key")) }
      guard let value = percentDecoded(member[member.index(after: equals)...].trimmed(of: " \t")) else {
        return .failure(ListError(reason: "the value of \(key) is not valid percent-encoded UTF-8"))
      }
      pairs.append((key, value))
    }
    return .success(pairs)
  }

  /// Why a list could not be read (never quotes a value: header values are secrets).
  package struct ListError: Error, Equatable, CustomStringConvertible {
    package var reason: String
    package var description: String { reason }
  }

  /// `%XX` sequences decoded; nil when one is malformed or the result is not UTF-8.
  package static func percentDecoded(_ text: String) -> String? {
    var bytes: [UInt8] = []
    var iterator = Array(text.utf8).makeIterator()
    while let byte = iterator.next() {
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard let high = iterator.next(), let low = iterator.next(),
        let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
      else { return nil }
      bytes.append(value)
    }
    return String(validating: bytes, as: UTF8.self)
  }

  /// Whether `text` is an http(s) URL with something after the scheme and no space or control
  /// character (one test for every endpoint read from the environment, OTEL_* and CRUMBS_*).
  package static func isHTTPURL(_ text: String) -> Bool {
    guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else { return false }
    return ["http://", "https://"].contains { text.hasPrefix($0) && text.utf8.count > $0.utf8.count }
  }
}
