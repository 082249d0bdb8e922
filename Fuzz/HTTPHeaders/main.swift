// FuzzHTTPHeaders — libFuzzer target for what the uploader reads from a server's answer, inside
// the user's app: the Retry-After header of a 429 (delay-seconds or an HTTP date, through
// RetryPolicy.pausedUntil → retryAfter → httpDate), the excerpt of a refusal's body that
// goes into dropped.reason, and an OTLP collector's answer body (OTLPDestination.verdict: the
// partial success of a 2xx, the google.rpc.Status of a refusal, protobuf and JSON); the
// answer's header lines as curl hands them over (ResponseHeaders, bounded); and the retry
// policy's decision on it (RetryPolicy.fuzzViolation: the bytes also read as settings, attempt
// count, status, clock). The input is the header's value, the body, the header lines (split at
// each LF) and the policy's inputs at once.
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (seconds, IMF-fixdates, hostile dates);
//                         in a -sanitize=fuzzer build crumbs_fuzz_run drives fuzzOneInput; in a
//                         normal build, files given are replayed
//   fuzzOneInput          the bytes through each parser; each must return, never trap, a
//                         pause must stay within a day of now, header lines within their
//                         bound, and the retry policy's decision within its rules
// Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsDelivery
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Times the answer may arrive at: the epoch, today, and a clock at its end.
let nows: [UInt64] = [0, 1_795_320_611_123_456_789, .max]
let day: UInt64 = 86_400 * 1_000_000_000

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  let value = String(decoding: bytes, as: UTF8.self)
  let answer = HTTPResponse(status: 429, headers: ["Retry-After": value], body: bytes)
  for now in nows {
    let until = RetryPolicy.pausedUntil(answer, now: now, default: 60)
    if until < now || (now <= .max - day && until - now > day) {
      fatalError("Retry-After \(value.debugDescription) at \(now): paused until \(until)")
    }
  }
  if let date = RetryPolicy.httpDate(value), !date.isFinite { fatalError("httpDate \(date)") }
  _ = RetryPolicy.excerpt(bytes)
  if let violation = RetryPolicy.fuzzViolation(bytes) { fatalError("RetryPolicy: \(violation)") }
  checkOTLPAnswer(bytes)
  if let violation = ResponseHeaders.fuzzViolation(bytes) { fatalError("ResponseHeaders: \(violation)") }
  return 0
}

let otlp = OTLPDestination(endpoint: "http://127.0.0.1:9")
let otlpRequest = DeliveryRequest(
  destination: "otlp", reportID: "fuzz", url: otlp.logsURL, headers: [], body: [], itemCount: 3)

/// The bytes as an OTLP answer's body, in both encodings: a 2xx is delivered (perhaps with a
/// partial success: its counts are the server's word) or dropped, never retried; a 400 is
/// always dropped.
func checkOTLPAnswer(_ bytes: [UInt8]) {
  for type in ["application/x-protobuf", "application/json"] {
    switch otlp.verdict(
      on: HTTPResponse(status: 200, headers: ["Content-Type": type], body: bytes), to: otlpRequest)
    {
    case .delivered, .dropped: break
    case let other: fatalError("a 2xx answer read as \(other)")
    }
    guard
      case .dropped = otlp.verdict(
        on: HTTPResponse(status: 400, headers: ["Content-Type": type], body: bytes), to: otlpRequest)
    else { fatalError("a 400 answer not dropped") }
  }
}

func makeSeeds(in directory: String) throws -> Int {
  let seeds: [(String, String)] = [
    ("seconds", "120"),
    ("seconds-zero", "0"),
    ("seconds-fraction", "1.5"),
    ("seconds-huge", "99999999999999999999999999999999"),
    ("seconds-negative", "-5"),
    ("imf-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT"),
    ("imf-fixdate-future", "Tue, 14 Nov 2030 22:13:50 GMT"),
    ("imf-fixdate-year-min", "Sun, 06 Nov -2147483648 08:49:37 GMT"),
    ("imf-fixdate-year-99999", "Sun, 06 Nov 99999 08:49:37 GMT"),
    ("imf-fixdate-fields-max", "Sun, 2147483647 Nov 1994 2147483647:2147483647:2147483647 GMT"),
    ("rfc850-date", "Sunday, 06-Nov-94 08:49:37 GMT"),
    ("asctime-date", "Sun Nov  6 08:49:37 1994"),
    ("text-body", "bad credentials:\r\nBearer s3cret\n"),
    (
      "header-lines",
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nX-A: 1\r\n"
        + "X-A: 2\r\n\r\nX-Trailer: t\r\n"
    ),
  ]
  return try FuzzMain.writeSeeds(seeds, in: directory)
}

FuzzMain.run(
  name: "FuzzHTTPHeaders", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    let value = String(decoding: bytes, as: UTF8.self)
    let wait = RetryPolicy.retryAfter(value, now: nows[1], default: 60)
    return "Retry-After waits \(Double(wait) / 1e9) s"
  })
