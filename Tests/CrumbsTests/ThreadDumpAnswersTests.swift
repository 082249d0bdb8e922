// ThreadDumpAnswersTests.swift — the answers a client keeps beside its ring stay bounded,
// whatever a flood of requests asks: at most `maxPresent` at once, one capture per batch of
// requests, an answer already there replaced rather than added, abandoned ones removed once
// older than any asker waits, and every one removed at close.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct ThreadDumpAnswersTests {
  struct NoCapture: Error, CustomStringConvertible {
    var description: String { "no capture here" }
  }

  @Test func answersStayWithinTheirBound() throws {
    let directory = TestDirectory()
    let folder = directory.file("rings")
    try Syscall.makeDirectory(folder)
    let session = SessionID()
    let answers = ThreadDumpAnswers(ringPath: folder + "/\(session).ring", sessionID: session)
    var captures = 0
    let capture = { () throws(NoCapture) -> ThreadSnapshot in
      captures += 1
      return .sample()
    }

    #expect(answers.write(Array(1...10), capture: capture) == ThreadDumpAnswers.maxPresent)
    #expect(captures == 1, "one capture answers the whole batch")
    #expect(answers.present().count == ThreadDumpAnswers.maxPresent)
    for cookie in UInt32(1)...4 {
      let answer = try ThreadDumpAnswer.decode(try Syscall.readFile(answers.path(for: cookie)))
      #expect(answer.cookie == cookie)
      #expect(answer.sessionID == session.description)
    }
    // No room: nothing captured, nothing written.
    #expect(answers.write([11], capture: capture) == 0)
    #expect(captures == 1)
    // An answer present is replaced.
    #expect(answers.write([2, 12], capture: capture) == 1)
    #expect(captures == 2)
    #expect(answers.present().count == ThreadDumpAnswers.maxPresent)
    #expect(!Syscall.fileExists(answers.path(for: 12)))
    // Answers nobody took for longer than an asker ever needs are removed, and make room.
    let later = SystemClock.wallNanoseconds() + ThreadDumpAnswers.abandonedAfterNanoseconds + 1_000_000_000
    #expect(answers.write([13], now: later, capture: capture) == 1)
    #expect(answers.present() == [answers.path(for: 13)])

    // A failed capture is answered too, with why.
    answers.removeAll()
    #expect(answers.present().isEmpty)
    #expect(answers.write([5]) { () throws(NoCapture) -> ThreadSnapshot in throw NoCapture() } == 1)
    let failed = try ThreadDumpAnswer.decode(try Syscall.readFile(answers.path(for: 5)))
    #expect(failed.snapshot == nil && failed.error == "no capture here")
    // Another session's answers are not this one's to count or remove.
    let other = ThreadDumpAnswers(ringPath: folder + "/\(SessionID()).ring", sessionID: SessionID())
    #expect(other.present().isEmpty)
    answers.removeAll()
    #expect(try Syscall.directoryEntries(folder) == [])
  }
}
