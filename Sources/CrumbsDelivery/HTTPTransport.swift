// HTTPTransport.swift — what delivery needs of the network: one blocking request per call.
// CurlTransport (HTTPTransport+Curl.swift) is the one implementation; tests may pass their own.
// Not signal-safe.

/// Sends one request and waits for the answer. Implementations must be safe to call from any
/// thread, must return (never hang) within their timeout, and must never raise SIGPIPE.
public protocol HTTPTransport: Sendable {
  func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError>
  /// Why nothing can be sent at all (the HTTP stack is not on the machine), in one line that
  /// says what to install; nil when requests can go out. The uploader asks before each pass that
  /// has reports to send: while it says something, no attempt is made or counted. Asked again,
  /// it looks again. Default: nil.
  func missingTransport() -> String?
}

extension HTTPTransport {
  public func missingTransport() -> String? { nil }
}
