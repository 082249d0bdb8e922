// ChildProcess.swift — spawning the test child (or any built product) and reaping it for sure.
#if canImport(Glibc)
  import Glibc
#endif

/// A child process with its stdout on a pipe. `deinit` kills (SIGKILL) and reaps it if the test
/// did not, so no test leaves a process behind.
package final class ChildProcess {
  package let pid: pid_t
  private let stdoutDescriptor: Int32
  private var buffered: [UInt8] = []
  private(set) var exitStatus: Int32?

  /// The directory holding the built products (next to the test bundle).
  package static let productsDirectory: String = {
    var path = CommandLine.arguments[0]
    // swift test runs `.build/<config>/<Package>PackageTests.xctest` (a file on Linux).
    while !path.isEmpty, !path.hasSuffix(".xctest") {
      path = String(path.dropLast())
    }
    let bundle = path.isEmpty ? CommandLine.arguments[0] : path
    guard let slash = bundle.lastIndex(of: "/") else { return "." }
    return String(bundle[..<slash])
  }()

  /// The debug test child.
  package static var testChild: String { productsDirectory + "/CrumbsTestChild" }

  /// Starts `executable` with `arguments`; `environment` entries are added to this process's.
  package init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
    var pipeDescriptors: [Int32] = [0, 0]
    guard pipe(&pipeDescriptors) == 0 else { throw ChildError.spawn("pipe", errno) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeDescriptors[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeDescriptors[0])
    posix_spawn_file_actions_addclose(&actions, pipeDescriptors[1])

    var environmentLines: [String] = []
    var current = environ
    while let entry = current.pointee {
      let line = String(cString: entry)
      let name = String(line.prefix { $0 != "=" })
      if environment[name] == nil { environmentLines.append(line) }
      current += 1
    }
    environmentLines += environment.map { "\($0.key)=\($0.value)" }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environmentLines.map { strdup($0) } + [nil]
    defer {
      argv.forEach { free($0) }
      envp.forEach { free($0) }
    }
    var child = pid_t()
    let result = withCleanSignalState { posix_spawn(&child, executable, &actions, $0, argv, envp) }
    close(pipeDescriptors[1])
    guard result == 0 else {
      close(pipeDescriptors[0])
      throw ChildError.spawn("posix_spawn \(executable)", result)
    }
    pid = child
    stdoutDescriptor = pipeDescriptors[0]
  }

  /// The next line of stdout, or nil at end of file.
  package func readLine() -> String? {
    while true {
      if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: buffered[..<newline], as: UTF8.self)
        buffered.removeSubrange(...newline)
        return line
      }
      var chunk = [UInt8](repeating: 0, count: 4096)
      let count = read(stdoutDescriptor, &chunk, chunk.count)
      if count < 0 && errno == EINTR { continue }
      if count <= 0 {
        if buffered.isEmpty { return nil }
        defer { buffered.removeAll() }
        return String(decoding: buffered, as: UTF8.self)
      }
      buffered += chunk[..<count]
    }
  }

  /// Reads lines until one starts with `prefix`; returns the rest of that line.
  package func value(after prefix: String) -> String? {
    while let line = readLine() {
      if line.hasPrefix(prefix) { return String(line.dropFirst(prefix.count)) }
    }
    return nil
  }

  /// Everything left on stdout.
  package func readRemaining() -> String {
    var lines: [String] = []
    while let line = readLine() { lines.append(line) }
    return lines.joined(separator: "\n")
  }

  package func signal(_ signalNumber: Int32) { kill(pid, signalNumber) }

  /// Waits for the child to exit, at most `seconds`; SIGKILLs it after that. Returns the raw
  /// wait status.
  @discardableResult
  package func wait(seconds: Double = 60) -> Int32 {
    if let exitStatus { return exitStatus }
    var status: Int32 = 0
    let deadline = Self.now() + seconds
    while true {
      let result = waitpid(pid, &status, WNOHANG)
      if result == pid { break }
      if result < 0 && errno != EINTR { break }
      if Self.now() > deadline {
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        break
      }
      usleep(2_000)
    }
    exitStatus = status
    return status
  }

  /// The signal that ended the child, or nil if it exited normally.
  package var terminatingSignal: Int32? {
    guard let status = exitStatus, status & 0x7f != 0, status & 0x7f != 0x7f else { return nil }
    return status & 0x7f
  }

  /// The exit code, or nil if a signal ended the child.
  package var exitCode: Int32? {
    guard let status = exitStatus, status & 0x7f == 0 else { return nil }
    return (status >> 8) & 0xff
  }

  deinit {
    if exitStatus == nil {
      kill(pid, SIGKILL)
      var status: Int32 = 0
      waitpid(pid, &status, 0)
    }
    close(stdoutDescriptor)
  }

  package static func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
  }
}

package enum ChildError: Error {
  case spawn(String, Int32)
}

/// Calls `body` with spawn attributes that give the child an empty signal mask and default
/// actions: the test runner's threads block signals (SIGUSR1, SIGQUIT…), and a child would
/// otherwise inherit that mask and never see the signals a test sends or raises.
package func withCleanSignalState<Result>(_ body: (UnsafePointer<posix_spawnattr_t>) -> Result) -> Result {
  var attributes = posix_spawnattr_t()
  posix_spawnattr_init(&attributes)
  defer { posix_spawnattr_destroy(&attributes) }
  var empty = sigset_t()
  sigemptyset(&empty)
  posix_spawnattr_setsigmask(&attributes, &empty)
  var defaults = sigset_t()
  sigemptyset(&defaults)
  for signal in 1..<32 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaults, Int32(signal)) }
  posix_spawnattr_setsigdefault(&attributes, &defaults)
  posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
  return withUnsafePointer(to: &attributes) { body($0) }
}
