// CLIProcess.swift — the built `crumbs` command line as a child process, for the tests that
// use it the way a person does.

import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The built `crumbs` executable as a child process: stdout and stderr on pipes. `deinit` kills
/// (SIGKILL) and reaps it if the test did not wait for it, so no test leaves a process behind.
package final class CLIProcess {
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

  /// The `crumbs` product: in the same bin directory as the test bundle (`swift test` runs
  /// `<bin>/CrumbsPackageTests.xctest`, an executable on Linux, so /proc/self/exe names it).
  package static let executable: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    var own =
      count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    if !own.contains(".xctest") { own = CommandLine.arguments[0] }
    if let range = own.range(of: ".xctest") { own = String(own[..<range.upperBound]) }
    return URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("crumbs").path
  }()

  package let pid: pid_t
  private let stdoutDescriptor: Int32
  private let stderrDescriptor: Int32
  private var stdoutBuffer: [UInt8] = []
  private var stdoutClosed = false
  private(set) var exitStatus: Int32?

  /// Runs `crumbs arguments` to completion (killed after `timeoutSeconds`).
  package static func run(_ arguments: [String], timeoutSeconds: Double = 60) throws -> Result {
    let process = try CLIProcess(arguments)
    let stdout = process.readAllStdout()
    let stderr = process.readStderr()
    let status = process.wait(timeoutSeconds: timeoutSeconds)
    return Result(status: status, stdout: stdout, stderr: stderr)
  }

  package init(_ arguments: [String]) throws {
    guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
      throw CLIProcessError.missing(Self.executable)
    }
    var out: [Int32] = [0, 0]
    var err: [Int32] = [0, 0]
    guard pipe(&out) == 0, pipe(&err) == 0 else { throw CLIProcessError.spawn(errno) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, out[1], 1)
    posix_spawn_file_actions_adddup2(&actions, err[1], 2)
    for descriptor in out + err { posix_spawn_file_actions_addclose(&actions, descriptor) }
    let argv = ([Self.executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var child = pid_t()
    let result = withCleanSignalState { posix_spawn(&child, Self.executable, &actions, $0, argv, environ) }
    close(out[1])
    close(err[1])
    guard result == 0 else {
      close(out[0])
      close(err[0])
      throw CLIProcessError.spawn(result)
    }
    pid = child
    stdoutDescriptor = out[0]
    stderrDescriptor = err[0]
  }

  /// The next stdout line, or nil at end of file or when none came within `timeoutSeconds`.
  package func readLine(timeoutSeconds: Double) -> String? {
    let deadline = ChildProcess.now() + timeoutSeconds
    while true {
      if let newline = stdoutBuffer.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: stdoutBuffer[..<newline], as: UTF8.self)
        stdoutBuffer.removeSubrange(...newline)
        return line
      }
      if stdoutClosed { return nil }
      let remaining = deadline - ChildProcess.now()
      if remaining <= 0 { return nil }
      var poller = pollfd(fd: stdoutDescriptor, events: Int16(POLLIN), revents: 0)
      let ready = poll(&poller, 1, Int32(min(remaining, 1) * 1000) + 1)
      if ready <= 0 { continue }
      readChunk()
    }
  }

  private func readChunk() {
    var chunk = [UInt8](repeating: 0, count: 65536)
    let count = read(stdoutDescriptor, &chunk, chunk.count)
    if count < 0 && errno == EINTR { return }
    if count <= 0 {
      stdoutClosed = true
      return
    }
    stdoutBuffer += chunk[..<count]
  }

  /// Everything left on stdout, up to end of file.
  package func readAllStdout() -> String {
    while !stdoutClosed { readChunk() }
    defer { stdoutBuffer.removeAll() }
    return String(decoding: stdoutBuffer, as: UTF8.self)
  }

  /// Everything on stderr, up to end of file (call after stdout is drained or closed).
  package func readStderr() -> String {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = read(stderrDescriptor, &chunk, chunk.count)
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { break }
      bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Waits for exit (SIGKILL after `timeoutSeconds`); returns the exit code, or 128+signal.
  @discardableResult
  package func wait(timeoutSeconds: Double) -> Int32 {
    if let exitStatus { return exitStatus }
    var status: Int32 = 0
    let deadline = ChildProcess.now() + timeoutSeconds
    while true {
      let result = waitpid(pid, &status, WNOHANG)
      if result == pid { break }
      if result < 0 && errno != EINTR { break }
      if ChildProcess.now() > deadline {
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        break
      }
      usleep(2_000)
    }
    let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    exitStatus = code
    return code
  }

  deinit {
    if exitStatus == nil {
      kill(pid, SIGKILL)
      var status: Int32 = 0
      waitpid(pid, &status, 0)
    }
    close(stdoutDescriptor)
    close(stderrDescriptor)
  }

}

package enum CLIProcessError: Error {
  case missing(String)
  case spawn(Int32)
}
