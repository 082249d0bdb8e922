// FirstChanceTests.swift — first chance never loses a crash that was recorded before it existed
// (issue 35, case 8): a SIGSEGV handler that was there before Crumbs and does not recover —
// one that _exits, one in a dlopen'ed library that resets the action behind Crumbs' back and
// raises, one that returns without fixing anything — leaves a complete record, which the next
// launch reports. Only a handler known to recover (declared, or a recognised runtime's) gets
// the first chance: one that truly recovers runs on without a report, one that loops is
// recorded, one that ends the process leaves a mark the next launch names. Real child
// processes (the test child's FirstChanceScenarios.swift); every wait is on the child's pipe
// or its exit.

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
  static let variants = [
    ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
  ]

  /// The record `run` left is the null store's, complete, and the next launch reports it (the
  /// report it made).
  @discardableResult
  func expectRecordedNullStore(_ run: CrashRun, in directory: TestDirectory) throws -> CrashReport {
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
    return report
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

  @Test(
    "a handler that returns without fixing the fault: recorded, then the process dies", arguments: variants)
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

  @Test("a declared handler that returns without fixing: the fault loop is recorded", arguments: variants)
  func declaredHandlerThatLoops(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "handler-returns", variant: variant, directory: directory,
      environment: ["CRUMBS_TEST_DECLARE": "returning"])
    #expect(!run.lines.contains("looped"), "an endless fault loop")
    #expect(run.signal == SIGSEGV, "\(run.status)")
    let calls = run.lines.filter { $0.hasPrefix("returning-handler ") }
    #expect(calls.count == CrashRecord.firstChanceRepeats, "\(calls)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.firstChanceLooped)
    #expect(record.firstChance?.inProgress == 0)
    let report = try expectRecordedNullStore(run, in: directory)
    #expect(
      report.evidence.contains { $0.contains("a fault loop, recorded as a crash") }, "\(report.evidence)")
  }

  @Test(
    "a library handler that truly recovers runs on without a report only when known to recover",
    arguments: [
      ("sigsegv_crumbs_test", ""), ("other_runtime", ""), ("other_runtime", "module:libother_runtime"),
    ])
  func libraryRuntime(name: String, declare: String) throws {
    let directory = TestDirectory()
    let library = try compileSharedLibrary(recoveringRuntimeLibrarySource, named: name, in: directory)
    var environment = ["CRUMBS_TEST_LIBRARY": library, "CRUMBS_TEST_FAULTS": "1000"]
    if !declare.isEmpty { environment["CRUMBS_TEST_DECLARE"] = declare }
    let run = try runCrashScenario(
      "library-runtime-recovers", variant: ChildVariant(release: false, backtracer: false),
      directory: directory,
      environment: environment)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    if name.hasPrefix("sigsegv") || !declare.isEmpty {
      // libsigsegv_… is a recognised runtime's module; the other one is declared by name.
      #expect(run.lines.contains("recovered 1000"), "\(run.lines) \(run.stderr)")
      #expect(run.exitCode == 0, "\(run.status)")
      #expect(record.status == .noCrash)
      #expect(record.firstChance?.count == 1000)
      #expect(try crashReport(leftIn: directory) == nil, "a clean session makes no report")
    } else {
      // Not known to recover: recorded first; the process dies at the next fault.
      #expect(run.signal == SIGSEGV, "\(run.status)")
      #expect(record.status == .complete)
      #expect(record.signal.faultAddress == run.facts["page"].flatMap { UInt64($0.dropFirst(2), radix: 16) })
      #expect(record.firstChance == nil)
    }
  }

  @Test("a declared handler that ends the process leaves a mark the next launch names", arguments: variants)
  func declaredHandlerThatExits(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "handler-exits", variant: variant, directory: directory, environment: ["CRUMBS_TEST_DECLARE": "exiting"]
    )
    #expect(run.lines.contains("exiting-handler \(SIGSEGV)"), "\(run.lines)")
    #expect(run.exitCode == 70, "\(run.status)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .noCrash, "it had the first chance: nothing recorded")
    let mark = try #require(record.firstChance)
    #expect(mark.inProgress == 1)
    #expect(mark.signal == SIGSEGV)
    #expect(mark.faultAddress == 0)
    let function = try #require(run.functionAddress)
    #expect(mark.pc >= function && mark.pc < function + 64, "pc \(mark.pc) function \(function)")
    #expect(record.module(containing: mark.handler)?.path.hasSuffix("CrumbsTestChild") == true)

    let report = try #require(try crashReport(leftIn: directory), "no report").report
    #expect(report.kind == .abnormalTermination)
    #expect(
      report.exceptionMessage.hasPrefix(
        "the process ended inside a first-chance handler, without a crash record: a first-chance handler in "
          + "CrumbsTestChild (\(CrashReport.hex(mark.handler))) was given SIGSEGV (SEGV_MAPERR) at pc "
          + "\(CrashReport.hex(mark.pc)) (address 0x0)"), "\(report.exceptionMessage)")
    #expect(report.evidence.first?.hasPrefix("a first-chance handler in CrumbsTestChild") == true)
  }

  @Test("a declared handler that leaves by longjmp: a later death is not blamed on it")
  func declaredHandlerThatJumps() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "handler-longjmps", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_DECLARE": "jumping"])
    #expect(run.lines.contains("jumped 1"), "\(run.lines) \(run.stderr)")
    #expect(run.signal == SIGKILL, "\(run.status)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .noCrash)
    #expect(record.firstChance?.inProgress == 1, "never came back: it jumped")

    let report = try #require(try crashReport(leftIn: directory), "no report").report
    #expect(report.kind == .abnormalTermination)
    #expect(!report.exceptionMessage.contains("first-chance"), "\(report.exceptionMessage)")
    #expect(
      report.evidence.contains {
        $0.hasSuffix("so it left the handler (longjmp) and the process ended later")
      },
      "\(report.evidence)")
  }
}
