// FuzzHTTPResponse — libFuzzer target for an HTTP answer as PlainHTTPTransport reads it from a
// socket, inside the user's app (the uploader's thread): status lines, 1xx blocks, header lines,
// and a body framed by chunked encoding (sizes, extensions, trailers), Content-Length, or the
// end of the stream (HTTPResponseReader, through HTTPResponseReader.fuzzViolation).
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (answers of each framing, and broken
//                         ones); in a -sanitize=fuzzer build crumbs_fuzz_run drives fuzzOneInput;
//                         in a normal build, files given are replayed
//   fuzzOneInput          the bytes as an answer, whole and in pieces: never a trap, the same
//                         answer either way, body and header lines within their bounds
// Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsDelivery
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  if let violation = HTTPResponseReader.fuzzViolation(bytes) {
    fatalError("HTTPResponseReader: \(violation)")
  }
  return 0
}

func makeSeeds(in directory: String) throws -> Int {
  let seeds: [(String, String)] = [
    ("content-length", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
    ("until-close", "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nbad credentials"),
    (
      "chunked-trailers",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=1\r\nok\r\n0\r\nX-Trailer: t\r\n\r\n"
    ),
    ("continue-then-429", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many\r\nRetry-After: 5\r\n\r\n"),
    ("no-content", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"),
    ("bad-length", "HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok"),
    ("bad-chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n"),
    ("redirect", "HTTP/1.1 301 Moved\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n"),
  ]
  return try FuzzMain.writeSeeds(seeds, in: directory)
}

FuzzMain.run(
  name: "FuzzHTTPResponse", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    var reader = HTTPResponseReader(maxBody: 1 << 16)
    if reader.read(bytes) { reader.end() }
    return "status \(reader.headers.status.map(String.init) ?? "none"), body \(reader.body.count) bytes, "
      + (reader.complete ? "complete" : "cut")
  })
