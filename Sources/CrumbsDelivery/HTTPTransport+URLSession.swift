// HTTPTransport+URLSession.swift — the network under delivery: one blocking POST per call, on
// the uploader's thread, through FoundationNetworking's URLSession (libcurl underneath, so
// http and https alike).
//
// SIGPIPE: libcurl never lets a broken connection raise SIGPIPE here. URLSession sets
// CURLOPT_NOSIGNAL, and libcurl sends with MSG_NOSIGNAL on Linux; DeliveryTests checks it with
// a server that closes the connection in the middle of a large upload while SIGPIPE is at its
// default action (which would kill the test process).
// Redirects are never followed: a 3xx comes back as the answer (a failed attempt for the
// uploader). Following one would re-send the report, and its secret headers, to wherever the
// server points — another origin included — and 301–303 would turn the POST into a GET.
// Entry points: URLSessionTransport(timeout:) → send(_:).
// Not signal-safe.

import Foundation
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Sends one request and waits for the answer. Implementations must be safe to call from any
/// thread, must return (never hang) within their timeout, and must never raise SIGPIPE.
public protocol HTTPTransport: Sendable {
  func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError>
}

/// URLSession, one request at a time, with its own session (no shared cookies or cache).
public final class URLSessionTransport: HTTPTransport {
  private let session: URLSession
  /// Seconds without progress before a request fails as `timedOut`.
  public let timeout: Double

  public init(timeout: Double = 30) {
    self.timeout = timeout
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = timeout
    // The whole exchange, upload included, is bounded too: a server that trickles bytes
    // forever is a timeout, not a hang.
    configuration.timeoutIntervalForResource = timeout * 4
    configuration.httpMaximumConnectionsPerHost = 1
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil
    configuration.httpCookieStorage = nil
    session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
  }

  deinit { session.finishTasksAndInvalidate() }

  public func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError> {
    guard let url = URL(string: request.url), url.scheme == "http" || url.scheme == "https" else {
      return .failure(.invalidURL)
    }
    var urlRequest = URLRequest(url: url)
    urlRequest.httpMethod = request.method
    urlRequest.timeoutInterval = timeout
    for header in request.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
    let outcome = Mutex<Result<HTTPResponse, TransportError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let task = session.uploadTask(with: urlRequest, from: Data(request.body)) { data, response, error in
      let result: Result<HTTPResponse, TransportError>
      if let response = response as? HTTPURLResponse {
        var headers: [String: String] = [:]
        for (key, value) in response.allHeaderFields {
          if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        result = .success(
          HTTPResponse(status: response.statusCode, headers: headers, body: data.map(Array.init) ?? []))
      } else {
        result = .failure(Self.transportError(error))
      }
      outcome.withLock { $0 = result }
      done.signal()
    }
    task.resume()
    // URLSession enforces the timeouts; this bound only guards against a lost callback.
    if done.wait(timeout: .now() + .milliseconds(Int(timeout * 5 * 1000) + 1000)) == .timedOut {
      task.cancel()
      return .failure(.timedOut)
    }
    return outcome.withLock { $0 } ?? .failure(.other(code: -1))
  }

  /// Maps URLSession's error to ours by code only: its descriptions carry the URL (and so a
  /// token in the query).
  static func transportError(_ error: (any Error)?) -> TransportError {
    guard let error else { return .other(code: -1) }
    // On Linux the error arrives as an NSError in NSURLErrorDomain, not always a URLError.
    let nsError = error as NSError
    guard nsError.domain == NSURLErrorDomain else { return .other(code: nsError.code) }
    switch URLError.Code(rawValue: nsError.code) {
    case .timedOut: return .timedOut
    case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet:
      return .cannotConnect
    case .networkConnectionLost, .badServerResponse, .cannotParseResponse: return .connectionLost
    case .badURL, .unsupportedURL: return .invalidURL
    default:
      // libcurl's send/receive failures (a reset or closed connection, EPIPE) come as code -1
      // with curl's text in the underlying error, which never contains the URL.
      let underlying = (nsError.userInfo[NSUnderlyingErrorKey] as? NSError)?.localizedDescription ?? ""
      if ["Send failure", "Recv failure", "Connection reset", "Connection died"].contains(
        where: underlying.hasPrefix)
      {
        return .connectionLost
      }
      return .other(code: nsError.code)
    }
  }
}

/// Answers every redirect with "do not follow": the 3xx response itself completes the task.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
  func urlSession(
    _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
  ) {
    completionHandler(nil)
  }
}
