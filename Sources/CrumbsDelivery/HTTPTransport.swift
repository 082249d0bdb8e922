// HTTPTransport.swift — what delivery needs of the network: one blocking request per call.
// DeliveryTransport (below) is what Crumbs sends with: PlainHTTPTransport
// (HTTPTransport+Socket.swift) for plain http, CurlTransport (HTTPTransport+Curl.swift) for the
// rest; tests may pass their own.
// Not signal-safe.

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Sends one request and waits for the answer. Implementations must be safe to call from any
/// thread, must return (never hang) within their timeout, and must never raise SIGPIPE.
public protocol HTTPTransport: Sendable {
  func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError>
  /// Why nothing can be sent at all (the HTTP stack is not on the machine), in one line that
  /// says what to install; nil when requests can go out. The uploader asks before each pass that
  /// has reports to send: while it says something, no attempt is made or counted. Asked again,
  /// it looks again. Default: nil.
  func missingTransport() -> String?
  /// The uploader's pass ended: nothing is sent until the next one. A transport lets go of what
  /// it holds for sending (CurlTransport unloads libcurl when no request is in flight). Default:
  /// nothing.
  func endOfPass()
}

extension HTTPTransport {
  public func missingTransport() -> String? { nil }
  public func endOfPass() {}
}

/// The transport Crumbs sends with: plain http:// URLs it can reach directly through its own
/// socket client (PlainHTTPTransport: libcurl is never loaded for them), everything else —
/// https, http through a proxy named by `http_proxy` or `all_proxy`, user:password@ in a URL —
/// through libcurl (CurlTransport), which is unloaded again after each delivery pass.
/// `CRUMBS_PLAIN_HTTP=libcurl` in the environment sends plain http through libcurl too.
public struct DeliveryTransport: HTTPTransport {
  public let timeout: Double
  /// Asked at least once a second during a request: true abandons it (see CurlTransport.abandons).
  package var abandons: @Sendable () -> Bool = { false }

  public init(timeout: Double = 30) {
    self.timeout = CurlTransport.usableTimeout(timeout) ?? CurlTransport.defaultTimeout
  }

  public func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError> {
    if Self.sendsPlain(request.url) {
      var plain = PlainHTTPTransport(timeout: timeout)
      plain.abandons = abandons
      return plain.send(request)
    }
    var curl = CurlTransport(timeout: timeout)
    curl.abandons = abandons
    return curl.send(request)
  }

  /// Nil: plain http needs nothing installed. A request that needs libcurl where it is missing
  /// fails with `.unavailable`, which the uploader does not count as an attempt. With
  /// `CRUMBS_PLAIN_HTTP=libcurl`, libcurl's absence, as CurlTransport says it.
  public func missingTransport() -> String? {
    Self.plainThroughLibcurl ? CurlTransport.missingTransport() : nil
  }

  public func endOfPass() { CurlTransport.unloadIfUnused() }

  /// Whether `url` goes through PlainHTTPTransport.
  static func sendsPlain(_ url: String) -> Bool {
    guard !plainThroughLibcurl, PlainHTTPURL(parsing: url) != nil else { return false }
    // A proxy applies as libcurl decides (no_proxy included): leave such requests to it.
    for name in ["http_proxy", "all_proxy", "ALL_PROXY"] {
      if let value = getenv(name), value.pointee != 0 { return false }
    }
    return true
  }

  static var plainThroughLibcurl: Bool {
    guard let value = getenv("CRUMBS_PLAIN_HTTP") else { return false }
    return String(cString: value) == "libcurl"
  }
}
