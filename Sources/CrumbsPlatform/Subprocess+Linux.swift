// Subprocess+Linux.swift — the one way Crumbs starts another program: the symbolizer, the CLI's
// demo child, and every child process the tests start.
//
// Entry points, in call order:
//   Subprocess(executable, arguments, environment:, standardOutput:, standardError:)  posix_spawn
//   readLine / readToEnd / collectOutput   read what it prints, each wait bounded by a time limit
//   signal(_:)                             send it a signal
//   wait(timeoutMilliseconds:)             reap it; past the limit it is SIGKILLed and reaped
//   Subprocess.run(...)                    all of the above for a program run to completion
//
// Guarantees: the child starts with an empty signal mask and default signal actions (a parent's
// blocked or ignored signals would otherwise be inherited and the child would never see the
// signals it is sent or raises); stdin is /dev/null unless asked otherwise; our pipe ends are
// close-on-exec; no child outlives its `Subprocess` unreaped (`deinit` SIGKILLs and reaps it).
// Not signal-safe; not for the hot path. One owner at a time (not thread-safe).

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// What a program run by `Subprocess.run` left: how it ended and what it printed.
package struct ProcessOutput {
  /// The exit status when it exited, nil when a signal ended it (including our SIGKILL on timeout).
  package var exitStatus: Int32?
  /// The signal that ended it, nil when it exited.
  package var terminatingSignal: Int32?
  /// True when it was killed for running past its time limit.
  package var timedOut: Bool
  package var standardOutput: [UInt8]
  package var standardError: [UInt8]
}

