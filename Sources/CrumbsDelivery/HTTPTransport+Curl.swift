// HTTPTransport+Curl.swift — the network under delivery: one blocking POST per call, on the
// uploader's thread, through libcurl's easy interface (http and https alike).
//
// libcurl is loaded with dlopen at the first request (CCurlLoader), not linked: a program that
// links Crumbs but never uploads does not load libcurl and its TLS, Kerberos, LDAP… libraries,
// which cost every process start, ~18 MB of memory and its death and exit (FoundationNetworking,
// the previous transport, linked them all). Without libcurl.so.4 on the machine a request fails
// with `TransportError.unavailable`, saying why; nothing else changes.
//
// What each request is bounded by:
// - Idle: no progress for `timeout` seconds is `timedOut` (connect timeout, and curl's low-speed
//   limit of 1 byte/s over the timeout, whole seconds, at least 1).
// - The whole exchange, upload included, at four times that: a server that trickles bytes
//   forever is a timeout, not a hang. An answer whose status came in time stands, its body cut
//   short, as on any other cut.
// - The answer's body: at most `maxResponseBodyBytes` are kept; past that the transfer stops at
//   once (the write callback refuses the rest) and the answer comes back with `bodyTruncated`.
//   Nothing the server sends is trusted to be small or to end.
// - An answer that arrives before the whole request body was handed to libcurl says so
//   (`requestSent` false): the uploader does not count such a 2xx as a delivery.
// Redirects are never followed (curl's default, set anyway): a 3xx comes back as the answer (a
// failed attempt for the uploader). Following one would re-send the report, and its secret
// headers, to wherever the server points, and 301–303 would turn the POST into a GET. Only http
// and https are allowed. TLS peers and host names are verified (curl's defaults, set anyway).
// Proxies: as curl does, from http_proxy / https_proxy / no_proxy in the environment (a
// proxy's own answer to CONNECT never counts as the server's).
// `Expect: 100-continue` is not sent: a large report goes out at once instead of waiting up to a
// second for a 100 that many servers never send.
//
// SIGPIPE: never raised. CURLOPT_NOSIGNAL is set (no signal handlers, no SIGALRM for name
// lookups), and libcurl sends with MSG_NOSIGNAL on Linux; DeliveryTests checks it with a server
// that closes the connection in the middle of a large upload while SIGPIPE is at its default
// action (which would kill the test process).
//
// Entry points: CurlTransport(timeout:) → send(_:) → (inside curl_easy_perform, on the caller's
// thread) CurlExchange's read, header and write callbacks.
// Not signal-safe.

import CCurlLoader
import CrumbsRecorder

/// libcurl's easy interface, one request at a time per call, a fresh handle each (no shared
/// cookies, cache or connections).
public struct CurlTransport: HTTPTransport {
  /// The most of an answer's body that is read (4 MiB, the bound the OTLP specification suggests
  /// for clients); the rest is never downloaded.
  public static let maxResponseBodyBytes = 4 << 20
  /// Sent with every request unless the request names its own (curl sends none by default).
  public static let userAgent = "Crumbs/\(CrumbsVersion.string) (Swift; Linux)"

  /// Seconds without progress before a request fails as `timedOut` (a request's own `timeout`
  /// wins); the whole exchange is bounded at four times it.
  public let timeout: Double

  public init(timeout: Double = 30) { self.timeout = timeout }

