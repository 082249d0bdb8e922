// ResponseHeaders.swift — an HTTP answer's header lines as libcurl hands them to its header
// callback, one at a time: status lines (a 1xx is followed by another), `Name: value` lines, the
// blank line that ends each block, and the trailers of a chunked body.
//
// The lines come from the network and are bounded, bytes and lines alike, across the whole
// exchange: a server or proxy that streams header lines forever is cut off at the bound
// (libcurl before 7.84 passes every header line, and 7.88 still passes every trailer). Only what
// is read is kept: the final block's headers, each value at most the bound; trailers and the
// headers of 1xx answers are counted, never stored.
//
// Entry points: ResponseHeaders() → read(line:) per line, until it returns false (over the
// bound: the caller stops the transfer) → status, headers.
// Not signal-safe. Nothing here traps on any input (Fuzz/HTTPHeaders feeds it lines).

/// The header lines of one HTTP answer, read within `maxBytes` and `maxLines`.
package struct ResponseHeaders {
  /// The most header bytes (status lines, headers, trailers, line ends) read from one answer.
  /// Collectors and proxies send a few hundred; libcurl 7.84+ allows 300 KiB.
  package static let maxBytes = 64 << 10
  /// The most header lines read from one answer.
  package static let maxLines = 1000

  /// The final (non-1xx) status, once the blank line after its headers arrived.
  package private(set) var status: Int?
  /// Its headers, names lowercased, repeated ones joined with ", ".
  package private(set) var headers: [String: String] = [:]
  /// Bytes and lines read so far.
  package private(set) var bytes = 0
  package private(set) var lines = 0
  /// Whether the answer went past the bound (the line that did was not read).
  package private(set) var overLimit = false

  /// The status line being read and its headers (nil between blocks, and in trailers).
  private var pendingStatus: Int?
  private var pendingHeaders: [String: String] = [:]

  package init() {}

  /// Reads one line, CR LF included. False when it is past the bound: the line is not read, and
  /// neither is any later one (the transfer must stop).
  package mutating func read(line: UnsafeRawBufferPointer) -> Bool {
    guard !overLimit, line.count <= Self.maxBytes - bytes, lines < Self.maxLines else {
      overLimit = true
      return false
    }
    bytes += line.count
    lines += 1
    var end = line.count
    while end > 0, line[end - 1] == UInt8(ascii: "\r") || line[end - 1] == UInt8(ascii: "\n") { end -= 1 }
    let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[..<end]), as: UTF8.self)
    if text.isEmpty {
      if let code = pendingStatus, code >= 200 {
        status = code
        headers = pendingHeaders
      }
      pendingStatus = nil
      pendingHeaders = [:]
      return true
    }
    if text.hasPrefix("HTTP/") {
      let fields = text.split(separator: " ", maxSplits: 2)
      pendingStatus = fields.count > 1 ? Int(fields[1]) : nil
      pendingHeaders = [:]
      return true
    }
    // Trailers, and lines outside any block: counted, not kept.
    guard pendingStatus != nil, let colon = text.firstIndex(of: ":") else { return true }
    let name = text[..<colon].trimmed(of: " \t").lowercased()
    let value = text[text.index(after: colon)...].trimmed(of: " \t")
    pendingHeaders[name] = pendingHeaders[name].map { "\($0), \(value)" } ?? value
    return true
  }

  /// `read(line:)` for a line given as bytes (tests, the fuzzer).
  package mutating func read(line: [UInt8]) -> Bool {
    line.withUnsafeBytes { read(line: $0) }
  }
}
