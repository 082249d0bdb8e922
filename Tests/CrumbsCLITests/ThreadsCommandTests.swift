// ThreadsCommandTests.swift — `crumbs threads PID` on real running children (issue 23, test d):
// a child running a Crumbs client with threads parked in known functions ("parked-reader" in a
// read on a pipe, "parked-waiter" in a condition wait, "parked-task" a pool thread blocked by a
// task under an async caller) is dumped from outside; every thread is printed with its name and
// its function (the async caller marked), and the child runs on and exits 0 when its gate
// opens. Also: --json parses into report threads, a process without a client is a clear error,
// and a request that comes after the client closed neither kills the process nor is answered.
// Every wait is on a pipe, a gate or an exit, with generous bounds.

import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("crumbs threads PID", .serialized)
struct ThreadsCommandTests {
  /// A child waiting at its gate with its parked threads, and what it said before waiting.
  struct Target {
    var child: ChildProcess
    var gate: StartGate
    var signal: Int32
    var lines: [String]
  }

  func startTarget(
    _ directory: TestDirectory, mode: String = "client", secondGate: StartGate? = nil,
    environment: [String: String] = [:]
  ) throws -> Target {
    let gate = try StartGate(in: directory)
    let child = try ChildProcess(
      ChildProcess.testChild,
      ["dump-target", directory.file("crumbs"), gate.path] + (secondGate.map { [$0.path] } ?? []) + [mode],
      environment: environment)
    let lines = child.readLines(until: "ready", seconds: 120)
    let signal = lines.first { $0.hasPrefix("dump-signal ") }.flatMap { Int32($0.dropFirst(12)) } ?? -1
    return Target(child: child, gate: gate, signal: signal, lines: lines)
  }

  /// The blocks of a text dump, one per thread: its heading line, then its frames.
  func threadBlocks(_ output: String) -> [[String]] {
    output.components(separatedBy: "\n\n").dropFirst().map { $0.split(separator: "\n").map(String.init) }
  }

