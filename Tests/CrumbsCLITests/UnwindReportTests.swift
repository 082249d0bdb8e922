// UnwindReportTests.swift — issue 12 items 3 and 5, end to end: real children crash inside libc
// (glibc's heap check, abort after clock_gettime), in code without unwind information, and
// inside an async call chain; the next launch's report must name the app's callers, never a
// stale frame, and say how each frame was found in the record, the report JSON and the printed
// report. (The wire formats: CrumbsDeliveryTests' UnwindMarksDeliveryTests.)

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

private let variants = [
  ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
]

private func baseName(_ path: String?) -> String { path.map { Syscall.baseName(of: $0) } ?? "?" }

/// Runs `scenario`, expects death by `signal`, and returns the report the next launch made.
private func reportOfCrash(_ scenario: String, _ variant: ChildVariant, signal: Int32) throws -> StoredReport
{
  let directory = TestDirectory()
  let run = try runCrashScenario(scenario, variant: variant, directory: directory)
  #expect(run.signal == signal, "\(scenario) [\(variant)]: \(run.lines)")
  return try #require(try crashReport(leftIn: directory), "\(scenario) [\(variant)]: \(run.lines)")
}

@Suite("Unwinding through libc, unwind-less code and async frames")
struct UnwindReportTests {
  @Test("glibc's heap-corruption abort keeps the app's C function and its Swift caller", arguments: variants)
  func heapCorruptionAbort(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario("heap-corruption", variant: variant, directory: directory)
    #expect(run.signal == SIGABRT, "\(run.lines)")
    #expect(run.stderr.contains("free(): invalid next size"), "\(run.stderr)")
    let stored = try #require(try crashReport(leftIn: directory), "\(run.lines)")
    let frames = stored.report.frames
    let names = frames.map { $0.function ?? "?" }
    let c = try #require(names.firstIndex { $0.hasPrefix("crumbs_test_corrupt_heap_then_free") }, "\(names)")
    // libc's frames first (raise, abort, the malloc error path, free), then ours.
    #expect(c >= 4, "\(names)")
    #expect(frames[..<c].allSatisfy { baseName($0.module) == "libc.so.6" }, "\(names)")
    #expect(names[c + 1].contains("LibcAbortWorkload.releaseBuffer"), "\(names)")
    #expect(!frames.contains { $0.guessed }, "\(stored.report.exceptionStacktrace)")
  }

  @Test("abort after clock_gettime: the exact frames, never the stale clock_gettime", arguments: variants)
  func noStaleFrameAfterClockGettime(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    var sequences: [[String]] = []
    for attempt in 0..<8 {
      let stored = try reportOfCrash("clock-abort", variant, signal: SIGABRT)
      let frames = stored.report.frames
      let names = frames.map { $0.function ?? "?" }
      let c = try #require(names.firstIndex { $0.hasPrefix("crumbs_test_clock_then_abort") }, "\(names)")
      #expect(!names.contains { $0.contains("clock_gettime") }, "attempt \(attempt): \(names)")
      #expect(!frames.contains { $0.guessed }, "attempt \(attempt): \(stored.report.exceptionStacktrace)")
      #expect(c >= 2 && names[c - 1] == "abort", "attempt \(attempt): \(names)")
      #expect(frames[..<c].allSatisfy { baseName($0.module) == "libc.so.6" }, "\(names)")
      #expect(names[c + 1].contains("LibcAbortWorkload.stampAndGiveUp"), "attempt \(attempt): \(names)")
      // Up to the Swift caller, the same frames every time (module + offset).
      sequences.append(frames[...(c + 1)].map { baseName($0.module) + "+" + ($0.moduleOffset ?? "?") })
    }
    #expect(Set(sequences).count == 1, "\(sequences)")
  }

