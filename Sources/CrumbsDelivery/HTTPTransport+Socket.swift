// HTTPTransport+Socket.swift — plain http:// requests without libcurl: one HTTP/1.1 request
// over a TCP socket of its own, on the caller's thread (the uploader's).
//
// Why: an OTLP collector on loopback or in the pod (a sidecar) is how most servers ship
// telemetry, and such an endpoint is plain http. Loading libcurl for it maps libcurl and some
// thirty libraries it links (TLS, Kerberos, LDAP, SSH…): 7.7 MB of resident memory measured in
// a process that delivered one report, of which OpenSSL's and p11-kit's part can never be
// unloaded again (docs/platform-facts.md, "Dynamic loading"). This client maps nothing and
// needs no libcurl on the machine. DeliveryTransport picks it for plain http:// URLs it can
// reach directly; https, a proxy from the environment, and user:password@ in a URL go through
// CurlTransport.
//
// It keeps CurlTransport's contract, bound for bound:
// - Idle: no byte moving either way for `timeout` seconds (name lookup and connect included) is
//   `timedOut`; the whole exchange is bounded at four times it; `abandons` is asked at least
//   once a second. Timeouts are read as CurlTransport.usableTimeout reads them.
// - The answer: header lines bounded by ResponseHeaders, the body by
//   request's `maxResponseBodyBytes` (a download: reading stops past it, or at once when
//   Content-Length claims more), else `CurlTransport.maxResponseBodyBytes`; past it,
//   `bodyTruncated`; chunked,
//   Content-Length and until-close bodies (HTTPResponseReader, fuzzed as untrusted bytes).
// - An answer that arrives before the whole body was sent stops the sending and says so
//   (`requestSent` false); a 3xx is the answer (redirects never followed).
// - SIGPIPE: never raised (send with MSG_NOSIGNAL).
// - Each header's name and value are one line (CR, LF and NUL become spaces), as
//   CurlTransport sends them; `User-Agent` unless the request names one; `Connection: close`
//   (one request per connection, as CurlTransport's fresh handle each).
//
// Entry points: PlainHTTPTransport(timeout:) → send(_:) → PlainHTTPURL(parsing:), resolve,
// connect, exchange(fd:). Not signal-safe.

import CCurlLoader
import CrumbsPlatform
import CrumbsRecorder
import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// An http:// URL this client can send to directly: host, port, and the request target.
package struct PlainHTTPURL: Equatable {
  package var host: String
  package var port: Int
  /// The path and query ("/" when the URL has none); a fragment is left out.
  package var target: String
  /// The Host header's value.
  package var authority: String

  /// Nil when `url` is not plain http, or has what only libcurl handles (user:password@).
  package init?(parsing url: String) {
    guard url.utf8.count > 7, url.prefix(7).lowercased() == "http://",
      !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f })
    else { return nil }
    var rest = Substring(url.dropFirst(7))
    if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
    let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
    let authority = rest[..<end]
    let path = rest[end...]
    guard !authority.isEmpty, !authority.contains("@") else { return nil }
    var host = authority
    var port = 80
    if authority.hasPrefix("[") {
      guard let close = authority.firstIndex(of: "]") else { return nil }
      host = authority[authority.index(after: authority.startIndex)..<close]
      let after = authority[authority.index(after: close)...]
      if !after.isEmpty {
        guard after.hasPrefix(":"), let number = Self.port(after.dropFirst()) else { return nil }
        port = number
      }
    } else if let colon = authority.lastIndex(of: ":") {
      guard let number = Self.port(authority[authority.index(after: colon)...]) else { return nil }
      host = authority[..<colon]
      port = number
    }
    guard !host.isEmpty else { return nil }
    self.host = String(host)
    self.port = port
    target = path.isEmpty ? "/" : (path.hasPrefix("?") ? "/" + path : String(path))
    self.authority = String(authority)
  }

  private static func port(_ text: Substring) -> Int? {
    guard !text.isEmpty, text.count <= 5, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
      let port = Int(text),
      port > 0, port < 65536
    else { return nil }
    return port
  }
}

/// Plain http:// over a socket of its own, without libcurl (see the file comment).
public struct PlainHTTPTransport: HTTPTransport {
  /// Seconds without progress before a request fails as `timedOut` (a request's own `timeout`
  /// wins); the whole exchange is bounded at four times it.
  public let timeout: Double
  /// Asked at least once a second: true abandons the request in flight.
  package var abandons: @Sendable () -> Bool = { false }

  /// What an abandoned request fails with: the same as CurlTransport's.
  static let abandoned = TransportError.other(code: Int(CRUMBS_CURLE_ABORTED_BY_CALLBACK))

  public init(timeout: Double = 30) {
    self.timeout = CurlTransport.usableTimeout(timeout) ?? CurlTransport.defaultTimeout
  }

  public func send(_ request: DeliveryRequest) -> Result<HTTPResponse, TransportError> {
    guard let url = PlainHTTPURL(parsing: request.url) else { return .failure(.invalidURL) }
    let timeout = request.timeout.flatMap(CurlTransport.usableTimeout) ?? self.timeout
    let idle = UInt64(max(1, Int(timeout * 1000))) * 1_000_000
    let start = SystemClock.monotonicNanoseconds()
    let clock = Deadlines(idle: idle, whole: start &+ 4 &* idle, lastProgress: start)

    let addresses: [Syscall.SocketAddress]
    do {
      guard
        let found = try Syscall.resolve(
          host: url.host, port: url.port, timeoutMilliseconds: Int(idle / 1_000_000))
      else { return .failure(.timedOut) }
      addresses = found
    } catch {
      return .failure(.cannotConnect)
    }
    var lastFailure = TransportError.cannotConnect
    for address in addresses {
      switch connect(address, clock) {
      case .success(let fd):
        defer { Syscall.close(fd) }
        return exchange(
          fd: fd, head: head(request, url), body: request.body,
          maxBody: request.maxResponseBodyBytes, clock: clock)
      case .failure(let error):
        lastFailure = error
        if error == .timedOut { return .failure(error) }
      }
    }
    return .failure(lastFailure)
  }

