// HTTPTransport.swift — what delivery needs of the network: one blocking request per call.
// CurlTransport (HTTPTransport+Curl.swift) is the one implementation; tests may pass their own.
// Not signal-safe.

/// Sends one request and waits for the answer. Implementations must be safe to call from any
/// thread, must return (never hang) within their timeout, and must never raise SIGPIPE.
public protocol HTTPTransport: Sendable {
  func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError>
}