  @Test("every parked thread with its name and function; the process runs on and exits 0")
  func dumpsParkedThreads() throws {
    let directory = TestDirectory()
    let target = try startTarget(directory)
    let context = target.lines.joined(separator: " | ")
    try #require(target.lines.last == "ready", "\(context)")
    #expect(target.signal >= 34 && target.signal < 64, "a real-time signal below SIGRTMAX: \(context)")

    let result = try CLIProcess.run(["threads", "\(target.child.pid)", "--timeout", "60"])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(
      result.stdoutLines.first?.hasPrefix("Thread dump of pid \(target.child.pid)") == true,
      "\(result.stdout)")
    let blocks = threadBlocks(result.stdout)
    // The operation the main thread holds open, with its age and thread (issue 38, point 5).
    let thread = try #require(target.lines.first { $0.hasPrefix("operation-thread ") }).dropFirst(17)
    let open = result.stdoutLines.drop { !$0.hasPrefix("Open operations") }
    #expect(
      open.first?.hasPrefix("Open operations  (1 open at the dump, 512 entries") == true, "\(result.stdout)")
    let line = try #require(open.dropFirst().first, "\(result.stdout)")
    #expect(
      line.hasSuffix(
        " s  GET /v1/dump/:id  server, thread \(thread)  trace 0af7651916cd43dd8448eb211c80319c"), "\(line)")
    for (name, function) in [
      ("parked-reader", "crumbs_test_parked_reader"), ("parked-waiter", "crumbs_test_parked_waiter"),
    ] {
      let block = blocks.first { $0.first?.hasPrefix("\"\(name)\" tid=") == true }
      #expect(block != nil, "no thread \(name) in:\n\(result.stdout)")
      #expect(
        block?.dropFirst().contains { $0.hasPrefix("    at \(function)") } == true,
        "\(name) is not in \(function):\n\(result.stdout)")
    }
    // A pool thread held by a task: its function, and its async caller marked as reports mark it.
    let task = blocks.first { $0.first?.hasPrefix("\"parked-task\" tid=") == true } ?? []
    #expect(
      task.contains { $0.hasPrefix("    at DumpWorkload.parkedAfterSuspending()") }, "\(result.stdout)")
    #expect(
      task.contains { $0.hasPrefix("    at DumpWorkload.awaitingCaller()") && $0.hasSuffix("{async}") },
      "\(result.stdout)")
    // The answer was read and removed: nothing is left beside the ring.
    let rings = directory.file("crumbs/rings")
    #expect(try Syscall.directoryEntries(rings).filter { $0.contains(".threads-") } == [])

    target.gate.open()
    #expect(target.child.readLines(until: "closed", seconds: 120).contains("alive"))
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0)
  }

  @Test("threads under seccomp are never signalled: listed with why, and the process lives")
  func seccompThreadsAreNotSignalled() throws {
    // Issue 35, case 11: "sc-strict" (strict seccomp, blocked in read) and "sc-filter" (a
    // SECCOMP_RET_KILL_PROCESS filter, spinning). The dump's capture used to signal both: the
    // capture handler's first system call killed the strict thread, then the whole process, and
    // the dump never came.
    let directory = TestDirectory()
    let target = try startTarget(directory, environment: ["CRUMBS_TEST_SECCOMP_THREADS": "1"])
    try #require(target.lines.last == "ready", "\(target.lines)")

    let result = try CLIProcess.run(["threads", "\(target.child.pid)", "--timeout", "60"])
    #expect(result.status == 0, "\(result.stderr)")
    let blocks = threadBlocks(result.stdout)
    let filtered = blocks.first { $0.first?.hasPrefix("\"sc-filter\" tid=") == true }
    #expect(
      filtered?.first?.hasSuffix(" not asked (not signalled: under a seccomp filter)") == true,
      "\(result.stdout)")
    let strict = blocks.first { $0.first?.hasPrefix("\"sc-strict\" tid=") == true }
    #expect(
      strict?.first?.hasSuffix(
        " captured (not signalled: under a seccomp filter, blocked in a system call, walked where it waits)")
        == true, "\(result.stdout)")
    #expect(
      strict?.dropFirst().contains { $0.hasPrefix("    at crumbs_test_seccomp_strict_waiting") } == true,
      "\(result.stdout)")

    target.gate.open()
    let lines = target.child.readLines(until: "closed", seconds: 120)
    #expect(lines.contains("host strict read returned 1 byte x") && lines.contains("results 3"), "\(lines)")
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0, "\(lines)")
  }

  @Test("a damaged ledger in the process's ring file: named, and the threads printed all the same")
  func damagedLedgerIsNamed() throws {
    let directory = TestDirectory()
    let target = try startTarget(directory)
    try #require(target.lines.last == "ready", "\(target.lines)")
    let rings = directory.file("crumbs") + "/rings"
    let name = try #require(try Syscall.directoryEntries(rings).first { $0.hasSuffix(".ring") })
    let path = rings + "/" + name
    let image = try Syscall.readFile(path)
    let place = try #require(try image.withUnsafeBytes { try RingHeaderValidation.validate($0) }.ledger)
    // The ledger's magic flipped in the file the child maps (its readers, not its writers, look).
    func writeMagicByte(_ byte: UInt8) {
      let fd = open(path, O_WRONLY)
      #expect(fd >= 0)
      var value = byte
      #expect(pwrite(fd, &value, 1, off_t(place.offset)) == 1)
      close(fd)
    }
    writeMagicByte(~image[place.offset])
    let result = try CLIProcess.run(["threads", "\(target.child.pid)", "--timeout", "60"])
    writeMagicByte(image[place.offset])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(
      result.stdoutLines.contains { $0.hasPrefix("\"parked-reader\" tid=") }, "\(result.stdout)")
    let listed = result.stdoutLines.drop { !$0.hasPrefix("Open operations") }
    #expect(listed.first?.hasPrefix("Open operations  (0 open at the dump") == true, "\(result.stdout)")
    #expect(listed.dropFirst().first == "  the ledger's magic is damaged", "\(result.stdout)")

    target.gate.open()
    #expect(target.child.readLines(until: "closed", seconds: 120).contains("alive"))
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0)
  }

  @Test("--json: one object whose threads decode as report threads")
  func dumpsAsJSON() throws {
    let directory = TestDirectory()
    let target = try startTarget(directory)
    try #require(target.lines.last == "ready", "\(target.lines)")

    let result = try CLIProcess.run(["threads", "\(target.child.pid)", "--json", "--timeout", "60"])
    #expect(result.status == 0, "\(result.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    #expect(object["pid"] as? Int == Int(target.child.pid))
    let threadsJSON = try JSONSerialization.data(withJSONObject: try #require(object["threads"]))
    let threads = try JSONDecoder().decode([CrashReport.Thread].self, from: threadsJSON)
    let reader = try #require(threads.first { $0.name == "parked-reader" }, "\(result.stdout)")
    #expect(reader.frames.contains { $0.function == "crumbs_test_parked_reader" }, "\(reader.frames)")
    #expect(threads.contains { $0.id == Int(target.child.pid) }, "the main thread is listed")
    // The operation open on the main thread, read from the ring's ledger, as a report holds it.
    let openJSON = try JSONSerialization.data(withJSONObject: try #require(object["crumbs.open_operations"]))
    let open = try JSONDecoder().decode(CrashReport.OpenOperations.self, from: openJSON)
    #expect(open.operations.map(\.name) == ["GET /v1/dump/:id"], "\(result.stdout)")
    #expect(open.operations.first?.traceID == "0af7651916cd43dd8448eb211c80319c")
    #expect(open.operations.first.map { Int($0.threadID) } == Int(target.child.pid))

    target.gate.open()
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0)
  }

  @Test("a process without a client: a clear error, exit 1, and it runs on", arguments: ["recorder", "none"])
  func refusesAProcessWithoutAClient(mode: String) throws {
    let directory = TestDirectory()
    let target = try startTarget(directory, mode: mode)
    try #require(target.lines.last == "ready", "\(target.lines)")
    #expect(target.signal == 0)

    let result = try CLIProcess.run(["threads", "\(target.child.pid)"])
    #expect(result.status == 1)
    #expect(result.stdout.isEmpty)
    let expected =
      mode == "recorder"
      ? "crumbs threads: process \(target.child.pid) did not enable thread dumps (no Crumbs client running?)"
      : "crumbs threads: process \(target.child.pid) maps no Crumbs ring: no Crumbs client running?"
    #expect(result.stderrLines == [expected], "\(result.stderr)")

    target.gate.open()
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0)
  }

  @Test("a client without its crash handler answers without a dump, and the CLI says why")
  func answersWithoutADumpWithoutTheCrashHandler() throws {
    let directory = TestDirectory()
    let target = try startTarget(directory, environment: ["CRUMBS_TEST_NO_CRASH_HANDLER": "1"])
    try #require(target.lines.last == "ready" && target.signal > 0, "\(target.lines)")

    let result = try CLIProcess.run(["threads", "\(target.child.pid)", "--timeout", "60"])
    #expect(result.status == 1)
    #expect(
      result.stderrLines == [
        "crumbs threads: process \(target.child.pid) answered without a dump: "
          + "cannot capture threads: the crash handler is not installed"
      ], "\(result.stderr)")
    #expect(
      try Syscall.directoryEntries(directory.file("crumbs/rings")).filter { $0.contains(".threads-") } == [])

    target.gate.open()
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0)
  }

  @Test("no such process, and a PID that is not one: clear errors")
  func refusesBadPIDs() throws {
    // pid_max is at most 2^22: this pid names no process.
    let missing = try CLIProcess.run(["threads", "4194305"])
    #expect(missing.status == 1)
    #expect(missing.stderrLines == ["crumbs threads: no process 4194305"], "\(missing.stderr)")
    let zero = try CLIProcess.run(["threads", "0"])
    #expect(zero.status == 64)
    let timeout = try CLIProcess.run(["threads", "1", "--timeout", "0"])
    #expect(timeout.status == 64)
  }

  @Test("after close: the header names no signal, and a late request neither kills nor is answered")
  func lateRequestAfterClose() throws {
    let directory = TestDirectory()
    let secondGate = try StartGate(in: directory, name: "second-gate")
    let target = try startTarget(directory, secondGate: secondGate)
    try #require(target.lines.last == "ready" && target.signal > 0, "\(target.lines)")
    let rings = directory.file("crumbs/rings")
    let ring = try #require(try Syscall.directoryEntries(rings).first { $0.hasSuffix(".ring") })
    #expect(try RingReader.readHeader(file: rings + "/" + ring).header.threadDumpSignal == target.signal)

    target.gate.open()
    let closing = target.child.readLines(until: "ready", seconds: 120)
    try #require(closing.contains("closed"), "\(closing)")
    #expect(try RingReader.readHeader(file: rings + "/" + ring).header.threadDumpSignal == 0)
    // What a `crumbs threads` that read the header just before the close would send.
    try Syscall.queueSignal(target.signal, value: 77, to: target.child.pid)
    try Syscall.queueSignal(target.signal, value: 78, to: target.child.pid)
    secondGate.open()
    #expect(target.child.readLine(seconds: 120) == "still alive")
    target.child.wait(seconds: 120)
    #expect(target.child.exitCode == 0)
    #expect(try Syscall.directoryEntries(rings).filter { $0.contains(".threads-") } == [])
  }
}