  /// The request line and headers, CR LF after each and a blank line after the last.
  func head(_ request: DeliveryRequest, _ url: PlainHTTPURL) -> [UInt8] {
    var lines = ["\(CurlTransport.oneLine(request.method)) \(url.target) HTTP/1.1"]
    if request.header("Host") == nil { lines.append("Host: \(url.authority)") }
    // The framing is this client's: the request's own would contradict it.
    let framing: Set<String> = ["content-length", "transfer-encoding", "connection"]
    for header in request.headers where !framing.contains(header.name.lowercased()) {
      lines.append("\(CurlTransport.oneLine(header.name)): \(CurlTransport.oneLine(header.value))")
    }
    if request.header("User-Agent") == nil { lines.append("User-Agent: \(CurlTransport.userAgent)") }
    if request.header("Accept") == nil { lines.append("Accept: */*") }
    lines.append("Content-Length: \(request.body.count)")
    lines.append("Connection: close")
    return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
  }

  /// When a request must give up: no progress for `idle`, or the whole exchange past `whole`.
  final class Deadlines {
    let idle: UInt64
    let whole: UInt64
    var lastProgress: UInt64
    init(idle: UInt64, whole: UInt64, lastProgress: UInt64) {
      self.idle = idle
      self.whole = whole
      self.lastProgress = lastProgress
    }
    /// Milliseconds to wait in poll now (at most a second); nil once a bound is past.
    func wait() -> Int32? {
      let now = SystemClock.monotonicNanoseconds()
      let idleEnd = lastProgress &+ idle
      guard now < idleEnd, now < whole else { return nil }
      return Int32(min(1000, (min(idleEnd, whole) - now) / 1_000_000 + 1))
    }
    func progressed() { lastProgress = SystemClock.monotonicNanoseconds() }
  }

  private func connect(_ address: Syscall.SocketAddress, _ clock: Deadlines) -> Result<Int32, TransportError>
  {
    let fd: Int32
    do {
      fd = try Syscall.startConnect(address)
    } catch {
      return .failure(.cannotConnect)
    }
    var descriptors = [pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)]
    while true {
      if abandons() {
        Syscall.close(fd)
        return .failure(Self.abandoned)
      }
      guard let wait = clock.wait() else {
        Syscall.close(fd)
        return .failure(.timedOut)
      }
      try? Syscall.poll(&descriptors, timeoutMilliseconds: wait)
      if descriptors[0].revents != 0 { break }
    }
    if Syscall.socketError(fd) != nil {
      Syscall.close(fd)
      return .failure(.cannotConnect)
    }
    clock.progressed()
    return .success(fd)
  }

  /// Sends the request and reads the answer on a connected socket.
  private func exchange(fd: Int32, head: [UInt8], body: [UInt8], maxBody: Int?, clock: Deadlines) -> Result<
    HTTPResponse, TransportError
  > {
    let outgoing = head + body
    var sent = 0
    var reader = HTTPResponseReader(
      maxBody: maxBody ?? CurlTransport.maxResponseBodyBytes, refusesLongerClaims: maxBody != nil)
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    var ended = false
    var lost = false
    var sendingStopped = false
    var idledOut = false
    reading: while true {
      let sending = !sendingStopped && sent < outgoing.count
      var descriptors = [pollfd(fd: fd, events: Int16(POLLIN) | (sending ? Int16(POLLOUT) : 0), revents: 0)]
      if abandons() {
        lost = true
        break
      }
      guard let wait = clock.wait() else {
        idledOut = true
        break
      }
      try? Syscall.poll(&descriptors, timeoutMilliseconds: wait)
      let events = descriptors[0].revents
      if events & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
        // An answer (or the end) before the whole request went: the sending stops here.
        do {
          let count = try buffer.withUnsafeMutableBytes { try Syscall.receiveSome(fd, into: $0) }
          if let count {
            if count == 0 {
              ended = true
              break reading
            }
            clock.progressed()
            if !buffer.withUnsafeBytes({ reader.read(UnsafeRawBufferPointer(rebasing: $0[..<count])) }) {
              break reading
            }
            continue
          }
        } catch {
          lost = true
          break
        }
      }
      if sending, events & Int16(POLLOUT) != 0 {
        do {
          let count = try outgoing.withUnsafeBytes {
            try Syscall.sendSome(fd, UnsafeRawBufferPointer(rebasing: $0[sent...]))
          }
          if count > 0 {
            sent += count
            clock.progressed()
          }
        } catch {
          // The server closed or reset the connection: an answer it sent first may still be read.
          sendingStopped = true
          continue
        }
      }
    }
    if ended { reader.end() }
    guard let status = reader.headers.status else {
      if idledOut { return .failure(.timedOut) }
      if reader.headers.overLimit { return .failure(.headersTooLarge) }
      if lost, abandons() { return .failure(Self.abandoned) }
      return .failure(.connectionLost)
    }
    return .success(
      HTTPResponse(
        status: status, headers: reader.headers.headers, body: reader.body,
        bodyTruncated: !reader.complete, requestSent: sent >= outgoing.count))
  }
}