  public func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError> {
    let scheme = request.url.prefix { $0 != ":" }.lowercased()
    guard scheme == "http" || scheme == "https", !request.url.contains(where: \.isWhitespace) else {
      return .failure(.invalidURL)
    }
    if let failure = crumbs_curl_load() { return .failure(.unavailable(String(cString: failure))) }
    guard let handle = crumbs_curl_easy_init() else { return .failure(.other(code: -1)) }
    defer { crumbs_curl_easy_cleanup(handle) }
    var headers: UnsafeMutableRawPointer?
    defer { if let headers { crumbs_curl_slist_free_all(headers) } }
    for header in request.headers {
      // curl sends each line as given: a line break in a configured name or value would end the
      // header and start another (or the body), a NUL would cut it. Each becomes a space.
      let name = Self.oneLine(header.name)
      let value = Self.oneLine(header.value)
      // "Name:" would make curl drop the header; "Name;" sends it empty.
      headers = crumbs_curl_slist_append(headers, value.isEmpty ? "\(name);" : "\(name): \(value)")
    }
    if request.header("Expect") == nil { headers = crumbs_curl_slist_append(headers, "Expect:") }
    // Named, so a collector's logs say who sent it.
    if request.header("User-Agent") == nil {
      headers = crumbs_curl_slist_append(headers, "User-Agent: \(Self.userAgent)")
    }
    let timeout = request.timeout.flatMap { $0 > 0 && $0 < 1e6 ? $0 : nil } ?? self.timeout

    let exchange = CurlExchange(body: request.body)
    let context = Unmanaged.passUnretained(exchange).toOpaque()
    let idleSeconds = max(1, Int(timeout.rounded(.up)))
    let timeoutMilliseconds = max(1, Int(timeout * 1000))
    var failed = false
    func set(_ option: Int, _ value: Int) {
      failed = failed || crumbs_curl_setopt_long(handle, option, value) != CRUMBS_CURLE_OK
    }
    func set(_ option: Int, _ value: UnsafeRawPointer?) {
      failed = failed || crumbs_curl_setopt_pointer(handle, option, value) != CRUMBS_CURLE_OK
    }
    func set(_ option: Int, _ callback: crumbs_curl_data_callback) {
      failed = failed || crumbs_curl_setopt_callback(handle, option, callback) != CRUMBS_CURLE_OK
    }
    let code = request.url.withCString { url in
      request.method.withCString { method in
        set(CRUMBS_CURLOPT_URL, url)
        if request.method != "POST" { set(CRUMBS_CURLOPT_CUSTOMREQUEST, method) }
        set(CRUMBS_CURLOPT_NOSIGNAL, 1)
        set(CRUMBS_CURLOPT_FOLLOWLOCATION, 0)
        set(CRUMBS_CURLOPT_SSL_VERIFYPEER, 1)
        set(CRUMBS_CURLOPT_SSL_VERIFYHOST, 2)
        "http,https".withCString { protocols in
          // CURLOPT_PROTOCOLS_STR is 7.85 or later; before it, the bit mask.
          if crumbs_curl_setopt_pointer(handle, CRUMBS_CURLOPT_PROTOCOLS_STR, protocols) != CRUMBS_CURLE_OK {
            set(CRUMBS_CURLOPT_PROTOCOLS, Int(CRUMBS_CURLPROTO_HTTP | CRUMBS_CURLPROTO_HTTPS))
          }
        }
        // A proxy's answer to CONNECT is not the server's: keep it from the header callback.
        _ = crumbs_curl_setopt_long(handle, CRUMBS_CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        set(CRUMBS_CURLOPT_CONNECTTIMEOUT_MS, timeoutMilliseconds)
        set(CRUMBS_CURLOPT_LOW_SPEED_LIMIT, 1)
        set(CRUMBS_CURLOPT_LOW_SPEED_TIME, idleSeconds)
        set(CRUMBS_CURLOPT_TIMEOUT_MS, timeoutMilliseconds * 4)
        set(CRUMBS_CURLOPT_HTTPHEADER, headers)
        set(CRUMBS_CURLOPT_POST, 1)
        failed =
          failed
          || crumbs_curl_setopt_offset(handle, CRUMBS_CURLOPT_POSTFIELDSIZE_LARGE, Int64(request.body.count))
            != CRUMBS_CURLE_OK
        set(CRUMBS_CURLOPT_READFUNCTION, curlReadBody)
        set(CRUMBS_CURLOPT_READDATA, context)
        set(CRUMBS_CURLOPT_HEADERFUNCTION, curlReadHeader)
        set(CRUMBS_CURLOPT_HEADERDATA, context)
        set(CRUMBS_CURLOPT_WRITEFUNCTION, curlWriteBody)
        set(CRUMBS_CURLOPT_WRITEDATA, context)
        guard !failed else { return -1 }
        return withExtendedLifetime(exchange) { crumbs_curl_perform(handle) }
      }
    }
    if code == -1 { return .failure(.other(code: -1)) }
    return exchange.outcome(code)
  }

  /// `text` with CR, LF and NUL replaced by spaces.
  static func oneLine(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else { return text }
    return String(
      String.UnicodeScalarView(
        text.unicodeScalars.map { $0 == "\r" || $0 == "\n" || $0 == "\0" ? " " : $0 }))
  }

  /// Maps curl's result to ours by code only: its texts may name the host.
  static func transportError(_ code: Int) -> TransportError {
    switch code {
    case CRUMBS_CURLE_OPERATION_TIMEDOUT: .timedOut
    case CRUMBS_CURLE_COULDNT_CONNECT, CRUMBS_CURLE_COULDNT_RESOLVE_HOST, CRUMBS_CURLE_COULDNT_RESOLVE_PROXY:
      .cannotConnect
    case CRUMBS_CURLE_SEND_ERROR, CRUMBS_CURLE_RECV_ERROR, CRUMBS_CURLE_GOT_NOTHING,
      CRUMBS_CURLE_PARTIAL_FILE,
      CRUMBS_CURLE_WEIRD_SERVER_REPLY, CRUMBS_CURLE_HTTP2, CRUMBS_CURLE_HTTP2_STREAM, CRUMBS_CURLE_HTTP3:
      .connectionLost
    case CRUMBS_CURLE_URL_MALFORMAT, CRUMBS_CURLE_UNSUPPORTED_PROTOCOL: .invalidURL
    default: .other(code: code)
    }
  }
}

/// One request's progress as curl's callbacks see it (all on the thread in curl_easy_perform),
/// and its outcome.
private final class CurlExchange {
  let requestBody: [UInt8]
  /// Bytes of the request body handed to curl so far.
  var bytesSent = 0
  /// The final (non-1xx) status and its headers, once their blank line arrived.
  var status: Int?
  var headers: [String: String] = [:]
  /// The status line being read and its headers (a 1xx is followed by another).
  var pendingStatus: Int?
  var pendingHeaders: [String: String] = [:]
  var body: [UInt8] = []
  /// Whether the body went past `maxResponseBodyBytes` (the transfer was then stopped).
  var overLimit = false

