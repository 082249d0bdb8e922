// HTTPTransport+Curl.swift — the network under delivery: one blocking POST per call, on the
// uploader's thread, through libcurl's easy interface (http and https alike).
//
// libcurl is loaded with dlopen at the first request (CCurlLoader), not linked: a program that
// links Crumbs but never uploads does not load libcurl and its TLS, Kerberos, LDAP… libraries,
// which cost every process start, ~18 MB of memory and its death and exit (FoundationNetworking,
// the previous transport, linked them all). It is unloaded again at the end of each delivery
// pass (`endOfPass`, when no request is in flight): a server keeps none of it between passes
// but what cannot be unloaded (OpenSSL 3 and p11-kit, linked -z nodelete) — unless a request
// timed out or was abandoned, which may leave curl's name-lookup thread running in libcurl's
// code: then it stays for the life of the process. Plain http needs none of it:
// DeliveryTransport sends that through PlainHTTPTransport.
// Without libcurl.so.4 on the machine (slim and distroless images) `missingTransport()` says so
// in one line, with how to install it, and a request fails with `TransportError.unavailable`;
// the uploader then attempts nothing (a missing transport is not an attempt) and looks again at
// its next pass, so a libcurl installed later is used. CRUMBS_LIBCURL names another file to load
// (CCurlLoader).
//
// What each request is bounded by:
// - Idle: no byte moving either way for `timeout` seconds is `timedOut`: the connect timeout,
//   then our own watch in curl's progress callback (called at least once a second), so a
//   server that accepts and never answers costs `timeout` plus at most a second. (curl's
//   low-speed limit, used before, averages over its last five seconds: with a report just sent
//   it let the request run on to the whole-exchange bound, 8 s for a timeout of 2.)
// - The whole exchange, upload included, at four times that: a server that trickles bytes
//   forever is a timeout, not a hang. An answer whose status came in time stands, its body cut
//   short, as on any other cut.
// - Timeouts that are not a positive number of seconds (NaN, 0, negative) are the default
//   (30 s); longer ones, infinity included, are `maxTimeout` (a day): never a trap.
// - The answer's header lines: at most `ResponseHeaders.maxBytes` and `maxLines` across the
//   exchange (1xx answers and trailers included); past that the transfer stops and the request
//   fails with `headersTooLarge` (or, when the final status had come, the answer stands, cut).
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
// Entry points: CurlTransport(timeout:) → [missingTransport()] → send(_:) → (inside
// curl_easy_perform, on the caller's thread) CurlExchange's read, header, write and progress
// callbacks.
// Not signal-safe.

import CCurlLoader
import CrumbsPlatform
import CrumbsRecorder

/// libcurl's easy interface, one request at a time per call, a fresh handle each (no shared
/// cookies, cache or connections).
public struct CurlTransport: HTTPTransport {
  /// The most of an answer's body that is read (4 MiB, the bound the OTLP specification suggests
  /// for clients); the rest is never downloaded.
  public static let maxResponseBodyBytes = 4 << 20
  /// Sent with every request unless the request names its own (curl sends none by default).
  public static let userAgent = "Crumbs/\(CrumbsVersion.string) (Swift; Linux)"

  /// The timeout used in place of one that is not a positive number of seconds.
  public static let defaultTimeout: Double = 30
  /// The longest timeout (a day): longer ones, infinity included, are this.
  public static let maxTimeout: Double = 86_400

  /// Seconds without progress before a request fails as `timedOut` (a request's own `timeout`
  /// wins); the whole exchange is bounded at four times it. Always within 0 < timeout ≤
  /// `maxTimeout` (see `usableTimeout(_:)`).
  public let timeout: Double

  /// Asked in curl's progress callback (at least once a second): true abandons the request in
  /// flight (it fails, the report stays pending). `crumbs collect` gives up a request once
  /// SIGTERM is pending, so it stops within a second of it, not after the request's timeout.
  package var abandons: @Sendable () -> Bool = { false }

  public init(timeout: Double = 30) { self.timeout = Self.usableTimeout(timeout) ?? Self.defaultTimeout }

