// SourceContextTests.swift — issue 41 (point 2): a real crash's report carries, for each of the
// app's frames, its file and line and the lines of source around it, read from the test child's
// own source file and redacted; a binary without DWARF still gives its report, saying why it
// has no lines. The expected lines are the test child's source, read here (its `// line-of:`
// markers), never numbers written in this file.

import Crumbs
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Frames: lines of source around the app's frames")
struct SourceContextTests {
  @Test(
    "each app frame of a real crash carries its file, line and source lines, redacted",
    arguments: [
      ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
    ])
  func sourceLinesAroundAppFrames(variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    guard LLVMSymbolizer.onPath("llvm-symbolizer") ?? LLVMSymbolizer.besideSwift() != nil else {
      print("skipped [\(variant)]: no llvm-symbolizer on PATH nor beside swift: no lines to show")
      return
    }
    let marks = try markedLines(in: inlinedScenarioSource)
    let source = try String(contentsOfFile: inlinedScenarioSource, encoding: .utf8)
      .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let secretLine = try #require(marks["a secret"])
    #expect(source[secretLine - 1].contains("hunter2"), "the child's source holds the secret")

    let directory = TestDirectory()
    let run = try runCrashScenario("report-inlined-crash", variant: variant, directory: directory)
    #expect(run.status & 0x7f == SIGSEGV, "[\(variant)] \(run.lines)")
    let stored = try #require(try crashReport(leftIn: directory), "[\(variant)]")
    let frames = try storedFrames(ofReportAt: stored.reportPath)
    let trace = stored.report.exceptionStacktrace
    func first(_ name: String, inlinedToo: Bool = false) throws -> StoredFrame {
      try #require(
        frames.first { $0.function?.contains(name) == true && (inlinedToo || !$0.inlined) },
        "[\(variant)] \(name)\n\(trace)")
    }
    let store = try first("InlinedWorkload.store", inlinedToo: true)
    let record = try first("InlinedWorkload.record")
    let enter = try first("InlinedWorkload.enter")
    if variant.release { #expect(store.inlined, "[\(variant)] a release build inlines it:\n\(trace)") }

    for (frame, mark) in [
      (store, "store faults"), (record, "record calls store"), (enter, "enter calls record"),
    ] {
      let line = try #require(marks[mark])
      #expect(frame.file?.hasSuffix("/Tests/CrumbsTestChild/ReportScenarios.swift") == true, "\(frame)")
      #expect(frame.line == line, "[\(variant)] \(frame)")
      let lines = try #require(frame.source, "[\(variant)] no source lines: \(frame)")
      #expect(lines.origin == "file")
      let start = try #require(lines.startLine)
      let text = try #require(lines.lines)
      // Three lines each side (fewer only at a file's ends), the frame's own as the file has it.
      #expect(start == line - 3 && text.count == 7, "[\(variant)] \(frame): \(start) + \(text.count)")
      #expect(text[line - start] == source[line - 1], "[\(variant)] \(frame)")
    }
    // The secret two lines above the fault: in the frame's lines, redacted as a message is.
    let storeLines = try #require(store.source?.lines)
    let storeStart = try #require(store.source?.startLine)
    #expect(storeLines[secretLine - storeStart].contains("password: [redacted]"), "\(storeLines)")
    let raw = String(decoding: try Syscall.readFile(stored.reportPath), as: UTF8.self)
    #expect(!raw.contains("hunter2"), "[\(variant)] a secret of the source reached report.json")

    // `crumbs reports show` prints them under the frame, its own line marked.
    let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
    #expect(shown.status == 0, "\(shown.stderr)")
    let storeLine = try #require(marks["store faults"])
    let marked = shown.stdoutLines.filter { $0.contains("> \(storeLine) | ") }
    #expect(!marked.isEmpty, "[\(variant)]\n\(shown.stdout)")
    #expect(!shown.stdout.contains("hunter2"))
  }

