// TerminationMessageTests.swift — issue 24 (c): a child started with `terminationMessagePath`
// crashes, and the file holds the one line its crash handler wrote: the signal, the crashing
// function of the app (not Crumbs' own frames above it), module + offset, and the id of the
// report the next launch makes; nothing is written without a path.

import Crumbs
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsSignalPath
import CrumbsSignalPathTesting
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

private let appFunction = "CrumbsTestChild.TerminationWorkload.parseInvoice"
/// What another tool wrote first (an entrypoint script): it must stay whole.
private let earlierText = "entrypoint: starting\n"

/// How a `termination-crash` child ended, and the termination message file's text after it.
private struct MessageRun {
  var signal: Int32?
  var lines: [String]
  var problems: String?
  var text: String
}

/// Runs `termination-crash` with a termination message file holding `earlierText`. `executable`
/// runs that file instead of the variant's (a stripped copy), with the backtracer off.
private func crashWithMessage(
  kind: CrashKind, variant: ChildVariant, directory: TestDirectory, executable: String? = nil
) throws -> MessageRun {
  let path = directory.file("termination-log")
  try Syscall.writeFileAtomically(path, Array(earlierText.utf8))
  let environment = ["CRUMBS_TEST_TERMINATION_PATH": path, "CRUMBS_TEST_CRASH_KIND": kind.rawValue]
  var result = MessageRun(signal: nil, lines: [], problems: nil, text: "")
  if let executable {
    let child = try Subprocess(
      executable, ["termination-crash", directory.path],
      environment: environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { _, new in new },
      standardError: .file(directory.file("stderr.txt")))
    result.lines = child.readLines(until: "crashing", seconds: 60)
    let status = child.wait(seconds: 120)
    result.signal = status & 0x7f != 0 && status & 0x7f != 0x7f ? status & 0x7f : nil
  } else {
    let run = try runCrashScenario(
      "termination-crash", variant: variant, directory: directory, environment: environment)
    result.signal = run.signal
    result.lines = run.lines + [run.stderr]
  }
  result.problems = result.lines.first { $0.hasPrefix("problems ") }.map { String($0.dropFirst(9)) }
  result.text = String(decoding: try Syscall.readFile(path), as: UTF8.self)
  return result
}

/// The line after `earlierText`, checked to be exactly one, "\n"-terminated, within the bound.
private func onlyLine(_ text: String, _ context: String) throws -> String {
  #expect(
    text.hasPrefix(earlierText), "\(context): the earlier text was overwritten: \(text.debugDescription)")
  let added = String(text.dropFirst(earlierText.count))
  #expect(added.hasSuffix("\n"), "\(context): \(added.debugDescription)")
  #expect(added.utf8.count <= TerminationMessage.maxLineBytes)
  let lines = added.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
  try #require(lines.count == 1, "\(context): \(added.debugDescription)")
  return String(lines[0])
}

@Suite("Termination message (issue 24 c)")
struct TerminationMessageTests {
  static let variants = [
    ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: true),
  ]

  @Test(
    "a crash leaves one line with the signal, the app's function and the report id", arguments: variants)
  func aCrashWritesOneLine(variant: ChildVariant) throws {
    guard let executable = variant.executable else {
      print("skipped [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try crashWithMessage(kind: .nullDereference, variant: variant, directory: directory)
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    #expect(run.problems == "none")
    let line = try onlyLine(run.text, "\(variant)")
    let module = Syscall.baseName(of: executable)
    #expect(line.hasPrefix("Crumbs: SIGSEGV in \(appFunction) (\(module)+0x"), "\(line)")
    let report = try #require(try crashReport(leftIn: directory)).report
    #expect(line.contains("; report \(report.id)"), "\(line) vs \(report.id)")

    // The offset is a return address in that function, as the file sees it.
    let offsetText = try #require(line.split(separator: "+0x").dropFirst().first?.prefix { $0.isHexDigit })
    let offset = try #require(UInt64(offsetText, radix: 16))
    var name = [CChar](repeating: 0, count: 256)
    var start: UInt64 = 0
    #expect(crumbs_elf_symbol_testing_lookup_file(executable, offset - 1, &name, name.count, &start) == 1)
    let symbol = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    #expect(symbol.contains("TerminationWorkload"), "\(symbol)")
  }

  @Test("a Swift trap names the signal the handler saw and the fatal message", arguments: variants)
  func aFatalErrorWritesItsMessage(variant: ChildVariant) throws {
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try crashWithMessage(kind: .fatalError, variant: variant, directory: directory)
    #expect(run.signal == swiftTrapSignal, "\(run.lines)")
    let line = try onlyLine(run.text, "\(variant)")
    #expect(line.hasPrefix("Crumbs: \(SignalNames.name(swiftTrapSignal)) in \(appFunction) ("), "\(line)")
    let report = try #require(try crashReport(leftIn: directory)).report
    #expect(line.contains("; report \(report.id)"))
    // The message, when the runtime left one for the handler (the report shows what it had).
    if report.exceptionMessage.contains("generateTestCrash(kind: .fatalError)") {
      #expect(line.contains("Fatal error: generateTestCrash(kind: .fatalError)"), "\(line)")
    }
  }

  @Test func aStrippedExecutableStillGivesModuleAndOffset() throws {
    // The release child when there is one (smaller), else the debug one.
    let source = ChildVariant(release: true, backtracer: false).executable ?? ChildProcess.testChild
    let directory = TestDirectory()
    let stripped = directory.file("stripped-child")
    let strip = try Subprocess("/usr/bin/strip", ["--strip-all", "-o", stripped, source])
    try #require(strip.wait(seconds: 300) == 0, "strip failed")
    let run = try crashWithMessage(
      kind: .nullDereference, variant: ChildVariant(release: true, backtracer: false), directory: directory,
      executable: stripped)
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    let line = try onlyLine(run.text, "stripped")
    // Named only if .dynsym exports it; module + offset in any case.
    #expect(line.hasPrefix("Crumbs: SIGSEGV "), "\(line)")
    #expect(line.contains("stripped-child+0x"), "\(line)")
    let report = try #require(try crashReport(leftIn: directory)).report
    #expect(line.contains("; report \(report.id)"))
  }

  @Test func withoutAPathTheFileIsUntouched() throws {
    let directory = TestDirectory()
    let path = directory.file("termination-log")
    try Syscall.writeFileAtomically(path, Array(earlierText.utf8))
    let run = try runCrashScenario(
      "termination-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_TERMINATION_PATH": "none", "CRUMBS_TEST_CRASH_KIND": "null-deref"])
    #expect(run.signal == SIGSEGV)
    #expect(String(decoding: try Syscall.readFile(path), as: UTF8.self) == earlierText)
  }

  @Test func aFileThatCannotBeOpenedIsAProblemAndTheCrashIsStillRecorded() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "termination-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: [
        "CRUMBS_TEST_TERMINATION_PATH": directory.file("missing-folder/termination-log"),
        "CRUMBS_TEST_CRASH_KIND": "null-deref",
      ])
    #expect(run.signal == SIGSEGV)
    #expect(run.facts["problems"]?.contains("termination message") == true, "\(run.lines)")
    #expect(try crashReport(leftIn: directory) != nil)
  }
}