package final class Subprocess {
  /// Where the child's stdout or stderr goes.
  package enum Destination {
    /// A pipe this object reads (`readLine`, `readToEnd`, `collectOutput`).
    case pipe
    /// /dev/null.
    case discard
    /// This process's own descriptor.
    case inherit
    /// A file, created 0600 or truncated.
    case file(String)
  }

  package enum Stream: Int {
    case standardOutput = 0
    case standardError = 1
  }

  package let pid: pid_t
  /// The raw wait status once reaped.
  package private(set) var status: Int32?
  /// True when `wait` SIGKILLed it for running past its time limit.
  package private(set) var wasKilledForTimeout = false

  /// Our ends of the stdout and stderr pipes (-1 when not piped or at end of file).
  private var descriptors: [Int32] = [-1, -1]
  private var buffers: [[UInt8]] = [[], []]

  /// Starts `executable` (a path) with `arguments`; `environment` entries are added to (or
  /// replace) this process's. Throws when the program cannot be started.
  package init(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    standardInput inheritsInput: Bool = false, standardOutput: Destination = .pipe,
    standardError: Destination = .inherit
  ) throws(SystemCallError) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if !inheritsInput { posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }

    var childEnds: [Int32] = []
    var ourEnds: [Int32] = [-1, -1]
    func closeAll() { for fd in childEnds + ourEnds where fd >= 0 { Syscall.close(fd) } }
    for (index, destination) in [standardOutput, standardError].enumerated() {
      let target = Int32(index + 1)
      switch destination {
      case .pipe:
        var ends: [Int32] = [-1, -1]
        do throws(SystemCallError) {
          try Syscall.retrying("pipe") { pipe(&ends) }
        } catch {
          closeAll()
          throw error
        }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        ourEnds[index] = ends[0]
        childEnds.append(ends[1])
        posix_spawn_file_actions_adddup2(&actions, ends[1], target)
      case .discard:
        posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
      case .inherit:
        break
      case .file(let path):
        posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
      }
    }

    var lines: [String] = []
    var current = environ
    while let entry = current.pointee {
      let line = String(cString: entry)
      if environment[String(line.prefix { $0 != "=" })] == nil { lines.append(line) }
      current += 1
    }
    lines += environment.map { "\($0.key)=\($0.value)" }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = lines.map { strdup($0) } + [nil]
    defer {
      argv.forEach { free($0) }
      envp.forEach { free($0) }
    }

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

    var child = pid_t()
    // ETXTBSY: the program's file is still open for writing somewhere — most often a descriptor
    // that a child forked by another thread of this process inherited while the file was being
    // written, held until that child execs (microseconds, more on a loaded machine). The exec
    // failed before the program ran anything, so trying again is safe: five times, 1 to 16 ms
    // apart (31 ms at most), then the error stands.
    var spawned = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
    var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
    for _ in 0..<5 where spawned == ETXTBSY {
      nanosleep(&pause, nil)
      pause.tv_nsec *= 2
      spawned = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
    }
    for fd in childEnds { Syscall.close(fd) }
    childEnds = []
    guard spawned == 0 else {
      closeAll()
      throw SystemCallError(call: "posix_spawn", path: executable, errno: Errno(rawValue: spawned))
    }
    pid = child
    descriptors = ourEnds
  }

  deinit {
    if status == nil {
      kill(pid, SIGKILL)
      reapBlocking()
    }
    for fd in descriptors where fd >= 0 { Syscall.close(fd) }
  }

  // MARK: Reading what it prints

  /// The next line of `stream` (without its newline); the rest of the stream at end of file;
  /// nil at end of file or when `timeoutMilliseconds` (nil: no limit) pass first.
  package func readLine(from stream: Stream = .standardOutput, timeoutMilliseconds: Int? = nil) -> String? {
    let deadline = Self.deadline(timeoutMilliseconds)
    let index = stream.rawValue
    while true {
      if let newline = buffers[index].firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: buffers[index][..<newline], as: UTF8.self)
        buffers[index].removeSubrange(...newline)
        return line
      }
      if descriptors[index] < 0 {
        guard !buffers[index].isEmpty else { return nil }
        defer { buffers[index].removeAll() }
        return String(decoding: buffers[index], as: UTF8.self)
      }
      if !pump([index], until: deadline) { return nil }
    }
  }

  /// Everything `stream` prints up to end of file (at most `limit` bytes kept, the rest read and
  /// dropped), or up to `timeoutMilliseconds`.
  package func readToEnd(
    _ stream: Stream = .standardOutput, limit: Int = 1 << 30, timeoutMilliseconds: Int? = nil
  ) -> [UInt8] {
    collect([stream.rawValue], limit: limit, deadline: Self.deadline(timeoutMilliseconds))
    defer { buffers[stream.rawValue].removeAll() }
    return buffers[stream.rawValue]
  }

  /// Reads stdout and stderr together until both end or the time limit passes (reading one to
  /// its end first could deadlock on a child blocked writing the other). Returns whether both
  /// ended in time.
  func collectOutput(limit: Int, timeoutMilliseconds: Int?) -> (
    standardOutput: [UInt8], standardError: [UInt8], complete: Bool
  ) {
    let complete = collect([0, 1], limit: limit, deadline: Self.deadline(timeoutMilliseconds))
    defer { buffers = [[], []] }
    return (buffers[0], buffers[1], complete)
  }

  // MARK: Ending it

  package func signal(_ signalNumber: Int32) {
    if status == nil { kill(pid, signalNumber) }
  }

  /// Waits for the child to end, at most `timeoutMilliseconds` (nil: no limit); SIGKILLs and
  /// reaps it after that. Returns the raw wait status.
  @discardableResult
  package func wait(timeoutMilliseconds: Int?) -> Int32 {
    if let status { return status }
    guard let limit = timeoutMilliseconds else {
      reapBlocking()
      return status ?? 0
    }
    let deadline = SystemClock.monotonicNanoseconds() &+ UInt64(max(0, limit)) &* 1_000_000
    var raw: Int32 = 0
    while true {
      let result = waitpid(pid, &raw, WNOHANG)
      if result == pid {
        status = raw
        return raw
      }
      if result < 0 && errno != EINTR { break }
      if SystemClock.monotonicNanoseconds() >= deadline { break }
      var nothing = pollfd(fd: -1, events: 0, revents: 0)
      _ = poll(&nothing, 0, 2)  // a 2 ms pause between checks of a child still running
    }
    kill(pid, SIGKILL)
    wasKilledForTimeout = true
    reapBlocking()
    return status ?? 0
  }

  /// The exit code, nil while running or when a signal ended it.
  package var exitCode: Int32? {
    guard let status, status & 0x7f == 0 else { return nil }
    return (status >> 8) & 0xff
  }

  /// The signal that ended the child, nil while running or when it exited.
  package var terminatingSignal: Int32? {
    guard let status, status & 0x7f != 0, status & 0x7f != 0x7f else { return nil }
    return status & 0x7f
  }

  /// Runs `executable` to completion: output captured (each stream capped at `outputLimit`
  /// bytes, the rest drained and dropped); past `timeoutMilliseconds` SIGKILLed and reaped.
  package static func run(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    timeoutMilliseconds: Int, outputLimit: Int = 16 << 20
  ) throws(SystemCallError) -> ProcessOutput {
    let child = try Subprocess(
      executable, arguments, environment: environment, standardOutput: .pipe, standardError: .pipe)
    let started = SystemClock.monotonicNanoseconds()
    let output = child.collectOutput(limit: outputLimit, timeoutMilliseconds: timeoutMilliseconds)
    let spent = Int((SystemClock.monotonicNanoseconds() &- started) / 1_000_000)
    child.wait(timeoutMilliseconds: output.complete ? max(0, timeoutMilliseconds - spent) : 0)
    return ProcessOutput(
      exitStatus: child.exitCode, terminatingSignal: child.terminatingSignal,
      timedOut: child.wasKilledForTimeout, standardOutput: output.standardOutput,
      standardError: output.standardError)
  }

  // MARK: Internals

  private static func deadline(_ timeoutMilliseconds: Int?) -> UInt64? {
    timeoutMilliseconds.map { SystemClock.monotonicNanoseconds() &+ UInt64(max(0, $0)) &* 1_000_000 }
  }

  private func reapBlocking() {
    var raw: Int32 = 0
    while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
    status = raw
  }

  /// Reads the given streams until all end (true) or the deadline passes (false).
  @discardableResult
  private func collect(_ indices: [Int], limit: Int, deadline: UInt64?) -> Bool {
    while indices.contains(where: { descriptors[$0] >= 0 }) {
      if !pump(indices, until: deadline, limit: limit) { return false }
    }
    return true
  }

  /// Waits for any of the given open streams to be readable and reads once from each that is.
  /// Returns false when the deadline passed first.
  private func pump(_ indices: [Int], until deadline: UInt64?, limit: Int = .max) -> Bool {
    let open = indices.filter { descriptors[$0] >= 0 }
    guard !open.isEmpty else { return true }
    var waitMilliseconds: Int32 = -1
    if let deadline {
      let now = SystemClock.monotonicNanoseconds()
      if now >= deadline { return false }
      waitMilliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }
    var polled = open.map { pollfd(fd: descriptors[$0], events: Int16(POLLIN), revents: 0) }
    let ready = poll(&polled, nfds_t(polled.count), waitMilliseconds)
    if ready < 0 { return errno == EINTR }
    if ready == 0 { return deadline.map { SystemClock.monotonicNanoseconds() < $0 } ?? true }
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    for (slot, index) in open.enumerated() where polled[slot].revents != 0 {
      let count = chunk.withUnsafeMutableBytes { read(descriptors[index], $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR || errno == EAGAIN { continue }
        Syscall.close(descriptors[index])
        descriptors[index] = -1
      } else if count == 0 {
        Syscall.close(descriptors[index])
        descriptors[index] = -1
      } else if buffers[index].count < limit {
        buffers[index] += chunk[0..<min(count, limit - buffers[index].count)]
      }
    }
    return true
  }
}
