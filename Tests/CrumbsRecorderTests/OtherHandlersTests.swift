// OtherHandlersTests.swift — the crash handler beside other code that handles fatal signals:
// runtimes that fix their own faults (installed before Crumbs, or after it and kept by a
// re-install), a library that replaces the handler right before a crash, a vfork() child that
// crashes in the parent's memory. Each runs the test child (Tests/CrumbsTestChild/
// CrashScenarios.swift) and reads what it left; nothing sleeps to assert on timing.

import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Other signal handlers")
struct OtherHandlersTests {
  /// The debug child with the Swift runtime's backtracer on and off, and the release child
  /// (without the backtracer) when `make test` built it.
  static let variants = [
    ChildVariant(release: false, backtracer: false), ChildVariant(release: false, backtracer: true),
    ChildVariant(release: true, backtracer: false),
  ]

  @Test(
    "a runtime's recovered faults leave no record; the fault it gives up on is recorded",
    arguments: ["return", "raise", "chain"], variants)
  func runtimeThatFixesItsOwnFaults(giveUp: String, variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "runtime-recovers", variant: variant, directory: directory,
      environment: ["CRUMBS_TEST_GIVE_UP": giveUp, "CRUMBS_TEST_DECLARE": "runtime"])
    // Three faults on the runtime's page, each fixed by it: the process runs on.
    #expect(run.facts["recovered"] == "3", "\(run.lines) \(run.stderr)")
    #expect(run.signal == SIGSEGV, "\(run.status)")
    // The null store it does not own is the crash, with its own address and function.
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete)
    #expect(record.signal.number == SIGSEGV)
    #expect(record.signal.faultAddress == 0)
    #expect(record.threadsCrashed == 1)
    let function = try #require(run.functionAddress)
    let pc = try #require(record.frames.first)
    #expect(pc >= function && pc < function + 64, "pc \(pc) function \(function)")
  }

  @Test(
    "a process whose declared handler fixes every fault exits cleanly, its record untouched (1000 faults)",
    arguments: ["runtime", "module:CrumbsTestChild"])
  func recoveredFaultsOnly(declared: String) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "runtime-recovers", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: [
        "CRUMBS_TEST_THEN": "exit", "CRUMBS_TEST_FAULTS": "1000", "CRUMBS_TEST_DECLARE": declared,
      ])
    #expect(run.facts["recovered"] == "1000", "\(run.lines) \(run.stderr)")
    #expect(run.exitCode == 0, "\(run.status)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .noCrash)
    // Each fault was marked before the handler had it, and taken back when it returned.
    let mark = try #require(record.firstChance)
    #expect(mark.count == 1000)
    #expect(mark.inProgress == 0)
    #expect(mark.signal == SIGSEGV)
  }

  @Test("a handler nobody declared gets no first chance: its fault is recorded before it runs")
  func undeclaredHandlerIsCalledAfterTheRecord() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "runtime-recovers", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_THEN": "exit"])
    // The first fault on the runtime's page is recorded, then the handler is called; it fixes
    // the page, but the process goes on with the default action and dies at the next fault.
    #expect(run.facts["recovered"] == nil, "\(run.lines)")
    #expect(run.signal == SIGSEGV, "\(run.status)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete)
    #expect(record.signal.faultAddress != 0)
    #expect(record.firstChance == nil, "no first chance given")
  }

  @Test("a handler replaced right before a crash is written in the record when it happens")
  func replacementSeenWhenItHappens() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "handler-replaced", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.replacedSignals == [SIGSEGV])

    let again = TestDirectory()
    let reasserted = try runCrashScenario(
      "handler-reasserted", variant: ChildVariant(release: false, backtracer: false), directory: again)
    let retaken = try CrashRecord.read(file: try #require(reasserted.recordPath))
    #expect(retaken.status == .complete)
    #expect(retaken.replacedSignals == [], "taken back by the re-install")
  }

  @Test("a vfork() child that crashes leaves the parent's crash handling whole")
  func vforkChildCrash() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "vfork-child-crashes", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.facts["vfork-child"] == "\(SIGSEGV)", "\(run.lines)")
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete, "not partial, not missing")
    #expect(record.signal.faultAddress == 0)
    #expect(record.threadsCrashed == 1)
  }
}
