import Crumbs
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// Issue 4, end to end: a real child crashes through named Swift functions; the next launch
/// (this test) turns what it left into a stored report, which must name the signal, the Swift
/// function that trapped and its callers, the crashing thread and its last breadcrumb, with the
/// trail attached as LZ4 the `lz4` CLI reads.
struct ReportExpectation: CustomStringConvertible, Sendable {
  var kind: CrashKind
  var signal: Int32
  /// Functions that must appear in the stack trace, innermost first.
  var functions: [String]
  var onMainThread = true
  var description: String { kind.rawValue }
}

let callers = ["ReportWorkload.charge", "ReportWorkload.pay", "ReportWorkload.checkout"]
let trapper = "generateTestCrash(kind:"

let reportExpectations: [ReportExpectation] = [
  .init(
    kind: .nullDereference, signal: SIGSEGV, functions: ["TestCrash.writeThroughNull", trapper] + callers),
  .init(kind: .fatalError, signal: swiftTrapSignal, functions: [trapper] + callers),
  .init(kind: .precondition, signal: swiftTrapSignal, functions: [trapper] + callers),
  .init(kind: .forceUnwrap, signal: swiftTrapSignal, functions: [trapper] + callers),
  .init(kind: .bounds, signal: swiftTrapSignal, functions: [trapper] + callers),
  .init(kind: .overflow, signal: swiftTrapSignal, functions: [trapper] + callers),
  .init(kind: .divideByZero, signal: swiftTrapSignal, functions: [trapper] + callers),
  .init(kind: .abort, signal: SIGABRT, functions: [trapper] + callers),
  .init(kind: .stackOverflow, signal: SIGSEGV, functions: ["TestCrash.recurse"]),
  .init(kind: .threadSegv, signal: SIGSEGV, functions: ["TestCrash.writeThroughNull"], onMainThread: false),
]

@Suite("Crash reports, end to end")
struct ReportEndToEndTests {
  @Test(
    "a crashing child becomes one stored report with its stack and trail",
    arguments: reportExpectations,
    [ChildVariant(release: false, backtracer: true), ChildVariant(release: true, backtracer: false)])
  func crashBecomesReport(expectation: ReportExpectation, variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped \(expectation.kind) [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "report-crash", variant: variant, directory: directory,
      environment: ["CRUMBS_TEST_CRASH_KIND": expectation.kind.rawValue])
    #expect(run.status & 0x7f == expectation.signal, "\(expectation) [\(variant)]: \(run.lines)")

    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    #expect(outcome.problems.isEmpty)
    #expect(outcome.hasCrashedInLastSession)
    let stored = try #require(outcome.reports.first, "\(expectation) [\(variant)]")
    let report = stored.report
    #expect(outcome.reports.count == 1)
    #expect(report.kind == .crash)
    #expect(report.exceptionType == SignalNames.name(expectation.signal))
    #expect(!report.exceptionMessage.isEmpty)

    // The Swift function that trapped and its callers, demangled, in order.
    let trace = report.exceptionStacktrace
    var searchFrom = trace.startIndex
    for function in expectation.functions {
      let found = trace.range(of: function, range: searchFrom..<trace.endIndex)
      #expect(found != nil, "\(expectation) [\(variant)]: \(function) missing (or out of order) in\n\(trace)")
      if let found { searchFrom = found.upperBound }
    }
    #expect(report.frames.count >= expectation.functions.count)
    #expect(!report.registers.isEmpty)
    #expect(report.modules.contains { !$0.buildID.isEmpty })

    // The crashing thread.
    let mainThread = try #require(run.facts["thread"].flatMap(Int.init))
    if expectation.onMainThread {
      #expect(report.threadID == mainThread)
    } else {
      #expect(report.threadID != nil && report.threadID != mainThread)
    }

    // Its last breadcrumb before the crash, and the trail as the lz4 CLI reads it.
    #expect(report.breadcrumbs.lastMessage == "charging card" || !expectation.onMainThread)
    let attachment = try #require(report.breadcrumbs.attachment)
    let lines = try runLZ4Decompress(stored.attachmentPath(attachment)).split(separator: "\n")
    #expect(lines.count == report.breadcrumbs.count)
    let messages = try lines.map { line in
      try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["message"]
        as? String
    }
    #expect(messages.contains("step 1"))
    #expect(messages.contains(run.facts["last-breadcrumb"]))
    #expect(messages.contains { $0?.hasPrefix(SignalNames.name(expectation.signal)) == true })
  }

  @Test func aCorruptCrashRecordStillGivesAReportThatNamesTheDamage() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "report-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_CRASH_KIND": "null-deref"])
    let recordPath = try #require(run.facts["record"])
    // Damage the record's magic: it is no longer a crash record.
    var bytes = try Syscall.readFile(recordPath)
    bytes[0] ^= 0xFF
    try Syscall.writeFileAtomically(recordPath, bytes)
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run()
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.kind == .crash)
    #expect(report.damage.contains { $0.hasPrefix("crash record unreadable") })
    #expect(report.breadcrumbs.count > 0)
    // The damaged record was moved aside with its reason, not deleted.
    #expect(outcome.quarantined.count == 1)
    #expect(Syscall.fileExists(try #require(outcome.quarantined.first).quarantinedPath))
  }
}