  /// `seconds` as a request timeout: at most `maxTimeout` (infinity included); nil when it is not
  /// a positive number (NaN, zero, negative).
  public static func usableTimeout(_ seconds: Double) -> Double? {
    guard seconds > 0 else { return nil }  // NaN fails it too
    return min(seconds, maxTimeout)
  }

  /// Why no request can be sent, in one line that says what to install; nil when libcurl is
  /// loaded (this loads it, as the first request would). Asked again after a failure, it looks
  /// for the library again.
  public static func missingTransport() -> String? {
    var why = [CChar](repeating: 0, count: 512)
    guard crumbs_curl_load(&why, why.count) != 0 else { return nil }
    return missingMessage(why)
  }

  private static func missingMessage(_ why: [CChar]) -> String {
    let reason = String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return "libcurl is missing (\(reason)); reports stay pending until it is installed "
      + "(Debian/Ubuntu: apt-get install libcurl4; Fedora/RHEL: dnf install libcurl; "
      + "Alpine: apk add libcurl)"
  }

  public func missingTransport() -> String? { Self.missingTransport() }

  /// The uploader's pass ended: libcurl is unloaded (`unloadIfUnused`).
  public func endOfPass() { Self.unloadIfUnused() }

  /// Unloads libcurl when it is loaded and no request is using it: curl_global_cleanup, then
  /// dlclose, which unmaps libcurl and the libraries only it needed; OpenSSL 3 and p11-kit are
  /// linked -z nodelete and stay (docs/platform-facts.md). The next request loads it again.
  /// Once a request ended by a timeout or was abandoned, never: curl may have left its name
  /// lookup's thread running in libcurl's code. True when it unloaded.
  @discardableResult
  public static func unloadIfUnused() -> Bool { crumbs_curl_unload_if_unused() == 1 }