  #if arch(x86_64)
    @Test("a frame found by the stack scan is marked guessed in the record, the JSON and the printed report")
    func guessedFramesAreMarked() throws {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        "no-unwind-info", variant: ChildVariant(release: false, backtracer: false), directory: directory)
      #expect(run.signal == SIGSEGV, "\(run.lines)")
      let record = try CrashRecord.read(file: try #require(run.recordPath))
      #expect(record.frameMarks.count == record.frames.count)
      #expect(record.frameMarks.first == [])
      #expect(record.frameMarks.dropFirst().first == .guessed, "\(record.frameMarks)")
      #expect(record.stackScanned)

      let stored = try #require(try crashReport(leftIn: directory))
      let frames = stored.report.frames
      let guessed = try #require(frames.first { $0.guessed }, "\(stored.report.exceptionStacktrace)")
      #expect(guessed.function?.hasPrefix("crumbs_test_crash_without_unwind_info") == true, "\(guessed)")
      // The stale return addresses the scan crossed (direct calls that cannot reach code outside
      // every module) are not frames.
      #expect(frames[1].function?.hasPrefix("crumbs_test_crash_without_unwind_info") == true, "\(frames[1])")
      #expect(!frames.contains { $0.function?.hasPrefix("crumbs_test_leave_return_addresses") == true })
      #expect(frames.contains { $0.function?.contains("LibcAbortWorkload.runUnwindableCode") == true })
      // Unmarked frames stay unmarked: frame 0 and the frame-record frames.
      #expect(frames[0].foundBy == nil)

      // report.json on disk.
      let json = try #require(
        try JSONSerialization.jsonObject(with: Data(try Syscall.readFile(stored.reportPath)))
          as? [String: Any])
      let jsonFrames = try #require(json["frames"] as? [[String: Any]])
      #expect(jsonFrames[1]["foundBy"] as? String == "guessed", "\(jsonFrames[1])")
      #expect(jsonFrames[0]["foundBy"] == nil)

      // The printed report.
      let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", directory.path])
      #expect(shown.status == 0, "\(shown.stderr)")
      let trace = shown.stdoutLines.filter { $0.hasPrefix("  #") }
      #expect(
        trace.contains { $0.contains("crumbs_test_crash_without_unwind_info") && $0.hasSuffix("{guessed}") },
        "\(trace)")
      #expect(!(trace.first ?? "").contains("{"), "\(trace)")
    }
  #endif

  #if arch(x86_64)
    @Test(
      "a fault inside a signal handler unwinds through the signal frame to the interrupted code",
      arguments: variants)
    func throughSignalFrame(variant: ChildVariant) throws {
      guard variant.executable != nil else { return }
      let stored = try reportOfCrash("fault-in-signal-handler", variant, signal: SIGSEGV)
      let frames = stored.report.frames
      let names = frames.map { $0.function ?? "?" }
      let handler = try #require(
        names.firstIndex { $0.hasPrefix("crumbs_test_faulting_signal_handler") }, "\(names)")
      let raiser = try #require(
        names.firstIndex { $0.hasPrefix("crumbs_test_fault_in_signal_handler") }, "\(names)")
      // Between them: glibc's signal trampoline, then the interrupted raise() (libc frames).
      #expect(raiser - handler >= 3, "\(names)")
      #expect(frames[(handler + 1)..<raiser].allSatisfy { baseName($0.module) == "libc.so.6" }, "\(names)")
      #expect(names[raiser + 1].contains("LibcAbortWorkload.interruptedBySignal"), "\(names)")
      #expect(!frames.contains { $0.guessed }, "\(stored.report.exceptionStacktrace)")
    }
  #endif

  @Test(
    "a crash in an async function after a suspension shows its async callers, marked", arguments: variants)
  func asyncCallers(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario("async-crash", variant: variant, directory: directory)
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.frameMarks.contains { $0.contains(.async) }, "\(record.frameMarks)")
    let stored = try #require(try crashReport(leftIn: directory), "\(run.lines)")
    let frames = stored.report.frames
    let names = frames.map { $0.function ?? "?" }
    let middle = try #require(names.firstIndex { $0.contains("AsyncWorkload.middle") }, "\(names)")
    #expect(frames[middle].foundBy != .async && frames[middle].foundBy != .guessed)
    let outer = try #require(names.firstIndex { $0.contains("AsyncWorkload.outer") }, "\(names)")
    #expect(outer > middle)
    #expect(frames[outer].foundBy == .async, "\(stored.report.exceptionStacktrace)")
    #expect(stored.report.exceptionStacktrace.contains("{async}"))
    #expect(stored.report.evidence.contains { $0.contains("async context chain") })
  }
}
