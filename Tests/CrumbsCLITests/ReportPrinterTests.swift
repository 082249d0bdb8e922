// ReportPrinterTests.swift — `crumbs reports show` as a person reads it (issue 12 item 7): frame
// names the way the Swift runtime backtracer prints them while the JSON keeps the whole name,
// and breadcrumbs other threads appended after the crash marked as such. Real crashing
// children; the CLI run as a process.

import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Printed reports")
struct ReportPrinterTests {
  @Test("every thread is printed: the crashing one first and marked, the others with their top frames")
  func threadsPrinted() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "all-threads", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      // Seconds for the asked threads to answer on a busy machine (the product waits 50 ms).
      environment: ["CRUMBS_TEST_THREADS": "3", "CRUMBS_TEST_CAPTURE_DEADLINE_MS": "10000"])
    #expect(run.signal == SIGSEGV && run.facts["threads"] == "5", "\(run.lines)")
    let stored = try #require(try crashReport(leftIn: directory), "\(run.lines)")
    let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
    let lines = shown.stdoutLines
    let heading = try #require(lines.firstIndex { $0.hasPrefix("Threads") }, "\(shown.stdout)")
    #expect(lines[heading].contains("6 at crash time: 4 captured, 1 did not answer"), "\(lines[heading])")
    let crashed = "  Thread \(try #require(run.facts["thread"]))"
    #expect(
      lines[heading + 1].hasPrefix(crashed) && lines[heading + 1].contains("crashed"), "\(lines[heading + 1])"
    )
    for index in 0..<3 {
      let name = lines.firstIndex { $0.contains("\"blocker-0\(index)\"") && $0.contains("captured") }
      let at = try #require(name, "\(shown.stdout)")
      #expect(
        lines[at + 1..<min(at + 5, lines.count)].contains { $0.contains("crumbs_test_blocked_0\(index)") })
    }
    #expect(lines.contains { $0.contains("\"masked\"") && $0.contains("did not answer") })
  }

  @Test(
    "frames read as a person reads them; the JSON keeps the whole name",
    arguments: [
      ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
    ])
  func readableFrameNames(variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "report-crash", variant: variant, directory: directory,
      environment: ["CRUMBS_TEST_CRASH_KIND": "null-deref"])
    #expect(run.signal == SIGSEGV)
    let stored = try #require(try crashReport(leftIn: directory), "\(run.lines)")

    // The JSON: `function` as read, `symbol` the whole demangled name.
    let frame = try #require(
      stored.report.frames.first { $0.symbol?.contains("TestCrash.writeThroughNull") == true },
      "\(stored.report.frames.map { $0.symbol ?? "-" })")
    #expect(frame.function == "TestCrash.writeThroughNull()", "\(frame)")
    let symbol = try #require(frame.symbol)
    #expect(symbol.contains("static Crumbs.TestCrash.writeThroughNull() -> Swift.Never"), "\(symbol)")
    if variant.release {
      // Release builds specialize it: the whole name says so, the readable one does not.
      #expect(symbol.hasPrefix("function signature specialization"), "\(symbol)")
    }
    let callers = stored.report.frames.compactMap(\.function)
    #expect(callers.contains("ReportWorkload.charge(_:)"), "\(callers)")
    #expect(callers.contains { $0.hasPrefix("generateTestCrash(kind:)") }, "\(callers)")

    // The printed report: the readable names, none of the compiler's words.
    let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
    #expect(shown.status == 0, "\(shown.stderr)")
    let trace = shown.stdoutLines.filter { $0.hasPrefix("  #") }
    #expect(trace.contains { $0.contains("  TestCrash.writeThroughNull() + ") }, "\(trace)")
    #expect(trace.contains { $0.contains("  ReportWorkload.charge(_:) + ") }, "\(trace)")
    // Names only: the lines of source under a frame (`  > 70 | static func …`, issue 41) are
    // the app's code as written, words and all.
    let names = shown.stdoutLines.filter { line in
      let body = line.drop { $0 == " " || $0 == ">" }
      let number = body.prefix { $0.isNumber }
      return number.isEmpty || !body.dropFirst(number.count).hasPrefix(" | ")
    }.joined(separator: "\n")
    #expect(names.count < shown.stdout.count, "source lines under the app's frames:\n\(shown.stdout)")
    for word in ["specialization", "Crumbs.TestCrash", "-> Swift.Never", "static "] {
      #expect(!names.contains(word), "\(word) in\n\(names)")
    }

    let json = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path, "--json"])
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
    let frames = try #require(object["frames"] as? [[String: Any]])
    #expect(
      frames.contains {
        $0["function"] as? String == "TestCrash.writeThroughNull()" && $0["symbol"] as? String == symbol
      })
  }

  @Test("breadcrumbs appended by a thread the crash could not park are marked after the crash")
  func breadcrumbsAfterTheCrash() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "append-after-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGABRT, "\(run.lines)")
    let stored = try #require(try crashReport(leftIn: directory), "\(run.lines)")

    let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
    #expect(shown.status == 0, "\(shown.stderr)")
    let lines = shown.stdoutLines
    let marker = "[after the crash]"
    let after = try #require(lines.first { $0.contains("appended after the crash") }, "\(shown.stdout)")
    #expect(after.hasSuffix(marker), "\(after)")
    let fatal = try #require(
      lines.first { $0.contains(" fatal ") && $0.contains("SIGABRT") }, "\(shown.stdout)")
    #expect(!fatal.contains(marker), "the crash handler's own breadcrumb is the crash: \(fatal)")
    let before = try #require(lines.first { $0.contains("about to crash: append-after-crash") })
    #expect(!before.contains(marker), "\(before)")
    #expect(lines.filter { $0.contains(marker) }.count == 1, "\(shown.stdout)")
    // Each breadcrumb names the thread that wrote it: the crash handler's is the crashing
    // thread's, the late one another thread's.
    let crashing = "[\(try #require(stored.report.threadID))] "
    #expect(fatal.contains(crashing), "\(fatal)")
    #expect(after.contains("] appended after the crash") && !after.contains(crashing), "\(after)")
    // In trail order: before, the crash, after.
    let order = [before, fatal, after].compactMap { lines.firstIndex(of: $0) }
    #expect(order == order.sorted() && order.count == 3, "\(shown.stdout)")
  }
}
