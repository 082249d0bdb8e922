// ThreadsCommandHostileTests.swift — `crumbs threads PID` run as root against a process that
// turns on it (issue 35, case 17). The process asked knows each request's cookie, so it can put
// a link or a FIFO at the answer's name; and a pid can be given to a new process between the
// CLI's reading /proc/PID/maps and its signal. Real processes throughout: a target running as
// another user (useradd + setpriv), a root-only secret, fanotify holding the CLI's open of the
// ring while the target dies and a new process takes its pid (clone3 with set_tid). Root only;
// skipped elsewhere, saying so.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite("crumbs threads PID against a hostile process", .serialized)
struct ThreadsCommandHostileTests {
  static let otherUser = "crumbs-test-other"

  /// The uid and gid of a second user, made once (idempotently); nil when not root.
  static func secondUser() throws -> (uid: UInt32, gid: UInt32)? {
    guard getuid() == 0 else { return nil }
    if getpwnam(otherUser) == nil {
      let made = try Subprocess.run(
        "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", otherUser],
        timeoutMilliseconds: 60_000)
      // Another test process may have made it at the same moment (exit 9: the name exists).
      try #require(made.exitStatus == 0 || made.exitStatus == 9, "useradd: \(made.exitStatus ?? -1)")
    }
    let entry = try #require(getpwnam(otherUser))
    return (entry.pointee.pw_uid, entry.pointee.pw_gid)
  }

  /// A dump-hostile child running as the second user in `directory` (handed over to that user).
  func startHostile(
    _ directory: TestDirectory, mode: String, target: String = "/", user: (uid: UInt32, gid: UInt32)
  )
    throws -> (child: ChildProcess, ring: String, lines: [String])
  {
    try #require(chown(directory.path, user.uid, user.gid) == 0)
    let child = try ChildProcess(
      "/usr/bin/setpriv",
      [
        "--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", ChildProcess.testChild,
        "dump-hostile", directory.file("crumbs"), mode, target,
      ])
    let lines = child.readLines(until: "ready", seconds: 120)
    let ring = try #require(lines.first { $0.hasPrefix("ring ") }.map { String($0.dropFirst(5)) }, "\(lines)")
    return (child, ring, lines)
  }

  /// The names in `events` that were opened (IN_OPEN).
  func opened(_ events: [Syscall.InotifyEvent]) -> [String] {
    events.filter { $0.mask & UInt32(IN_OPEN) != 0 }.map(\.name)
  }

  @Test("an answer that is a link to a root-only file: refused, never opened, the secret never printed")
  func answerLinkedToSecret() throws {
    guard let user = try Self.secondUser() else {
      print("skipped answerLinkedToSecret: needs root (a second user, a root-only file)")
      return
    }
    let secretFolder = TestDirectory("secret")
    let secret = "crumbs-secret-\(UInt64.random(in: 1...UInt64.max))"
    let secretPath = secretFolder.file("secret.txt")
    let fd = try Syscall.open(secretPath, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
    _ = secret.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
    Syscall.close(fd)
    // Every open of a file in the secret's folder is seen, whoever opens it.
    let watch = try Syscall.inotifyDescriptor()
    defer { Syscall.close(watch) }
    _ = try Syscall.addWatch(watch, secretFolder.path, mask: UInt32(IN_OPEN))

    let directory = TestDirectory()
    let hostile = try startHostile(directory, mode: "symlink", target: secretPath, user: user)
    defer {
      hostile.child.signal(SIGKILL)
      hostile.child.wait(seconds: 60)
    }
    try #require(hostile.lines.last == "ready", "\(hostile.lines)")

    let result = try CLIProcess.run(
      ["threads", "\(hostile.child.pid)", "--timeout", "30"], timeoutSeconds: 90)
    let planted = hostile.child.value(after: "planted ", seconds: 60)
    #expect(planted != nil, "the target never planted its link")
    #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
    #expect(result.stderr.contains("symbolic link"), "\(result.stderr)")
    #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
    #expect(!opened(Syscall.inotifyEvents(watch)).contains("secret.txt"), "the CLI opened the root-only file")
  }

  @Test("an answer that is a FIFO: refused at once, never opened")
  func answerIsAFIFO() throws {
    guard let user = try Self.secondUser() else {
      print("skipped answerIsAFIFO: needs root (a second user)")
      return
    }
    let directory = TestDirectory()
    let hostile = try startHostile(directory, mode: "fifo", user: user)
    defer {
      hostile.child.signal(SIGKILL)
      hostile.child.wait(seconds: 60)
    }
    try #require(hostile.lines.last == "ready", "\(hostile.lines)")
    let watch = try Syscall.inotifyDescriptor()
    defer { Syscall.close(watch) }
    _ = try Syscall.addWatch(watch, Syscall.directoryName(of: hostile.ring), mask: UInt32(IN_OPEN))

    let result = try CLIProcess.run(
      ["threads", "\(hostile.child.pid)", "--timeout", "30"], timeoutSeconds: 90)
    let planted = try #require(hostile.child.value(after: "planted ", seconds: 60), "no FIFO planted")
    #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
    #expect(result.stderr.contains("not a regular file"), "\(result.stderr)")
    #expect(
      !opened(Syscall.inotifyEvents(watch)).contains(Syscall.baseName(of: planted)),
      "the CLI opened the FIFO before looking at what it is")
  }

  /// The checks above must not keep a user from dumping their own process: the same second
  /// user runs both the target and the CLI.
  @Test("a user who is not root still dumps their own process")
  func ownUserDumps() throws {
    guard let user = try Self.secondUser() else {
      print("skipped ownUserDumps: needs root (a second user)")
      return
    }
    let directory = TestDirectory()
    try #require(chown(directory.path, user.uid, user.gid) == 0)
    let gate = try StartGate(in: directory)
    try #require(chown(gate.path, user.uid, user.gid) == 0)
    let asUser = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--"]
    let target = try ChildProcess(
      "/usr/bin/setpriv",
      asUser + [ChildProcess.testChild, "dump-target", directory.file("crumbs"), gate.path])
    defer {
      gate.open()
      target.signal(SIGKILL)
      target.wait(seconds: 60)
    }
    let lines = target.readLines(until: "ready", seconds: 120)
    try #require(lines.last == "ready", "\(lines)")
    let result = CLIProcess.Result(
      try Subprocess.run(
        "/usr/bin/setpriv", asUser + [CLIProcess.executable, "threads", "\(target.pid)", "--timeout", "30"],
        timeoutMilliseconds: 90_000))
    #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    #expect(result.stdout.hasPrefix("Thread dump of pid \(target.pid)"), "\(result.stdout)")
    #expect(result.stdout.contains("\"parked-reader\" tid="), "\(result.stdout)")
  }

  @Test("the pid is reused between reading the ring and the request: the new process is not signalled")
  func pidReusedBeforeTheRequest() throws {
    guard getuid() == 0 else {
      print("skipped pidReusedBeforeTheRequest: needs root (fanotify, clone3 with set_tid)")
      return
    }
    let directory = TestDirectory()
    let gate = try StartGate(in: directory)
    let referee = try ChildProcess(ChildProcess.testChild, ["pid-reuse", directory.path, gate.path])
    defer {
      gate.open()
      referee.signal(SIGKILL)
      referee.wait(seconds: 60)
    }
    let lines = referee.readLines(until: "watching", seconds: 120)
    if let line = lines.first(where: { $0.hasPrefix("no-fanotify ") }) {
      print("skipped pidReusedBeforeTheRequest: no fanotify permission events here (\(line))")
      return
    }
    let target = try #require(
      lines.first { $0.hasPrefix("target ") }.flatMap { Int32($0.dropFirst(7)) }, "\(lines)")

    let result = try CLIProcess.run(["threads", "\(target)", "--timeout", "30"], timeoutSeconds: 90)
    var after = referee.readLines(until: "ready", seconds: 60)
    gate.open()
    after += referee.readLines(until: "done", seconds: 60)
    if let failed = after.first(where: { $0.hasPrefix("impostor-failed ") }) {
      print("skipped pidReusedBeforeTheRequest: pid \(target) could not be taken again (\(failed))")
      return
    }
    #expect(after.contains("impostor \(target)"), "\(after)")
    #expect(after.contains("impostor-alive"), "the process given the pid got the request: \(after)")
    #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
    #expect(result.stderr.contains("ended before it was asked"), "\(result.stderr)")
  }
}
