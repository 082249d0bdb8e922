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
//
// Nothing the server sends is trusted to be small or to end. The answer is read through a data
// delegate, never buffered whole by URLSession: at most `maxResponseBodyBytes` of its body are
// kept, then the task is cancelled and the answer returned with `bodyTruncated` (its status is
// already known). The cut takes effect when the delegate queue gets to it: what libcurl
// received meanwhile waits on that queue, in memory (little at network speeds; over loopback at
// GB/s with every core busy, a few hundred MB were seen). An answer that arrives before the
// whole request body was handed to libcurl says so (`requestSent` false): the uploader does not
// count such a 2xx as a delivery.
// Known gap: FoundationNetworking keeps a 301–308 answer (status and body) from the delegate
// until it ends and gathers its body itself, one growing copy per piece, on the queue that also
// runs cancel() and the timeouts. A server answering a redirect with an endless body therefore
// holds the uploader's thread (not the app's: stop(timeout:) and close() still return) and
// slowly grows memory (about 50 MiB in 100 s measured here). Only a transport on libcurl
// directly would close it.
//
// Entry points: URLSessionTransport(timeout:) → send(_:) → (delegate queue) Exchange callbacks.
// Not signal-safe.

import CrumbsRecorder
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

/// URLSession, one request at a time per caller, with its own session (no shared cookies or
/// cache).
public final class URLSessionTransport: HTTPTransport {
  /// The most of an answer's body that is read (4 MiB, the bound the OTLP specification suggests
  /// for clients); the rest is never downloaded.
  public static let maxResponseBodyBytes = 4 << 20
  /// Sent with every request unless the request names its own.
  public static let userAgent = "Crumbs/\(CrumbsVersion.string) (Swift; Linux)"

  private let session: URLSession
  private let exchanges: ExchangeDelegate
  /// Seconds without progress before a request fails as `timedOut` (a request's own `timeout`
  /// wins).
  public let timeout: Double

  public init(timeout: Double = 30) {
    self.timeout = timeout
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = timeout
    // The whole exchange, upload included, is bounded too: a server that trickles bytes
    // forever is a timeout, not a hang. FoundationNetworking does not enforce this one (a
    // server sending a byte every half second held a 2 s-timeout request until send()'s own
    // bound): send() does, at the same four times.
    configuration.timeoutIntervalForResource = timeout * 4
    configuration.httpMaximumConnectionsPerHost = 1
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil
    configuration.httpCookieStorage = nil
    exchanges = ExchangeDelegate()
    // delegateQueue nil: URLSession makes a serial queue, so one exchange's callbacks arrive in
    // order (body progress, then the answer, then its data, then completion).
    session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
  }

  deinit { session.finishTasksAndInvalidate() }

  public func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError> {
    guard let url = URL(string: request.url), url.scheme == "http" || url.scheme == "https" else {
      return .failure(.invalidURL)
    }
    var urlRequest = URLRequest(url: url)
    urlRequest.httpMethod = request.method
    let timeout = request.timeout.flatMap { $0 > 0 && $0 < 1e6 ? $0 : nil } ?? self.timeout
    urlRequest.timeoutInterval = timeout
    // Named, so a collector's logs say who sent it (libcurl's default names the executable).
    urlRequest.setValue(Self.userAgent, forHTTPHeaderField: "User-Agent")
    for header in request.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
    // No completion handler: with one, URLSession would gather the whole answer in memory.
    let task = session.uploadTask(with: urlRequest, from: Data(request.body))
    let exchange = Exchange(requestBodyBytes: Int64(request.body.count))
    exchanges.register(exchange, for: task)
    defer { exchanges.unregister(task) }
    task.resume()
    // URLSession enforces the idle timeout; this bounds the whole exchange (see init). An
    // answer whose status came in time stands, its body cut short, as on any other cut.
    if exchange.done.wait(timeout: .now() + .milliseconds(Int(timeout * 4 * 1000))) == .timedOut {
      exchange.completed(URLError(.timedOut))
      task.cancel()
    }
    return exchange.outcome ?? .failure(.other(code: -1))
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

/// One request's progress as the delegate sees it, and its outcome once known.
private final class Exchange: Sendable {
  let requestBodyBytes: Int64
  /// Signalled once, when `outcome` is set.
  let done = DispatchSemaphore(value: 0)
  private struct State {
    var bytesSent: Int64 = 0
    var response: HTTPURLResponse?
    var body: [UInt8] = []
    var outcome: Result<HTTPResponse, TransportError>?
  }
  private let state = Mutex(State())

  init(requestBodyBytes: Int64) { self.requestBodyBytes = requestBodyBytes }

  var outcome: Result<HTTPResponse, TransportError>? { state.withLock { $0.outcome } }

  func sent(total: Int64) { state.withLock { $0.bytesSent = max($0.bytesSent, total) } }

  func received(_ response: HTTPURLResponse) { state.withLock { $0.response = response } }

  /// Keeps the body up to the limit; false once past it (the answer is then complete as far as
  /// we care, and the task should stop).
  func received(_ data: Data) -> Bool {
    let room = state.withLock { state -> Bool in
      let room = URLSessionTransport.maxResponseBodyBytes - state.body.count
      state.body += data.prefix(max(0, room))
      return data.count <= room
    }
    if !room { finishWithAnswer(truncated: true) }
    return room
  }

  /// The task ended: the answer when a status arrived (its body cut short if the connection
  /// ended inside it), otherwise the error.
  func completed(_ error: (any Error)?) {
    if state.withLock({ $0.response }) != nil {
      finishWithAnswer(truncated: error != nil)
    } else {
      finish(.failure(URLSessionTransport.transportError(error)))
    }
  }

  private func finishWithAnswer(truncated: Bool) {
    let answer = state.withLock { state -> HTTPResponse? in
      guard let response = state.response else { return nil }
      var headers: [String: String] = [:]
      for (key, value) in response.allHeaderFields {
        if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
      }
      return HTTPResponse(
        status: response.statusCode, headers: headers, body: state.body, bodyTruncated: truncated,
        requestSent: state.bytesSent >= requestBodyBytes)
    }
    if let answer { finish(.success(answer)) }
  }

  private func finish(_ outcome: Result<HTTPResponse, TransportError>) {
    let first = state.withLock { state -> Bool in
      guard state.outcome == nil else { return false }
      state.outcome = outcome
      return true
    }
    if first { done.signal() }
  }
}

/// The session's delegate: routes each task's callbacks to its Exchange, and refuses redirects.
private final class ExchangeDelegate: NSObject, URLSessionDataDelegate, Sendable {
  private let exchanges = Mutex<[Int: Exchange]>([:])

  func register(_ exchange: Exchange, for task: URLSessionTask) {
    exchanges.withLock { $0[task.taskIdentifier] = exchange }
  }

  func unregister(_ task: URLSessionTask) {
    _ = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }
  }

  private func exchange(_ task: URLSessionTask) -> Exchange? {
    exchanges.withLock { $0[task.taskIdentifier] }
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {
    exchange(task)?.sent(total: totalBytesSent)
  }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
  ) {
    if let response = response as? HTTPURLResponse { exchange(dataTask)?.received(response) }
    completionHandler(.allow)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    guard let exchange = exchange(dataTask) else { return }
    if !exchange.received(data) { dataTask.cancel() }
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    exchange(task)?.completed(error)
  }

  /// Answers every redirect with "do not follow": the 3xx response itself completes the task.
  func urlSession(
    _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
  ) {
    completionHandler(nil)
  }
}
