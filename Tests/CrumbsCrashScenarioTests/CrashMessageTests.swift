// CrashMessageTests.swift — what was said before the signal reaches the report (issue 12 item 1).
//
// A real child crashes (debug and release build, Swift backtracer on and off); the next launch
// (this test) builds the report. The Swift runtime's own fatal-error message, with the file:line
// it carries, must be the exception message; an uncaught C++ exception must read "uncaught C++
// exception TYPE: what"; the signal stays the exception type and in `signal`. Release builds
// keep only fatalError's message (the runtime is not called for the other traps there): those
// keep the trap hint.

import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

struct MessageExpectation: CustomStringConvertible, Sendable {
  var scenario: String
  var environment: [String: String] = [:]
  var signal: Int32
  /// Texts the message must contain in a debug build.
  var debug: [String]
  /// In a release build; nil: the runtime says nothing there, the trap hint remains.
  var release: [String]?
  var description: String { scenario + (environment["CRUMBS_TEST_CXX_KIND"].map { " kind \($0)" } ?? "") }
}

let messageExpectations: [MessageExpectation] = [
  .init(
    scenario: "fatal-error", signal: swiftTrapSignal,
    debug: ["CrashScenarios.swift:", ": Fatal error: crash scenario: fatalError"],
    release: ["CrashScenarios.swift:", ": Fatal error: crash scenario: fatalError"]),
  .init(
    scenario: "precondition", signal: swiftTrapSignal,
    debug: ["CrashScenarios.swift:", ": Precondition failed: crash scenario"], release: nil),
  .init(
    scenario: "force-unwrap", signal: swiftTrapSignal,
    debug: [
      "CrashScenarios.swift:", ": Fatal error: Unexpectedly found nil while unwrapping an Optional value",
    ],
    release: nil),
  .init(
    scenario: "bounds", signal: swiftTrapSignal,
    debug: ["ContiguousArrayBuffer.swift:", ": Fatal error: Index out of range"], release: nil),
  .init(
    scenario: "cxx-exception", signal: SIGABRT,
    debug: ["uncaught C++ exception crumbs_test::Failure: crash scenario: C++ exception"],
    release: ["uncaught C++ exception crumbs_test::Failure: crash scenario: C++ exception"]),
  .init(
    scenario: "cxx-exception", environment: ["CRUMBS_TEST_CXX_KIND": "1"], signal: SIGABRT,
    debug: ["uncaught C++ exception int"], release: ["uncaught C++ exception int"]),
]

@Suite("Crash messages")
struct CrashMessageTests {
  @Test(
    "the runtime's message or the uncaught C++ exception is the report's exception message",
    arguments: messageExpectations, ChildVariant.all)
  func messageInReport(expectation: MessageExpectation, variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped \(expectation) [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario(
      expectation.scenario, variant: variant, directory: directory, environment: expectation.environment)
    let context = "\(expectation) [\(variant)]: \(run.lines.joined(separator: " | "))"
    #expect(run.signal == expectation.signal, "\(context)")

    let report = try #require(try crashReport(leftIn: directory)?.report, "\(context)")
    // The signal stays: as the exception type and in `signal`.
    #expect(report.exceptionType == SignalNames.name(expectation.signal), "\(context)")
    #expect(report.signal?.number == expectation.signal, "\(context)")

    let message = report.exceptionMessage
    if let expected = variant.release ? expectation.release : expectation.debug {
      for text in expected { #expect(message.contains(text), "\(message) lacks \(text): \(context)") }
      if expectation.signal == SIGABRT {
        #expect(message == expected[0], "\(context)")
      } else {
        // Exactly the runtime's own line (without its newline), as it printed it on stderr.
        #expect(!message.hasSuffix("\n") && !message.contains("Swift runtime trap"), "\(message)")
        if !variant.backtracer { #expect(run.stderr.contains(message), "\(message) vs \(run.stderr)") }
      }
    } else {
      #expect(message.contains("a Swift runtime trap"), "\(message): \(context)")
    }
  }
}
