// FirstChanceTests.swift — first chance never loses a crash that was recorded before it existed
// (issue 35, case 8): a SIGSEGV handler that was there before Crumbs and does not recover —
// one that _exits, one in a dlopen'ed library that resets the action behind the executable's
// back and raises, one that returns without fixing anything — leaves a complete record, which
// the next launch reports. Real child processes (the test child's FirstChanceScenarios.swift);
// every wait is on the child's pipe or its exit.

import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("First chance never loses a crash")
struct FirstChanceTests {
  /// The debug child, and the release child when `make test` built it.
  static let variants = [ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false)]

  /// The record `run` left is the null store's, complete, and the next launch reports it.
  func expectRecordedNullStore(_ run: CrashRun, in directory: TestDirectory) throws {
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete, "\(run.lines) \(run.stderr)")
    #expect(record.signal.number == SIGSEGV)
    #expect(record.signal.faultAddress == 0)
    let function = try #require(run.functionAddress)
    let pc = try #require(record.frames.first)
    #expect(pc >= function && pc < function + 64, "pc \(pc) function \(function)")
    let report = try #require(try crashReport(leftIn: directory), "no report").report
    #expect(report.kind == .crash)
    #expect(report.exceptionType == "SIGSEGV", "\(report.exceptionType): \(report.exceptionMessage)")
  }

  @Test("a handler that writes and _exits after the fault: the crash is recorded first", arguments: variants)
  func handlerThatExits(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario("handler-exits", variant: variant, directory: directory)
    #expect(run.lines.contains("exiting-handler \(SIGSEGV)"), "\(run.lines)")
    #expect(run.exitCode == 70, "\(run.status)")
    try expectRecordedNullStore(run, in: directory)
  }

  @Test(
    "a dlopen'ed library's handler that resets behind our back and raises: recorded first",
    arguments: ["libc signal()", "raw rt_sigaction"], variants)
  func libraryHandlerThatRaises(reset: String, variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let library = try compileSharedLibrary(resettingHandlerLibrarySource, named: "resetting", in: directory)
    var environment = ["CRUMBS_TEST_LIBRARY": library]
    if reset != "libc signal()" { environment["CRUMBS_TEST_RAW"] = "1" }
    let run = try runCrashScenario(
      "library-handler-raises", variant: variant, directory: directory, environment: environment)
    #expect(run.lines.contains("library-handler"), "\(run.lines)")
    #expect(run.signal == SIGSEGV, "\(run.status)")
    try expectRecordedNullStore(run, in: directory)
  }

  @Test("a handler that returns without fixing the fault: recorded, then the process dies", arguments: variants)
  func handlerThatReturns(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario("handler-returns", variant: variant, directory: directory)
    #expect(!run.lines.contains("looped"), "an endless fault loop")
    #expect(run.signal == SIGSEGV, "\(run.status)")
    // Called once, after the record: then the fault comes back to the default action.
    #expect(run.lines.filter { $0.hasPrefix("returning-handler ") } == ["returning-handler 1"])
    try expectRecordedNullStore(run, in: directory)
  }
}
