// DyingProcessTests.swift — what happens between a recorded crash and the death when handlers
// are chained after Crumbs' (the Swift runtime's backtracer, on by default on Linux): the
// actions they change on the way are not "replaced handlers", no other thread serves a request
// meanwhile, and the backtracer's helper ending is not a breadcrumb of the crash (issue 37).

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct DyingProcessTests {
  /// The child variants with the runtime's backtracer on (its default), those built here.
  static let backtracerVariants = ChildVariant.all.filter { $0.backtracer && $0.executable != nil }

  @Test(
    "a default client crashing with the backtracer on: no replaced handler, no SIGCHLD in the trail",
    arguments: backtracerVariants)
  func backtracerChainedAfterTheRecord(variant: ChildVariant) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario("client-dying", variant: variant, directory: directory)
    let context = "[\(variant)] \(run.lines.joined(separator: " | ")) \(run.stderr.suffix(2000))"
    #expect(run.signal == SIGSEGV, "\(context)")
    let session = try #require(run.facts["session"], "\(context)")
    let rings = directory.path + "/rings/"

    // The record is complete, and says nothing was replaced: the backtracer put SIG_DFL back for
    // every signal it handles only once the crash began.
    let record = try CrashRecord.read(file: rings + session + ".crash")
    #expect(record.status == .complete, "\(context)")
    #expect(record.replacedSignals.isEmpty, "\(record.replacedSignals): \(context)")
    // Its helper process's end (SIGCHLD) is not a breadcrumb of the crash.
    let trail = try RingReader.read(file: rings + session + ".ring").breadcrumbs
    #expect(!trail.contains { $0.message.hasPrefix("SIGCHLD") }, "\(trail.suffix(4).map(\.message))")

    // The next launch (and `crumbs collect`, the same processor) reports the crash, and no
    // handler replaced.
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    #expect(outcome.reports.count == 1, "\(outcome.problems)")
    #expect(!outcome.problems.contains { $0.contains("replaced") }, "\(outcome.problems)")
    #expect(outcome.reports.first?.report.evidence.contains { $0.contains("replaced") } != true)
  }

  @Test(
    "no other thread serves a request between the crash and the death, the backtracer chained or not",
    arguments: [
      ChildVariant(release: false, backtracer: false), ChildVariant(release: false, backtracer: true),
    ])
  func threadsStayStoppedUntilTheDeath(variant: ChildVariant) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario("client-dying-late-worker", variant: variant, directory: directory)
    let context = "[\(variant)] \(run.lines.joined(separator: " | ")) \(run.stderr.suffix(2000))"
    #expect(run.signal == SIGSEGV, "\(context)")
    // The handler chained after Crumbs' asked the worker to serve, from inside the crash: it
    // never did, then or later (it prints "served" the moment it does).
    #expect(run.lines.contains("after-crash not-served"), "\(context)")
    #expect(!run.lines.contains("served"), "\(context)")
    let session = try #require(run.facts["session"], "\(context)")
    let record = try CrashRecord.read(file: directory.path + "/rings/\(session).crash")
    let table = try #require(record.threads, "\(context)")
    #expect(table.threadsKeptForChain && !table.threadsEnded, "flags \(table.flags): \(context)")
    let worker = try #require(table.threads.first { $0.name == "late-worker" }, "\(context)")
    #expect(worker.state == .captured, "\(context)")
    // That handler set SIG_DFL for the crash signals while the process died, as the backtracer
    // does, and took a second doing so: not a replaced handler, in the record or in the client's
    // checks (the memory monitor's, every 100 ms, on a thread that stays parked).
    #expect(record.replacedSignals.isEmpty, "\(record.replacedSignals): \(context)")
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    #expect(!outcome.problems.contains { $0.contains("replaced") }, "\(outcome.problems)")
    if variant.backtracer {
      // The backtracer, chained after that handler, still sees the parked worker.
      let output = run.lines.joined(separator: "\n") + run.stderr
      #expect(output.contains("late-worker"), "\(context)")
    }
  }
}