  @Test("reports show --symbolicate and crumbs symbolicate add the lines to a report that has none")
  func symbolicateAddsSourceLines() throws {
    guard LLVMSymbolizer.onPath("llvm-symbolizer") ?? LLVMSymbolizer.besideSwift() != nil else {
      print("skipped: no llvm-symbolizer on PATH nor beside swift: no lines to show")
      return
    }
    let marks = try markedLines(in: inlinedScenarioSource)
    let storeLine = try #require(marks["store faults"])
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "report-inlined-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.status & 0x7f == SIGSEGV, "\(run.lines)")
    // Made without source lines (as a report from before, or from a machine without the source).
    var processor = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path))
    processor.symbolicatorOptions.sourceContext = nil
    let stored = try #require(processor.run(reportingSession: SessionID()).reports.first)
    #expect(!stored.report.frames.contains { $0.source != nil })
    let before = try Syscall.readFile(stored.reportPath)

    let plain = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
    #expect(!plain.stdoutLines.contains { $0.contains("> \(storeLine) | ") }, "\(plain.stdout)")
    // Shown with them, the stored report unchanged.
    let shown = try CLIProcess.run([
      "reports", "show", stored.report.id, "--dir", directory.path, "--symbolicate",
    ])
    #expect(shown.status == 0, "\(shown.stderr)")
    #expect(shown.stdoutLines.contains { $0.contains("> \(storeLine) | ") }, "\(shown.stdout)")
    #expect(!shown.stdout.contains("hunter2"))
    #expect(try Syscall.readFile(stored.reportPath) == before)
    // Rewritten with them, redacted.
    let symbolicated = try CLIProcess.run(["symbolicate", stored.report.id, "--dir", directory.path])
    #expect(symbolicated.status == 0, "\(symbolicated.stderr)")
    let frames = try storedFrames(ofReportAt: stored.reportPath)
    let store = try #require(frames.first { $0.function?.contains("InlinedWorkload.store") == true })
    #expect(store.line == storeLine && store.source?.lines?.isEmpty == false, "\(store)")
    #expect(!String(decoding: try Syscall.readFile(stored.reportPath), as: UTF8.self).contains("hunter2"))
  }

  @Test("a binary without DWARF still gives its report, its frames named, saying why they have no line")
  func withoutDebugInfo() throws {
    let scratch = TestDirectory()
    let child = scratch.file("CrumbsTestChild-nodebug")
    // objcopy writes the copy, not this process: a descriptor this process held open on it for
    // writing could be inherited by a child another test spawns meanwhile, and while that child
    // lives the copy cannot be executed (posix_spawn: ETXTBSY, "Text file busy").
    let stripped = try Subprocess.run(
      "/usr/bin/env", ["objcopy", "--strip-debug", ChildProcess.testChild, child],
      timeoutMilliseconds: 120_000)
    try #require(
      stripped.exitStatus == 0, "objcopy: \(String(decoding: stripped.standardError, as: UTF8.self))")

    let directory = TestDirectory()
    let process = try Subprocess(
      child, ["report-inlined-crash", directory.path], environment: ["SWIFT_BACKTRACE": "enable=no"],
      standardError: .file(scratch.file("stderr.txt")))
    _ = process.readLines(until: "crashing", seconds: 60)
    let status = process.wait(seconds: 120)
    #expect(status & 0x7f == SIGSEGV)
    let stored = try #require(try crashReport(leftIn: directory))
    let frames = try storedFrames(ofReportAt: stored.reportPath)
    let app = frames.filter { $0.module.map { Syscall.baseName(of: $0) } == "CrumbsTestChild-nodebug" }
    let named = app.filter { $0.function?.contains("InlinedWorkload") == true }
    #expect(named.count >= 2, "\(stored.report.exceptionStacktrace)")
    for frame in app {
      #expect(frame.line == nil && frame.file == nil && frame.source == nil, "\(frame)")
      #expect(
        frame.note?.contains("no line info: the executable has no DWARF") == true,
        "\(frame): \(frame.note ?? "")")
    }
  }
}

/// What source lines cost the next launch: one crashed session of the test child, copied,
/// processed alternately with file and line only and with source lines too (the default).
/// Prints the medians; asserts only that both made a report and that only the second has
/// source lines (timing on a shared CI box is not a pass/fail).
@Suite("Frames: what source lines cost the next launch")
struct SourceContextCostTests {
  @Test(arguments: [
    ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
  ])
  func reportBuildingTime(variant: ChildVariant) throws {
    guard variant.executable != nil, oracleSymbolizer() != nil else {
      print("skipped [\(variant)]: needs CRUMBS_RELEASE_CHILD and llvm-symbolizer")
      return
    }
    let crashed = TestDirectory()
    let run = try runCrashScenario("report-inlined-crash", variant: variant, directory: crashed)
    #expect(run.status & 0x7f == SIGSEGV)
    try FileManager.default.removeItem(atPath: crashed.file("stderr.txt"))
    let rounds = 7
    var times: [Bool: [Double]] = [false: [], true: []]
    var sizes: [Bool: Int] = [:]
    for _ in 0..<rounds {
      for source in [false, true] {
        let copy = TestDirectory()
        try FileManager.default.removeItem(atPath: copy.path)
        try FileManager.default.copyItem(atPath: crashed.path, toPath: copy.path)
        var processor = PostMortemProcessor(
          directory: try RingDirectory(path: copy.path), store: try ReportStore(directory: copy.path))
        if !source { processor.symbolicatorOptions.sourceContext = nil }
        let start = Subprocess.now()
        let outcome = processor.run(reportingSession: SessionID())
        times[source, default: []].append((Subprocess.now() - start) * 1000)
        let stored = try #require(outcome.reports.first, "[\(variant)] source \(source)")
        #expect(stored.report.frames.contains { $0.source != nil } == source, "[\(variant)] source \(source)")
        sizes[source] = try Syscall.readFile(stored.reportPath).count
      }
    }
    func median(_ values: [Double]) -> String {
      let sorted = values.sorted()
      return String(format: "%.1f ms", sorted[sorted.count / 2])
    }
    print(
      "report building [\(variant)], \(rounds) rounds alternated: file and line \(median(times[false]!)), "
        + "with source lines \(median(times[true]!)); report.json \(sizes[false] ?? 0) → \(sizes[true] ?? 0) bytes"
    )
  }
}