  init(body: [UInt8]) { requestBody = body }

  func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
    let count = min(buffer.count, requestBody.count - bytesSent)
    guard count > 0 else { return 0 }
    requestBody.withUnsafeBytes { bytes in
      buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[bytesSent..<bytesSent + count]))
    }
    bytesSent += count
    return count
  }

  /// One header line, CR LF included: a status line, `Name: value`, or the blank line that ends
  /// them.
  func header(_ line: UnsafeRawBufferPointer) {
    var end = line.count
    while end > 0, line[end - 1] == UInt8(ascii: "\r") || line[end - 1] == UInt8(ascii: "\n") { end -= 1 }
    let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[..<end]), as: UTF8.self)
    if text.isEmpty {
      if let code = pendingStatus, code >= 200 {
        status = code
        headers = pendingHeaders
      }
      pendingStatus = nil
      return
    }
    if text.hasPrefix("HTTP/") {
      let fields = text.split(separator: " ", maxSplits: 2)
      pendingStatus = fields.count > 1 ? Int(fields[1]) : nil
      pendingHeaders = [:]
      return
    }
    guard let colon = text.firstIndex(of: ":") else { return }
    let name = text[..<colon].trimmed(of: " \t").lowercased()
    let value = text[text.index(after: colon)...].trimmed(of: " \t")
    pendingHeaders[name] = pendingHeaders[name].map { "\($0), \(value)" } ?? value
  }

  /// Keeps the body up to the limit; fewer bytes than given (which stops the transfer) once past it.
  func write(_ data: UnsafeRawBufferPointer) -> Int {
    let room = CurlTransport.maxResponseBodyBytes - body.count
    guard data.count <= room else {
      body += data.prefix(max(0, room))
      overLimit = true
      return 0
    }
    body += data
    return data.count
  }

  /// The answer when a final status arrived (its body cut short if the transfer ended early),
  /// otherwise the error.
  func outcome(_ code: Int) -> Result<HTTPResponse, TransportError> {
    guard let status else { return .failure(CurlTransport.transportError(code)) }
    return .success(
      HTTPResponse(
        status: status, headers: headers, body: body, bodyTruncated: overLimit || code != CRUMBS_CURLE_OK,
        requestSent: bytesSent >= requestBody.count))
  }
}

private func exchange(_ context: UnsafeMutableRawPointer?) -> CurlExchange {
  Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
}

private let curlReadBody: crumbs_curl_data_callback = { buffer, size, count, context in
  exchange(context).read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

private let curlReadHeader: crumbs_curl_data_callback = { buffer, size, count, context in
  exchange(context).header(UnsafeRawBufferPointer(start: buffer, count: size * count))
  return size * count
}

private let curlWriteBody: crumbs_curl_data_callback = { buffer, size, count, context in
  exchange(context).write(UnsafeRawBufferPointer(start: buffer, count: size * count))
}