@Suite struct ThreadsCommandWaitTests {
  @Test("a deadlock of two mutexes: the text leads with it, --json carries each wait and the verdict")
  func namesADeadlock() throws {
    // Issue 40: the child's threads deadlock on two pthread mutexes (wait-graph, stay).
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["wait-graph", directory.path, "stay"])
    defer {
      child.signal(SIGKILL)
      child.wait(seconds: 60)
    }
    let lines = child.readLines(until: "done", seconds: 120)
    try #require(lines.last == "done", "\(lines)")
    func tid(_ name: String) -> String? {
      lines.first { $0.hasPrefix("role \(name) ") }?.split(separator: " ").dropFirst(2).first.map(String.init)
    }
    let a = try #require(tid("dl-a"), "\(lines)")
    let b = try #require(tid("dl-b"), "\(lines)")

    let text = try CLIProcess.run(["threads", "\(child.pid)", "--timeout", "60"])
    #expect(text.status == 0, "\(text.stderr)")
    let verdictLine = text.stdout.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
    #expect(verdictLine.hasPrefix("deadlock: "), "\(text.stdout.prefix(600))")
    #expect(
      verdictLine.contains("dl-a (tid \(a))") && verdictLine.contains("dl-b (tid \(b))"), "\(verdictLine)")
    #expect(text.stdout.contains("\"dl-a\" tid=\(a) "), "\(text.stdout.prefix(600))")
    #expect(text.stdout.contains("\n    - waiting for mutex 0x"), "\(text.stdout.prefix(600))")

    let json = try CLIProcess.run(["threads", "\(child.pid)", "--json", "--timeout", "60"])
    #expect(json.status == 0, "\(json.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
    let verdict = try #require(object["crumbs.verdict"] as? [String: Any], "\(json.stdout)")
    #expect(verdict["kind"] as? String == "deadlock")
    #expect(Set((verdict["threads"] as? [Int] ?? []).map(String.init)) == [a, b])
    let waits = try #require(object["crumbs.waits"] as? [[String: Any]], "\(json.stdout)")
    let waitOfA = waits.first { ($0["thread.id"] as? Int).map(String.init) == a }
    #expect((waitOfA?["lock.owner"] as? Int).map(String.init) == b, "\(String(describing: waitOfA))")
    #expect(waitOfA?["system_call.name"] as? String == "futex")
  }

  @Test(
    "rwlock, Synchronization.Mutex and condition variable waits: each owner, or why none, in text and --json")
  func namesLockOwners() throws {
    // Issue 40: the lock-graph child (stay), asked from outside.
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["lock-graph", directory.path, "stay"])
    defer {
      child.signal(SIGKILL)
      child.wait(seconds: 60)
    }
    let lines = child.readLines(until: "done", seconds: 120)
    try #require(lines.last == "done", "\(lines)")
    func role(_ name: String) -> [String] {
      lines.first { $0.hasPrefix("role \(name) ") }?.split(separator: " ").map(String.init) ?? []
    }
    let writer = try #require(role("rw-writer").dropFirst(2).first, "\(lines)")
    let reader = try #require(role("rw-reader").dropFirst(2).first, "\(lines)")
    let waiter = try #require(role("mx-waiter").dropFirst(2).first, "\(lines)")
    let holder = try #require(role("mx-holder").dropFirst(2).first, "\(lines)")
    let rdWriter = try #require(role("rd-writer").dropFirst(2).first, "\(lines)")

    let text = try CLIProcess.run(["threads", "\(child.pid)", "--timeout", "60"])
    #expect(text.status == 0, "\(text.stderr)")
    let verdictLine = text.stdout.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
    #expect(verdictLine.hasPrefix("deadlock: ") && verdictLine.contains("PI mutex 0x"), "\(verdictLine)")
    #expect(text.stdout.contains("\n    - waiting to read rwlock 0x"), "\(text.stdout.prefix(2000))")
    #expect(text.stdout.contains(" held for writing by tid \(writer)\n"), "\(text.stdout.prefix(2000))")
    #expect(
      text.stdout.contains("; held by 1 reader; readers have no owner\n"), "\(text.stdout.prefix(2000))")
    #expect(text.stdout.contains(" held by tid \(holder)\n"), "\(text.stdout.prefix(2000))")
    #expect(text.stdout.contains("\n    - waiting on a condition variable 0x"), "\(text.stdout.prefix(2000))")

    let json = try CLIProcess.run(["threads", "\(child.pid)", "--json", "--timeout", "60"])
    #expect(json.status == 0, "\(json.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
    let waits = try #require(object["crumbs.waits"] as? [[String: Any]], "\(json.stdout)")
    func entry(_ tid: String) -> [String: Any]? {
      waits.first { ($0["thread.id"] as? Int).map(String.init) == tid }
    }
    #expect((entry(reader)?["lock.owner"] as? Int).map(String.init) == writer)
    #expect(
      entry(reader)?["lock.kind"] as? String == "rwlock" && entry(reader)?["lock.wants"] as? String == "read")
    #expect((entry(waiter)?["lock.owner"] as? Int).map(String.init) == holder)
    #expect(entry(waiter)?["lock.kind"] as? String == "pi_mutex")
    #expect(entry(rdWriter)?["lock.readers"] as? Int == 1 && entry(rdWriter)?["lock.owner"] == nil)
    let verdict = try #require(object["crumbs.verdict"] as? [String: Any], "\(json.stdout)")
    #expect(verdict["kind"] as? String == "deadlock")
    #expect(Set(verdict["lock_kinds"] as? [String] ?? []) == ["mutex", "pi_mutex"], "\(verdict)")
  }
}
