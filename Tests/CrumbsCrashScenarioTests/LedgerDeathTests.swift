// LedgerDeathTests.swift — the in-flight ledger end to end: a real child holds operations open on
// two threads and dies (a crash on a third that began its own, or SIGKILL); the next launch
// (PostMortemProcessor) lists every open operation, oldest first, with its trace, thread and
// age, marks the crashing thread's, and leaves out the one that ended. Waits are on the child's
// pipe and its exit, bounded.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct LedgerDeathTests {
  func report(after mode: String) throws -> (CrashReport, orderThread: String, crashThread: String?) {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["ledger-death", directory.path, mode],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let orderThread = try #require(child.value(after: "order-thread "))
    #expect(child.readLine(seconds: 120) == "held")
    var crashThread: String?
    if mode == "kill" {
      #expect(child.readLine(seconds: 120) == "ready")
      child.signal(SIGKILL)
    } else {
      crashThread = child.value(after: "crash-thread ")
    }
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == (mode == "kill" ? SIGKILL : SIGSEGV))
    let stored = try #require(try crashReport(leftIn: directory))
    // As stored: report.json is written by hand, so read it back from the disk.
    let report = try ReportStore.decode(try Syscall.readFile(stored.reportPath))
    #expect(report.openOperations == stored.report.openOperations)
    return (report, orderThread, crashThread)
  }

  @Test func aCrashListsEveryOpenOperationAndMarksTheCrashingThreads() throws {
    let (report, orderThread, crashThread) = try report(after: "crash")
    #expect(report.kind == .crash)
    let open = try #require(report.openOperations)
    #expect(open.capacity == 512 && open.notHeld == 0 && open.unreadable == 0 && open.damage == nil)
    #expect(Set(open.operations.map(\.name)) == ["GET /v1/orders/:id", "orders.export", "POST /v1/crash"])
    #expect(open.operations.last?.name == "POST /v1/crash", "oldest first: the crashing request began last")
    let order = try #require(open.operations.first { $0.name == "GET /v1/orders/:id" })
    #expect(order.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && order.spanID == "00f067aa0ba902b7")
    #expect(order.parentSpanID == "b7ad6b7169203331")
    #expect(String(order.threadID) == orderThread)
    #expect(order.attributes.first?.key == "url.path")
    #expect(order.onCrashingThread == false)
    let crashing = try #require(open.operations.first { $0.name == "POST /v1/crash" })
    #expect(crashing.onCrashingThread == true && String(crashing.threadID) == crashThread)
    for operation in open.operations {
      #expect(operation.startTimeUnixNano <= report.timeUnixNano)
      #expect(operation.ageNanoseconds < 600_000_000_000, "\(operation)")
    }
  }

  @Test func aSIGKILLListsTheOpenOperationsToo() throws {
    let (report, orderThread, _) = try report(after: "kill")
    #expect(report.kind != .crash)
    let open = try #require(report.openOperations)
    #expect(open.operations.map(\.name).sorted() == ["GET /v1/orders/:id", "orders.export"])
    #expect(open.operations.allSatisfy { $0.onCrashingThread == nil })
    #expect(open.operations.contains { String($0.threadID) == orderThread })
  }
}
