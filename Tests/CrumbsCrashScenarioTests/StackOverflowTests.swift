// StackOverflowTests.swift — a stack overflow on any thread is recorded and reported as one
// (issue 12 item 4).
//
// Real children overflow their stack (debug and release, Swift backtracer on and off) on threads
// that never append a breadcrumb and never call prepareCurrentThread: a Dispatch worker, a Task
// (Swift concurrency's pool), a plain pthread, and the 71st thread while 70 others hold
// alternate stacks (more than the pool's 64). The next launch's report must say "stack
// overflow" and name the recursing function among its frames. The main thread and a thread
// that appended are checked too, and a null dereference must not be called an overflow.

import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

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

  /// glibc 2.42 guards a thread's stack with MADV_GUARD_INSTALL (Linux 6.13+): the guard stays
  /// inside the stack's `rw-p` line of /proc/self/maps, so bounds taken from maps include it, and
  /// an overflow leaves the SP in it. The handler must not fault reading [sp] there: a complete
  /// record, called a stack overflow, whose stack starts above the guard, with the frames.
  @Test(
    "a thread stack guarded with MADV_GUARD_INSTALL: the overflow is reported as one, with its frames",
    arguments: [
      ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
    ])
  func overflowIntoGuardRegion(variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped overflow-guarded [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario("overflow-guarded", variant: variant, directory: directory)
    let context = "overflow-guarded [\(variant)]: \(run.lines.joined(separator: " | "))"
    if run.lines.contains("guard-regions unsupported") {
      print("skipped overflow-guarded: this kernel has no MADV_GUARD_INSTALL (Linux 6.13+)")
      return
    }
    #expect(run.signal == SIGSEGV, "\(context)")
    let stackLow = try #require(run.facts["stack-low"].flatMap { UInt64($0) }, "\(context)")
    let guardLow = try #require(run.facts["guard-low"].flatMap { UInt64($0) }, "\(context)")

    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(
      record.status == .complete, "nested signal \(String(describing: record.nestedSignal)): \(context)")
    #expect(record.threadName == "overflower", "\(context)")
    #expect(record.signal.faultAddress >= guardLow && record.signal.faultAddress < stackLow, "\(context)")
    // The guard is not part of the stack.
    #expect(record.stackLow == stackLow, "\(record.stackLow) \(stackLow): \(context)")
    #expect(record.threads != nil, "\(context)")

    let report = try #require(try crashReport(leftIn: directory)?.report, "\(context)")
    #expect(report.exceptionMessage.hasPrefix("stack overflow: "), "\(report.exceptionMessage): \(context)")
    let recursing = report.frames.filter { $0.function == "crumbs_test_overflow_stack" }
    #expect(recursing.count > 8, "\(report.exceptionStacktrace.prefix(600)): \(context)")
  }
}
