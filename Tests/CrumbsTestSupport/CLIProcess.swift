// CLIProcess.swift — the built `crumbs` command line as a child process, for the tests that
// use it the way a person does.

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
  }

  /// The `crumbs` product, in the same bin directory as the test bundle.
  package static var executable: String { ChildProcess.productsDirectory + "/crumbs" }

  /// Starts `crumbs arguments` with stdout and stderr on pipes.
  package static func start(_ arguments: [String]) throws -> Subprocess {
    try Subprocess(executable, arguments, standardOutput: .pipe, standardError: .pipe)
  }

  /// Runs `crumbs arguments` to completion (killed after `timeoutSeconds`); `status` is the
  /// shell's (exit code, or 128 + signal).
  package static func run(_ arguments: [String], timeoutSeconds: Double = 60) throws -> Result {
    let output = try Subprocess.run(executable, arguments, timeoutMilliseconds: Int(timeoutSeconds * 1000))
    return Result(
      status: output.exitStatus ?? output.terminatingSignal.map { 128 + $0 } ?? -1,
      stdout: String(decoding: output.standardOutput, as: UTF8.self),
      stderr: String(decoding: output.standardError, as: UTF8.self))
  }
}
