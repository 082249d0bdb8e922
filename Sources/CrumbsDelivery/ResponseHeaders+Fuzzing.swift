// ResponseHeaders+Fuzzing.swift — the header reader's invariants over any input, for the fuzzer
// (Fuzz/HTTPHeaders) and the unit tests that replay what it found (FuzzRegressionTests), written
// once, as RetryPolicy+Fuzzing.swift does for the retry policy.
//
// Entry point: ResponseHeaders.fuzzViolation(_:) — the bytes become header lines, each ending at
// an LF as curl passes them, a short input repeated so that the bounds are reached. Once a line
// is refused every later one must be, what is kept must stay within the bounds, and no 1xx may
// be taken as the final status. Not signal-safe.

extension ResponseHeaders {
  /// What is wrong with reading the input `bytes` as header lines; nil when nothing is.
  package static func fuzzViolation(_ bytes: [UInt8]) -> String? {
    var reader = ResponseHeaders()
    var refused = false
    var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
      Array($0) + [10]
    }
    if lines.count < 4 { lines = Array(repeating: lines, count: 2000 / max(1, lines.count)).flatMap { $0 } }
    for line in lines + lines {
      let read = reader.read(line: line)
      if refused && read { return "a header line read after one was refused" }
      refused = refused || !read
    }
    let kept = reader.headers.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    if reader.bytes > maxBytes || reader.lines > maxLines || kept > maxBytes + 2 * maxLines {
      return "header lines past the bound: \(reader.bytes) bytes, \(reader.lines) lines, \(kept) kept"
    }
    if let status = reader.status, status < 200 { return "a 1xx (\(status)) taken as the final status" }
    return nil
  }
}
