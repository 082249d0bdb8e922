import Foundation
import Synchronization

// LoopbackHTTPServer.swift — a small HTTP/1.1 server on 127.0.0.1 (ephemeral port) for delivery
// tests: a listening socket on its own thread, one thread per connection, scripted answers,
// captured requests. Writes use MSG_NOSIGNAL so a client that gave up cannot SIGPIPE the tests.
// Besides well-behaved answers it plays the servers delivery must not trust: one that never
// answers, one that dies mid-upload, one that answers before reading the request, and ones whose
// answer is huge, never ends or trickles, or whose header lines or trailers never end (streamed
// from one small buffer: the server itself stays small).
#if canImport(Glibc)
  import Glibc
#endif

/// A request as the server received it (complete bodies only).
package struct CapturedRequest: Sendable {
  package var method: String
  /// Path and query.
  package var target: String
  /// Names lowercased.
  package var headers: [String: String]
  package var body: [UInt8]
}

package final class LoopbackHTTPServer: Sendable {
  /// What to do with the n-th request (0-based).
  package enum Behaviour: Sendable {
    /// Answer with a status (and headers, body).
    case respond(Int, headers: [String: String] = [:], body: String = "")
    /// Answer with a status, headers and a binary body (a protobuf response).
    case respondBytes(Int, headers: [String: String], body: [UInt8])
    /// Wait (without answering) until the server stops or `seconds` pass, then answer 200.
    case stall(seconds: Double)
    /// Read the headers and `bytes` of the body, then close the connection (a server that dies
    /// mid-upload).
    case closeAfterReading(bytes: Int)
    /// Answer with a status as soon as the headers arrived, without reading the body, and end
    /// the answer (a server that answers before the request was sent).
    case answerBeforeReading(Int)
    /// Answer with a status and a body of `bodyBytes` bytes (Content-Length), written as fast as
    /// the client reads it, or at most `bytesPerSecond` (a network rather than loopback); stops
    /// when the client goes away.
    case respondWithLargeBody(Int, bodyBytes: Int, bytesPerSecond: Int? = nil)
    /// Answer with a status and a chunked body that never ends, paced like
    /// `respondWithLargeBody`; stops when the client goes away or the server stops.
    case respondEndlessly(Int, bytesPerSecond: Int? = nil)
    /// Answer with a status and then a byte of the body every 200 ms, never idle long enough for
    /// a request timeout; stops when the client goes away or the server stops.
    case respondTrickling(Int)
    /// Answer with a status line and then header lines forever (`X-Filler-N: …`, written as fast
    /// as the client reads them); stops when the client goes away or the server stops.
    case respondWithEndlessHeaders(Int)
    /// Answer with a status, a short chunked body ("ok"), its last chunk, and then trailer lines
    /// forever; stops when the client goes away or the server stops.
    case respondWithEndlessTrailers(Int)
  }

  package let port: UInt16
  private let listener: Int32
  private let script: @Sendable (Int, CapturedRequest) -> Behaviour
  private let state = Mutex(State())
  private let stopping = DispatchSemaphore(value: 0)
  private let acceptLoopDone = DispatchSemaphore(value: 0)

  private struct State {
    var requests: [CapturedRequest] = []
    var started = 0
    var stopped = false
    var openConnections = 0
    var bodyBytesWritten = 0
    var headerLinesWritten = 0
  }

  /// Signalled once per complete request, once it is in `requests`: a test waits on it.
  package let requestReceived = DispatchSemaphore(value: 0)
  /// Every complete request received, in order.
  package var requests: [CapturedRequest] { state.withLock { $0.requests } }
  /// Requests whose headers arrived (complete or not).
  package var requestsStarted: Int { state.withLock { $0.started } }
  /// Body bytes of large and endless answers the client accepted (written to the socket).
  package var bodyBytesWritten: Int { state.withLock { $0.bodyBytesWritten } }
  /// Header or trailer lines of endless ones the client accepted (written to the socket).
  package var headerLinesWritten: Int { state.withLock { $0.headerLinesWritten } }

  /// `script` decides each answer from the request number and the request (its body may be
  /// partial for `.closeAfterReading`: the script sees headers only, body empty).
  package init(_ script: @escaping @Sendable (Int, CapturedRequest) -> Behaviour) throws {
    self.script = script
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw ServerError.socket(errno) }
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0, listen(fd, 64) == 0 else {
      close(fd)
      throw ServerError.socket(errno)
    }
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    port = UInt16(bigEndian: address.sin_port)
    listener = fd
    let thread = Thread { [self] in acceptLoop() }
    thread.start()
  }

  /// A server answering every request with `status`.
  package convenience init(status: Int, headers: [String: String] = [:], body: String = "") throws {
    try self.init { _, _ in .respond(status, headers: headers, body: body) }
  }

  package var baseURL: String { "http://127.0.0.1:\(port)" }

  /// Stops accepting, releases stalled answers and waits (bounded) for connections to end.
  package func stop() {
    let first = state.withLock { state in
      defer { state.stopped = true }
      return !state.stopped
    }
    guard first else { return }
    shutdown(listener, Int32(SHUT_RDWR))
    acceptLoopDone.wait()
    close(listener)
    for _ in 0..<64 { stopping.signal() }
    let deadline = Date().addingTimeInterval(10)
    while state.withLock({ $0.openConnections }) > 0, Date() < deadline { usleep(1000) }
  }

  deinit { stop() }

  private func acceptLoop() {
    while true {
      let connection = accept(listener, nil, nil)
      if connection < 0 {
        if errno == EINTR { continue }
        break
      }
      _ = fcntl(connection, F_SETFD, FD_CLOEXEC)  // children the tests spawn must not hold it
      if state.withLock({ $0.stopped }) {
        close(connection)
        break
      }
      state.withLock { $0.openConnections += 1 }
      let thread = Thread { [self] in
        serve(connection)
        close(connection)
        state.withLock { $0.openConnections -= 1 }
      }
      thread.start()
    }
    acceptLoopDone.signal()
  }

  private func serve(_ fd: Int32) {
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    // A client that stops reading a large answer without closing must not hold a thread forever.
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer: [UInt8] = []
    func fill() -> Bool {
      var chunk = [UInt8](repeating: 0, count: 65536)
      let count = recv(fd, &chunk, chunk.count, 0)
      if count < 0 && errno == EINTR { return true }
      guard count > 0 else { return false }
      buffer.append(contentsOf: chunk[0..<count])
      return true
    }
    // Headers.
    let terminator: [UInt8] = Array("\r\n\r\n".utf8)
    var headerEnd: Int?
    while headerEnd == nil {
      if let range = buffer.firstRange(of: terminator) {
        headerEnd = range.upperBound
        break
      }
      guard fill() else { return }
    }
    let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
    buffer.removeSubrange(..<headerEnd!)
    var lines = head.components(separatedBy: "\r\n")
    let requestLine = lines.removeFirst().split(separator: " ")
    guard requestLine.count >= 2 else { return }
    var headers: [String: String] = [:]
    for line in lines {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
        in: .whitespaces)
    }
    var request = CapturedRequest(
      method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: [])
    let index = state.withLock { state in
      defer { state.started += 1 }
      return state.started
    }
    let behaviour = script(index, request)
    if case .answerBeforeReading(let status) = behaviour {
      // Not a byte of the body is read. The answer ends with a FIN, not a close: closing with
      // the body unread would send a reset, which may reach the client before it reads the
      // answer (it then sees a lost connection, not an answer). The connection is closed once
      // the client closes its side, or the server stops.
      answer(fd, status: status, headers: [:], body: "")
      shutdown(fd, Int32(SHUT_WR))
      let peerClosed: Int16 = 0x2000  // POLLRDHUP (Linux; Glibc hides it without _GNU_SOURCE)
      var peer = pollfd(fd: fd, events: peerClosed, revents: 0)
      while !state.withLock({ $0.stopped }), poll(&peer, 1, 100) == 0 {}
      return
    }
    if headers["expect"]?.lowercased() == "100-continue" { write(fd, "HTTP/1.1 100 Continue\r\n\r\n") }
    let length = Int(headers["content-length"] ?? "0") ?? 0
    if case .closeAfterReading(let bytes) = behaviour {
      while buffer.count < min(bytes, length) { guard fill() else { return } }
      // Unread data in the receive queue makes close() send a reset: the client's send fails.
      return
    }
    while buffer.count < length { guard fill() else { return } }
    request.body = Array(buffer.prefix(length))
    state.withLock { $0.requests.append(request) }
    requestReceived.signal()
    switch behaviour {
    case .respond(let status, let extra, let body):
      answer(fd, status: status, headers: extra, body: body)
    case .respondBytes(let status, let extra, let body):
      var text = "HTTP/1.1 \(status) Status\r\nContent-Length: \(body.count)\r\nConnection: close\r\n"
      for (name, value) in extra { text += "\(name): \(value)\r\n" }
      _ = write(fd, Array((text + "\r\n").utf8)[...] + body[...])
    case .stall(let seconds):
      _ = stopping.wait(timeout: .now() + seconds)
      answer(fd, status: 200, headers: [:], body: "")
    case .respondWithLargeBody(let status, let bodyBytes, let bytesPerSecond):
      guard
        write(fd, "HTTP/1.1 \(status) Status\r\nContent-Length: \(bodyBytes)\r\nConnection: close\r\n\r\n")
      else { return }
      let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 16)
      let started = DispatchTime.now()
      var left = bodyBytes
      while left > 0, pace(since: started, written: bodyBytes - left, bytesPerSecond: bytesPerSecond) {
        let piece = min(left, chunk.count)
        guard write(fd, chunk[..<piece]) else { return }
        left -= piece
        state.withLock { $0.bodyBytesWritten += piece }
      }
    case .respondEndlessly(let status, let bytesPerSecond):
      let head = "HTTP/1.1 \(status) Status\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      guard write(fd, head) else { return }
      let size = 1 << 16
      let chunk =
        Array((String(size, radix: 16) + "\r\n").utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: size)
        + Array("\r\n".utf8)
      let started = DispatchTime.now()
      var written = 0
      while pace(since: started, written: written, bytesPerSecond: bytesPerSecond) {
        guard write(fd, chunk[...]) else { return }
        written += size
        state.withLock { $0.bodyBytesWritten += size }
      }
    case .respondTrickling(let status):
      guard write(fd, "HTTP/1.1 \(status) Status\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n")
      else { return }
      // The pause between bytes ends early when the server stops.
      while stopping.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
        guard write(fd, "x") else { return }
        state.withLock { $0.bodyBytesWritten += 1 }
      }
    case .respondWithEndlessHeaders(let status):
      guard write(fd, "HTTP/1.1 \(status) Status\r\n") else { return }
      writeHeaderLinesForever(fd)
    case .respondWithEndlessTrailers(let status):
      let head =
        "HTTP/1.1 \(status) Status\r\nTransfer-Encoding: chunked\r\nTrailer: X-Filler\r\n"
        + "Connection: close\r\n\r\n2\r\nok\r\n0\r\n"
      guard write(fd, head) else { return }
      writeHeaderLinesForever(fd)
    case .closeAfterReading, .answerBeforeReading: break
    }
  }

  /// Writes `X-Filler-N: …` lines, 64 to a write, until the client goes away or the server stops.
  private func writeHeaderLinesForever(_ fd: Int32) {
    let value = String(repeating: "v", count: 40)
    var number = 0
    while !state.withLock({ $0.stopped }) {
      var text = ""
      for _ in 0..<64 {
        text += "X-Filler-\(number): \(value)\r\n"
        number += 1
      }
      guard write(fd, text) else { return }
      state.withLock { $0.headerLinesWritten += 64 }
    }
  }

  /// Waits until `written` bytes since `started` keep to `bytesPerSecond` (no wait without a
  /// rate); false once the server stops.
  private func pace(since started: DispatchTime, written: Int, bytesPerSecond: Int?) -> Bool {
    if let bytesPerSecond, bytesPerSecond > 0 {
      let due = started + .nanoseconds(Int(Double(written) / Double(bytesPerSecond) * 1e9))
      if due > .now(), stopping.wait(timeout: due) == .success {
        stopping.signal()  // not ours to take: stop() signals every waiter
        return false
      }
    }
    return !state.withLock { $0.stopped }
  }

  private func answer(_ fd: Int32, status: Int, headers: [String: String], body: String) {
    var text = "HTTP/1.1 \(status) Status\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    write(fd, text + "\r\n" + body)
  }

  @discardableResult
  private func write(_ fd: Int32, _ text: String) -> Bool { write(fd, Array(text.utf8)[...]) }

  /// Writes all of `bytes`; false when the client went away (or stopped reading for the send
  /// timeout).
  private func write(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
      let sent = bytes.withUnsafeBytes {
        send(fd, $0.baseAddress! + (offset - bytes.startIndex), bytes.endIndex - offset, Int32(MSG_NOSIGNAL))
      }
      if sent < 0 && errno == EINTR { continue }
      guard sent > 0 else { return false }
      offset += sent
    }
    return true
  }

  enum ServerError: Error { case socket(Int32) }
}

/// A port nobody listens on (bound, then closed).
package func refusedPort() -> UInt16 {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(fd) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  _ = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
  }
  _ = withUnsafeMutablePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
  }
  return UInt16(bigEndian: address.sin_port)
}