  public func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError> {
    let scheme = request.url.prefix { $0 != ":" }.lowercased()
    guard scheme == "http" || scheme == "https", !request.url.contains(where: \.isWhitespace) else {
      return .failure(.invalidURL)
    }
    var why = [CChar](repeating: 0, count: 512)
    guard crumbs_curl_acquire(&why, why.count) == 0 else {
      return .failure(.unavailable(Self.missingMessage(why)))
    }
    defer { crumbs_curl_release() }
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
    let timeout = request.timeout.flatMap(Self.usableTimeout) ?? self.timeout

    // At most 86_400_000 ms (usableTimeout): four times it fits a long anywhere.
    let timeoutMilliseconds = max(1, Int(timeout * 1000))
    let exchange = CurlExchange(
      body: request.body, maxBody: request.maxResponseBodyBytes,
      idleNanoseconds: UInt64(timeoutMilliseconds) * 1_000_000, abandons: abandons)
    let context = Unmanaged.passUnretained(exchange).toOpaque()
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
        set(CRUMBS_CURLOPT_TIMEOUT_MS, timeoutMilliseconds * 4)
        // The idle watch (see the file comment); before 7.32, which has no progress callback of
        // this shape, curl's low-speed limit is the next best bound.
        if crumbs_curl_setopt_progress(handle, curlProgress) == CRUMBS_CURLE_OK {
          set(CRUMBS_CURLOPT_NOPROGRESS, 0)
          set(CRUMBS_CURLOPT_XFERINFODATA, context)
        } else {
          set(CRUMBS_CURLOPT_LOW_SPEED_LIMIT, 1)
          set(CRUMBS_CURLOPT_LOW_SPEED_TIME, max(1, Int(timeout.rounded(.up))))
        }
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
        exchange.lastProgress = SystemClock.monotonicNanoseconds()
        return withExtendedLifetime(exchange) { crumbs_curl_perform(handle) }
      }
    }
    // Ended by a timeout or by us, a request may have left curl's name-lookup thread running
    // (detached by curl_easy_cleanup): libcurl must then stay mapped (crumbs_curl_keep_loaded).
    if code == CRUMBS_CURLE_OPERATION_TIMEDOUT || code == CRUMBS_CURLE_ABORTED_BY_CALLBACK {
      crumbs_curl_keep_loaded()
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
  /// The answer's header lines, bounded.
  var responseHeaders = ResponseHeaders()
  var body: [UInt8] = []
  /// The most body bytes kept (the request's `maxResponseBodyBytes`).
  let maxBody: Int
  /// Whether a Content-Length over `maxBody` stops the transfer before the body (a download).
  let refusesLongerClaims: Bool
  /// Whether the body went past `maxBody`, or its Content-Length claimed more (the transfer was
  /// then stopped).
  var overLimit = false
  /// How long no byte may move either way, and when one last did (CLOCK_MONOTONIC), with the
  /// counts curl reported then.
  let idleNanoseconds: UInt64
  var lastProgress: UInt64 = 0
  var lastCounts: (downloaded: Int64, uploaded: Int64) = (0, 0)
  /// Whether the idle watch stopped the transfer.
  var idledOut = false

  /// True once the request in flight must be given up (CurlTransport.abandons).
  let abandons: @Sendable () -> Bool

  init(body: [UInt8], maxBody: Int?, idleNanoseconds: UInt64, abandons: @escaping @Sendable () -> Bool) {
    requestBody = body
    self.maxBody = max(0, maxBody ?? CurlTransport.maxResponseBodyBytes)
    refusesLongerClaims = maxBody != nil
    self.idleNanoseconds = idleNanoseconds
    self.abandons = abandons
  }

  /// curl's progress callback: false stops the transfer, once nothing moved for the timeout.
  /// Header bytes, which curl's body counts leave out, count as progress in `header(_:)`.
  func progress(downloaded: Int64, uploaded: Int64) -> Bool {
    if abandons() { return false }  // CURLE_ABORTED_BY_CALLBACK: a transport error
    let now = SystemClock.monotonicNanoseconds()
    if (downloaded, uploaded) != lastCounts {
      lastCounts = (downloaded, uploaded)
      lastProgress = now
      return true
    }
    guard now >= lastProgress, now - lastProgress >= idleNanoseconds else { return true }
    idledOut = true
    return false
  }

  func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
    let count = min(buffer.count, requestBody.count - bytesSent)
    guard count > 0 else { return 0 }
    requestBody.withUnsafeBytes { bytes in
      buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[bytesSent..<bytesSent + count]))
    }
    bytesSent += count
    return count
  }

  /// One header line, CR LF included; false (stop the transfer) once past the bound.
  func header(_ line: UnsafeRawBufferPointer) -> Bool {
    lastProgress = SystemClock.monotonicNanoseconds()
    guard responseHeaders.read(line: line) else { return false }
    // A download claimed larger than the limit is refused before its first byte.
    if refusesLongerClaims, let length = responseHeaders.headers["content-length"],
      let count = UInt64(length),
      count > UInt64(maxBody), (200..<300).contains(responseHeaders.status ?? 0)
    {
      overLimit = true
      return false
    }
    return true
  }

  /// Keeps the body up to the limit; fewer bytes than given (which stops the transfer) once past it.
  func write(_ data: UnsafeRawBufferPointer) -> Int {
    let room = maxBody - body.count
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
    guard let status = responseHeaders.status else {
      if idledOut { return .failure(.timedOut) }
      if responseHeaders.overLimit { return .failure(.headersTooLarge) }
      return .failure(CurlTransport.transportError(code))
    }
    return .success(
      HTTPResponse(
        status: status, headers: responseHeaders.headers, body: body,
        bodyTruncated: overLimit || code != CRUMBS_CURLE_OK,
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
  // Fewer bytes than given stops the transfer (CURLE_WRITE_ERROR).
  exchange(context).header(UnsafeRawBufferPointer(start: buffer, count: size * count)) ? size * count : 0
}

private let curlProgress: crumbs_curl_progress_callback = { context, _, downloaded, _, uploaded in
  // Non-zero stops the transfer (CURLE_ABORTED_BY_CALLBACK).
  exchange(context).progress(downloaded: downloaded, uploaded: uploaded) ? 0 : 1
}

private let curlWriteBody: crumbs_curl_data_callback = { buffer, size, count, context in
  exchange(context).write(UnsafeRawBufferPointer(start: buffer, count: size * count))
}
