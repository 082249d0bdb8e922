// ThreadDumpAnswerTests.swift — the answer file of `crumbs threads`, read as what it is: bytes
// another process wrote. A whole answer round-trips; anything else (not JSON, cut short, another
// format or version, a field missing, past a bound) is a clear error, never a trap; and the
// answer's addresses are named with the modules it lists.

import CrumbsPlatform
import CrumbsReportTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct ThreadDumpAnswerTests {
  let answer = ThreadDumpAnswer(
    pid: 4242, sessionID: "6acdbf4e-718a-40c4-b194-12e38ae64caf", cookie: 0xDEAD_BEEF,
    snapshot: .sample(), error: nil)

  @Test func roundTrips() throws {
    let decoded = try ThreadDumpAnswer.decode(try answer.encoded())
    #expect(decoded == answer)
    #expect(decoded.wallNanoseconds == 1_700_000_000_000_000_000)
    #expect(decoded.longestPauseNanoseconds == 250_000)
    let failed = ThreadDumpAnswer(pid: 1, sessionID: "s", cookie: 0, snapshot: nil, error: "no capture")
    #expect(try ThreadDumpAnswer.decode(try failed.encoded()) == failed)
  }

  @Test func refusesWhatIsNotAWholeAnswer() throws {
    let bytes = try answer.encoded()
    var withoutPID = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    withoutPID["pid"] = nil
    let cases: [(String, [UInt8], ThreadDumpAnswerError)] = [
      ("empty", [], .damaged("not JSON")),
      ("garbage", Array("\u{0}\u{1}ELF".utf8), .damaged("not JSON")),
      ("cut short", Array(bytes.prefix(bytes.count / 2)), .damaged("not JSON")),
      ("an array", Array("[1,2]".utf8), .damaged("wrong type at the top level")),
      ("another format", Array(#"{"format":"x","version":1}"#.utf8), .unsupported("format \"x\"")),
      (
        "a newer version", Array(#"{"format":"crumbs.thread_dump","version":2}"#.utf8),
        .unsupported("version 2 (this crumbs reads 1; use a newer crumbs)")
      ),
      (
        "no pid", Array(try JSONSerialization.data(withJSONObject: withoutPID)),
        .damaged("no pid at the top level")
      ),
      (
        "neither snapshot nor error",
        Array(#"{"format":"crumbs.thread_dump","version":1,"pid":1,"session.id":"s","cookie":1}"#.utf8),
        .damaged("neither a snapshot nor an error")
      ),
    ]
    for (name, input, expected) in cases {
      #expect(throws: expected, "\(name)") { try ThreadDumpAnswer.decode(input) }
    }
  }

  @Test func refusesWhatPassesItsBounds() throws {
    let many = ThreadDumpAnswer(
      pid: 1, sessionID: "s", cookie: 1,
      snapshot: .sample(
        threads: 1, frames: Array(repeating: 1, count: ThreadDumpAnswer.maxFramesPerThread + 1)),
      error: nil)
    #expect(throws: ThreadDumpAnswerError.outOfBounds("thread 100 has 4097 frames")) {
      try ThreadDumpAnswer.decode(try many.encoded())
    }
  }

  @Test func namesTheAddressesWithTheModulesItLists() throws {
    // A return address just inside a function of this process, named with this process's modules.
    let address =
      UInt64(UInt(bitPattern: unsafeBitCast(getpid as @convention(c) () -> Int32, to: UnsafeRawPointer.self)))
      + 1
    let answer = ThreadDumpAnswer(
      pid: 1, sessionID: "s", cookie: 1,
      snapshot: .sample(threads: 2, frames: [address, address], modules: CurrentProcessModules.list()),
      error: nil)
    let threads = answer.threads(options: PostMortemProcessor.defaultSymbolication)
    #expect(threads.map(\.name) == ["thread-0", "thread-1"])
    #expect(threads.map(\.id) == [100, 101])
    #expect(threads.allSatisfy { !$0.crashed && $0.state == .captured })
    #expect(
      threads.first?.frames.map(\.function).contains("getpid") == true, "\(threads.first?.frames ?? [])")
  }
}
