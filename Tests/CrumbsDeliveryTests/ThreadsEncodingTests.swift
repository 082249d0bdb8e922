// ThreadsEncodingTests.swift — every thread of a crash in both wire formats: Backtrace's
// `threads` object keyed by thread id (the crashing thread `mainThread`, the only one with
// `fault`), and OTLP's `crumbs.thread_count` and `crumbs.threads` text beside the crashing
// thread's own `exception.stacktrace`.

import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct ThreadsEncodingTests {
  /// A stored report given a crash's thread list: the crashing thread, one captured with two
  /// frames, one that did not answer.
  func reportWithThreads() throws -> (ReportFixture, StoredReport) {
    let fixture = try ReportFixture()
    let stored = fixture.reports[0]
    var report = stored.report
    report.kind = .crash
    report.threadID = 100
    report.threadName = "main"
    func frame(_ index: Int, _ function: String) -> CrashReport.Frame {
      CrashReport.Frame(
        index: index, address: CrashReport.hex(0x5555_0000 + UInt64(index) * 16), module: "/usr/bin/app",
        moduleOffset: "0x10", buildID: nil, function: function, symbol: nil, symbolOffset: 4, file: nil,
        line: nil, note: nil)
    }
    report.frames = [frame(0, "crash()"), frame(1, "main")]
    report.exceptionStacktrace = CrashReport.stacktrace(report.frames)
    report.threads = [
      CrashReport.Thread(id: 100, name: "main", state: .crashed, crashed: true, frames: report.frames),
      CrashReport.Thread(
        id: 101, name: "worker", state: .captured, crashed: false,
        registers: [.init(name: "rip", value: "0x0000555500000000")],
        frames: [frame(0, "waitForWork()"), frame(1, "workerLoop()")]),
      CrashReport.Thread(id: 102, name: "masked", state: .noAnswer, crashed: false, frames: []),
    ]
    report.threadsNotRecorded = 5
    try fixture.store.replace(stored, with: report)
    return (fixture, try fixture.store.load(id: stored.report.id))
  }

  @Test func backtraceThreadsAreKeyedByIdWithTheCrashingOneMarked() throws {
    let (_, stored) = try reportWithThreads()
    let destination = BacktraceDestination(endpoint: "http://127.0.0.1:9", token: "t")
    let bytes = destination.json(for: stored.report, trail: [])
    let json = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    #expect(json["mainThread"] as? String == "100")
    let threads = try #require(json["threads"] as? [String: [String: Any]])
    #expect(Set(threads.keys) == ["100", "101", "102"])
    #expect(threads["100"]?["fault"] as? Bool == true && threads["100"]?["name"] as? String == "main")
    #expect(threads["101"]?["fault"] as? Bool == false && threads["101"]?["name"] as? String == "worker")
    let stack = try #require(threads["101"]?["stack"] as? [[String: Any]])
    #expect(stack.count == 2 && stack.first?["funcName"] as? String == "waitForWork()")
    #expect(threads["102"]?["state"] as? String == "did not answer")
    #expect((threads["102"]?["stack"] as? [Any])?.isEmpty == true)
  }

  @Test func otlpCarriesTheOtherThreadsAsText() throws {
    let (_, stored) = try reportWithThreads()
    let destination = OTLPDestination(endpoint: "http://127.0.0.1:9")
    let record = destination.crashRecord(stored.report, stored: stored)
    var attributes: [String: OTLPValue] = [:]
    for attribute in record.attributes { attributes[attribute.key] = attribute.value }
    #expect(attributes["crumbs.thread_count"] == .int(8))  // 3 listed + 5 not recorded
    #expect(attributes["exception.stacktrace"] == .string(stored.report.exceptionStacktrace))
    guard case .string(let text) = attributes["crumbs.threads"] else {
      Issue.record("no crumbs.threads: \(attributes.keys.sorted())")
      return
    }
    #expect(text.hasPrefix("Thread 101 \"worker\" (captured)\n#0  "))
    #expect(text.contains("waitForWork()") && text.contains("workerLoop()"))
    #expect(text.contains("Thread 102 \"masked\" (did not answer)"))
    #expect(!text.contains("Thread 100"))  // the crashing thread is exception.stacktrace
  }
}
