// CLIProcess.swift — the built `crumbs` command line as a child process, for the tests that
// use it the way a person does.

import CrumbsPlatform
import Foundation

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package enum CLIProcess {
  package struct Result {
    package var status: Int32
    package var stdout: String
    package var stderr: String
    package var stdoutLines: [String] {
      stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
    package var stderrLines: [String] {
      stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    package init(_ output: ProcessOutput) {
      status = output.exitStatus ?? output.terminatingSignal.map { 128 + $0 } ?? -1
      stdout = String(decoding: output.standardOutput, as: UTF8.self)
      stderr = String(decoding: output.standardError, as: UTF8.self)
    }
  }

  /// The `crumbs` product, in the same bin directory as the test bundle.
  package static var executable: String { ChildProcess.productsDirectory + "/crumbs" }

  /// Starts `crumbs arguments` with stdout and stderr on pipes.
  package static func start(_ arguments: [String]) throws -> Subprocess {
    try Subprocess(executable, arguments, standardOutput: .pipe, standardError: .pipe)
  }

  /// Runs `crumbs arguments` to completion (killed after `timeoutSeconds`); `status` is the
  /// shell's (exit code, or 128 + signal). `environment` entries are added to (or replace) ours.
  package static func run(
    _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 60
  ) throws -> Result {
    Result(
      try Subprocess.run(
        executable, arguments, environment: environment, timeoutMilliseconds: Int(timeoutSeconds * 1000)))
  }

  /// Runs `crumbs arguments` like `run`, through Tests/Tools/peak_rss.py, and also returns its
  /// peak resident set size in bytes (see that script for why the test process cannot ask the
  /// kernel itself).
  package static func runMeasuringPeakRSS(_ arguments: [String], timeoutSeconds: Double = 60) throws -> (
    Result, peakResidentBytes: Int?
  ) {
    let directory = TestDirectory()
    let result = Result(
      try Subprocess.run(
        "/usr/bin/env", ["python3", testTool("peak_rss.py"), directory.file("peak"), executable] + arguments,
        timeoutMilliseconds: Int(timeoutSeconds * 1000)))
    let peak = (try? Syscall.readFile(directory.file("peak"), limit: 64)).flatMap {
      Int(String(decoding: $0, as: UTF8.self))
    }
    return (result, peak)
  }
}
