// HTTPResponseReader+Fuzzing.swift — the answer reader's invariants over any bytes, for the
// fuzzer (Fuzz/HTTPResponse) and the unit tests that replay what it found
// (FuzzRegressionTests), written once, as ResponseHeaders+Fuzzing.swift does for header lines.
//
// Entry point: HTTPResponseReader.fuzzViolation(_:) — the bytes read whole, then again in
// pieces whose sizes the first byte picks (1 to 256, as a socket may hand them over), then
// repeated so the bounds are reached: the pieces must read the same answer as the whole, the
// body must stay within its limit and the header lines within theirs, and no 1xx may be taken
// as the final status. Not signal-safe.

extension HTTPResponseReader {
  /// What is wrong with reading `bytes` as an answer; nil when nothing is.
  package static func fuzzViolation(_ bytes: [UInt8]) -> String? {
    let limit = 1 << 16
    func readAll(_ input: [UInt8], piece: Int) -> HTTPResponseReader {
      var reader = HTTPResponseReader(maxBody: limit)
      input.withUnsafeBytes { bytes in
        var start = 0
        while start < bytes.count {
          let end = min(bytes.count, start + piece)
          if !reader.read(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) { return }
          start = end
        }
        reader.end()
      }
      return reader
    }
    let piece = 1 + Int(bytes.first ?? 0)
    var inputs = [bytes]
    if !bytes.isEmpty, bytes.count < 4096 {
      inputs.append(Array(repeating: bytes, count: (1 << 18) / bytes.count + 1).flatMap { $0 })
    }
    for input in inputs {
      let whole = readAll(input, piece: max(1, input.count))
      let pieces = readAll(input, piece: piece)
      if whole.headers.status != pieces.headers.status || whole.headers.headers != pieces.headers.headers
        || whole.body != pieces.body || whole.complete != pieces.complete
        || whole.bodyOverLimit != pieces.bodyOverLimit
      {
        return "read in pieces of \(piece) bytes, the answer differs from the whole"
      }
      if whole.body.count > limit { return "a body of \(whole.body.count) bytes past the limit" }
      if whole.headers.bytes > ResponseHeaders.maxBytes || whole.headers.lines > ResponseHeaders.maxLines {
        return "header lines past the bound: \(whole.headers.bytes) bytes, \(whole.headers.lines) lines"
      }
      if let status = whole.headers.status, status < 200 {
        return "a 1xx (\(status)) taken as the final status"
      }
      if whole.headers.status == nil, !whole.body.isEmpty { return "a body kept without a final status" }
    }
    return nil
  }
}
