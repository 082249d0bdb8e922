// StackOverflowTests.swift — a stack overflow on any thread is recorded and reported as one
// (issue 12 item 4).
//
// Real children overflow their stack (debug and release, Swift backtracer on and off) on threads
// that never append a breadcrumb and never call prepareCurrentThread: a Dispatch worker, a Task
// (Swift concurrency's pool), a plain pthread, and the 71st thread while 70 others hold
// alternate stacks (more than the pool's 64). The next launch's report must say "stack
// overflow" and name the recursing function among its frames. The main thread and a thread
// that appended are checked too, and a null dereference must not be called an overflow.

import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

let overflowScenarios = [
  "stack-overflow-dispatch", "stack-overflow-task", "stack-overflow-pthread", "stack-overflow-71st",
  "stack-overflow-main", "stack-overflow-thread",
]

@Suite("Stack overflow anywhere")
struct StackOverflowTests {
  @Test(
    "a stack overflow on any thread gives a report that says so, with the recursing function",
    arguments: overflowScenarios, ChildVariant.all)
  func overflowReported(scenario: String, variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped \(scenario) [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario(scenario, variant: variant, directory: directory)
    let context = "\(scenario) [\(variant)]: \(run.lines.joined(separator: " | "))"
    #expect(run.signal == SIGSEGV, "\(context)")
    if scenario == "stack-overflow-dispatch" {
      #expect(run.facts["covers-new-threads"] == "true", "\(context)")
    }
    if scenario == "stack-overflow-71st" {
      // 70 holders, each with an alternate stack of its own: the pool's 64 and 6 mapped for them.
      #expect(run.facts["holders"] == "70 distinct 70", "\(context)")
    }

    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(record.status == .complete, "no record: the thread had no alternate stack: \(context)")
    #expect(record.ranOnAlternateStack, "\(context)")
    if ["stack-overflow-pthread", "stack-overflow-71st", "stack-overflow-thread"].contains(scenario) {
      #expect(record.threadName == "overflower", "\(context)")
    }

    let report = try #require(try crashReport(leftIn: directory)?.report, "\(context)")
    #expect(report.kind == .crash)
    #expect(report.exceptionType == "SIGSEGV")
    #expect(report.exceptionMessage.hasPrefix("stack overflow: "), "\(report.exceptionMessage): \(context)")
    // The recursing function, by name and by address, fills the frames.
    let start = try #require(run.functionAddress, "\(context)")
    let recursing = report.frames.filter { $0.function == "crumbs_test_overflow_stack" }
    #expect(recursing.count > 8, "\(report.exceptionStacktrace.prefix(600)): \(context)")
    #expect(record.frames.prefix(16).filter { $0 >= start && $0 < start + 512 }.count > 8, "\(context)")
    #expect(report.exceptionStacktrace.contains("crumbs_test_overflow_stack"))
  }

  @Test("a fault that is not on a stack's guard is not called a stack overflow")
  func nullDereferenceIsNotAnOverflow() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "null-deref", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV)
    let report = try #require(try crashReport(leftIn: directory)?.report)
    #expect(report.exceptionMessage.hasPrefix("SEGV_MAPERR at 0x0"), "\(report.exceptionMessage)")
    #expect(!report.exceptionMessage.contains("stack overflow"))
  }
}
