// PlainHTTPTests.swift — which requests Crumbs' own HTTP client takes (plain http it can reach
// directly) and which it leaves to libcurl (https, proxies, credentials in the URL), and how it
// reads a URL and frames an answer. Its bounds against hostile servers are UntrustedServerTests',
// run against both transports.

import CrumbsDeliveryTestSupport
import Testing

@testable import CrumbsDelivery

@Suite struct PlainHTTPTests {
  @Test func urlsAreReadAsHostPortAndTarget() throws {
    let plain = try #require(PlainHTTPURL(parsing: "http://collector:4318/v1/logs?x=1#frag"))
    #expect(plain.host == "collector" && plain.port == 4318 && plain.target == "/v1/logs?x=1")
    #expect(plain.authority == "collector:4318")
    let v6 = try #require(PlainHTTPURL(parsing: "HTTP://[::1]:8080"))
    #expect(v6.host == "::1" && v6.port == 8080 && v6.target == "/" && v6.authority == "[::1]:8080")
    #expect(PlainHTTPURL(parsing: "http://127.0.0.1?q")?.target == "/?q")
    #expect(PlainHTTPURL(parsing: "http://127.0.0.1")?.port == 80)
    for refused in [
      "https://collector/v1/logs", "http://user:pw@collector/", "http://", "http://host:0/",
      "http://host:99999/",
      "http://host:x/", "http://[::1/", "http://ho st/", "http://host/\r\nX: 1", "ftp://host/",
    ] {
      #expect(PlainHTTPURL(parsing: refused) == nil, "\(refused)")
    }
  }

  /// (A proxy in the environment sends plain http through libcurl too; not set here, where other
  /// tests of this process send at the same time.)
  @Test func plainHTTPGoesThroughItsOwnClientTheRestThroughLibcurl() {
    #expect(DeliveryTransport.sendsPlain("http://127.0.0.1:4318/v1/logs"))
    #expect(!DeliveryTransport.sendsPlain("https://collector/v1/logs"))
    #expect(!DeliveryTransport.sendsPlain("http://user:pw@collector/v1/logs"))
  }

  @Test func aChunkedAnswerReadInAnyPiecesIsTheSame() throws {
    let answer = Array(
      ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n").utf8)
    for piece in [1, 2, 7, answer.count] {
      var reader = HTTPResponseReader(maxBody: 100)
      var start = 0
      while start < answer.count, reader.read(Array(answer[start..<min(answer.count, start + piece)])) {
        start += piece
      }
      #expect(reader.headers.status == 200)
      #expect(reader.body == Array("abcde".utf8))
      #expect(reader.complete, "pieces of \(piece)")
    }
    var short = HTTPResponseReader(maxBody: 3)
    let more = short.read(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789".utf8))
    #expect(!more)
    #expect(short.body == Array("012".utf8) && short.bodyOverLimit && !short.complete)
    var bad = HTTPResponseReader(maxBody: 100)
    let badMore = bad.read(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8))
    #expect(!badMore)
    #expect(bad.headers.status == 200 && !bad.complete)
    var untilClose = HTTPResponseReader(maxBody: 100)
    let closeMore = untilClose.read(Array("HTTP/1.1 400 Bad\r\n\r\nno".utf8))
    #expect(closeMore)
    #expect(!untilClose.complete)
    untilClose.end()
    #expect(untilClose.complete && untilClose.body == Array("no".utf8))
  }
}
