// HTTPResponseReader.swift — an HTTP/1.1 answer read from a socket's bytes as they come, for
// PlainHTTPTransport: header blocks (1xx ones skipped) through ResponseHeaders and its bounds,
// then the body framed by Transfer-Encoding: chunked, Content-Length, or the end of the stream.
//
// The bytes come from the network and are untrusted: every line is bounded (a header line by
// ResponseHeaders' bounds, a chunk-size line by `maxChunkLine`), the body is kept up to `maxBody`
// bytes and reading stops past it; a chunk size or Content-Length that is not a number stops the
// body there (the status stands, the body is marked cut). Splitting the same bytes differently
// never changes what is read (Fuzz/HTTPResponse checks it).
//
// Entry points: HTTPResponseReader(maxBody:) → read(_:) per received piece, until it returns
// false (nothing more wanted) → end() at the end of the stream → headers, body, complete.
// Not signal-safe. Nothing here traps on any input.

/// One HTTP answer, read from the bytes of a connection.
package struct HTTPResponseReader {
  /// The longest chunk-size line read (hex size, extensions, CR LF).
  package static let maxChunkLine = 4096

  private enum Phase: Equatable {
    case headers
    /// Body bytes left (nil: until the end of the stream).
    case body(remaining: Int?)
    case chunkSize
    case chunkData(remaining: Int)
    /// The CR LF after a chunk's data.
    case chunkEnd
    case trailers
    case done
  }

  /// The header lines read, bounded (status and headers of the final block).
  package private(set) var headers = ResponseHeaders()
  /// The body, at most `maxBody` bytes.
  package private(set) var body: [UInt8] = []
  /// Whether the body went past `maxBody` (reading stopped there).
  package private(set) var bodyOverLimit = false
  /// Whether the whole answer was read, as its framing says.
  package var complete: Bool { phase == .done && !bodyOverLimit && !cut }
  /// Whether reading stopped before the answer's end: its framing could not be read (a bad
  /// chunk size or Content-Length), or its trailers went past the header lines' bound.
  package private(set) var cut = false
  package let maxBody: Int
  /// Whether a Content-Length over `maxBody` ends reading before the body (a download, which
  /// has no use for a part), rather than after `maxBody` bytes of it (an answer's start is read).
  package let refusesLongerClaims: Bool

  private var phase = Phase.headers
  private var line: [UInt8] = []

  package init(maxBody: Int, refusesLongerClaims: Bool = false) {
    self.maxBody = max(0, maxBody)
    self.refusesLongerClaims = refusesLongerClaims
  }

  /// Reads the next bytes of the stream. False once no more are wanted: the answer is complete,
  /// or reading stopped (header bounds, body limit, bad framing).
  @discardableResult
  package mutating func read(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    while index < bytes.count {
      switch phase {
      case .done:
        return false
      case .headers, .chunkSize, .chunkEnd, .trailers:
        let limit =
          phase == .chunkSize || phase == .chunkEnd ? Self.maxChunkLine : ResponseHeaders.maxBytes + 1
        while index < bytes.count, line.count < limit {
          let byte = bytes[index]
          line.append(byte)
          index += 1
          if byte == UInt8(ascii: "\n") { break }
        }
        guard line.last == UInt8(ascii: "\n") || line.count >= limit else { return true }
        let ended = line
        line.removeAll(keepingCapacity: true)
        if !take(line: ended) { return false }
      case .body(let remaining):
        let count = min(bytes.count - index, remaining ?? Int.max)
        if !keep(UnsafeRawBufferPointer(rebasing: bytes[index..<index + count])) { return false }
        index += count
        if let remaining {
          phase = remaining - count == 0 ? .done : .body(remaining: remaining - count)
        }
      case .chunkData(let remaining):
        let count = min(bytes.count - index, remaining)
        if !keep(UnsafeRawBufferPointer(rebasing: bytes[index..<index + count])) { return false }
        index += count
        phase = remaining - count == 0 ? .chunkEnd : .chunkData(remaining: remaining - count)
      }
    }
    return phase != .done
  }

  package mutating func read(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { read($0) } }

  /// The stream ended: a body read until the end of the stream is complete; any other unfinished
  /// phase leaves the answer incomplete.
  package mutating func end() {
    if case .body(nil) = phase { phase = .done }
  }

  /// One whole line (LF included), or one that reached its phase's bound.
  private mutating func take(line: [UInt8]) -> Bool {
    switch phase {
    case .headers:
      let hadStatus = headers.status != nil
      guard headers.read(line: line) else { return stop() }
      if !hadStatus, headers.status != nil { startBody() }
      return true
    case .trailers:
      guard headers.read(line: line) else { return cutShort() }
      if Self.isBlank(line) { phase = .done }
      return phase != .done
    case .chunkEnd:
      guard Self.isBlank(line) else { return cutShort() }
      phase = .chunkSize
      return true
    case .chunkSize:
      guard line.last == UInt8(ascii: "\n"), let size = Self.chunkSize(line) else {
        return cutShort()
      }
      phase = size == 0 ? .trailers : .chunkData(remaining: size)
      return true
    case .body, .chunkData, .done:
      return false
    }
  }

  /// The final block's headers ended: how its body is framed.
  private mutating func startBody() {
    let status = headers.status ?? 0
    if status == 204 || status == 304 {
      phase = .done
    } else if let coding = headers.headers["transfer-encoding"], coding.lowercased().contains("chunked") {
      phase = .chunkSize
    } else if let length = headers.headers["content-length"] {
      guard let count = Self.decimal(length) else {
        cut = true
        phase = .done
        return
      }
      // A download claimed larger than the limit is refused before its first byte: nothing of
      // it would be usable, and reading it to the limit costs the limit.
      guard count <= maxBody || !refusesLongerClaims else {
        bodyOverLimit = true
        phase = .done
        return
      }
      phase = count == 0 ? .done : .body(remaining: count)
    } else {
      phase = .body(remaining: nil)
    }
  }

  /// Keeps body bytes up to the limit; false (stop) past it.
  private mutating func keep(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let room = maxBody - body.count
    guard bytes.count <= room else {
      body += bytes.prefix(room)
      bodyOverLimit = true
      phase = .done
      return false
    }
    body += bytes
    return true
  }

  private mutating func stop() -> Bool {
    phase = .done
    return false
  }

  private mutating func cutShort() -> Bool {
    cut = true
    return stop()
  }

  private static func isBlank(_ line: [UInt8]) -> Bool {
    line.allSatisfy { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }
  }

  /// A chunk-size line's size: hex digits, then optional extensions after ";"; nil when it is
  /// not one or does not fit an Int.
  private static func chunkSize(_ line: [UInt8]) -> Int? {
    var size = 0
    var digits = 0
    for byte in line {
      let digit: Int
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(byte - UInt8(ascii: "a")) + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = Int(byte - UInt8(ascii: "A")) + 10
      default:
        guard digits > 0, [UInt8(ascii: ";"), UInt8(ascii: " "), UInt8(ascii: "\t"), 13, 10].contains(byte)
        else {
          return nil
        }
        return size
      }
      guard size <= (Int.max - digit) / 16 else { return nil }
      size = size * 16 + digit
      digits += 1
    }
    return nil
  }

  /// A Content-Length value: decimal digits only (repeated equal values, "5, 5", accepted).
  private static func decimal(_ text: String) -> Int? {
    let values = text.split(separator: ",").map { $0.trimmed(of: " \t") }
    guard let first = values.first, values.allSatisfy({ $0 == first }), !first.isEmpty,
      first.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
    else { return nil }
    return Int(first)
  }
}
