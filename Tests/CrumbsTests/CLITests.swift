// CLITests.swift — the built `crumbs` executable run as a real process: `ring dump`, `ring tail`,
// `ring stress`, with stdout and stderr captured through pipes.

import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct CLITests {
  // MARK: dump

  @Test func dumpJSONLinesCarryEveryBreadcrumbWithItsKeysInOrder() throws {
    let directory = TestDirectory()
    let path = directory.file("app.ring")
    var options = RingOptions()
    options.slotSize = 128
    options.slotCount = 256
    options.appName = "cli-test"
    let before = Date()
    let ring = try BreadcrumbRing.create(at: path, options: options)
    ring.append("launch", level: .info, type: .system)
    ring.append("GET \"/x\"\n", level: .warning, type: .http, attributes: ["status": "500", "url": "/x"])
    ring.append(String(repeating: "é", count: 200), level: .error, type: .log)
    ring.close(clean: false)  // as if the process had died: state stays running
    let after = Date()
    let expected = try RingReader.read(file: path)

    let result = try CLIProcess.run(["ring", "dump", path, "--json"])
    #expect(result.status == 0)
    let lines = result.stdoutLines
    try #require(lines.count == 3)
    for (line, breadcrumb) in zip(lines, expected.breadcrumbs) {
      let object = try #require(
        try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
        "not a JSON object: \(line)")
      #expect(object["seq"] as? Int == Int(breadcrumb.threadSequence))
      #expect((object["id"] as? NSNumber)?.uint64Value == breadcrumb.id)
      #expect(object["thread"] as? Int == Int(breadcrumb.threadID))
      #expect(object["message"] as? String == breadcrumb.message)
      #expect(object["level"] as? String == breadcrumb.level.name)
      #expect(object["type"] as? String == breadcrumb.type.name)
      let attributes = try #require(object["attributes"] as? [String: String])
      #expect(
        attributes == Dictionary(uniqueKeysWithValues: breadcrumb.attributes.map { ($0.key, $0.value) }))
      #expect((object["truncated"] as? Bool ?? false) == breadcrumb.truncated)
      #expect((object["truncated"] != nil) == breadcrumb.truncated)
      let timestamp = try #require(object["timestamp"] as? String)
      let date = try #require(Self.parseISO8601(timestamp), "not ISO 8601: \(timestamp)")
      #expect(date >= before.addingTimeInterval(-2) && date <= after.addingTimeInterval(2), "\(timestamp)")
      #expect(timestamp.hasSuffix("Z"))
      // Stable key order: the order the README documents.
      let keys = [
        "\"seq\":", "\"id\":", "\"timestamp\":", "\"level\":", "\"type\":", "\"thread\":",
        "\"message\":", "\"attributes\":",
      ]
      let offsets = keys.map { line.range(of: $0)?.lowerBound }
      #expect(offsets.allSatisfy { $0 != nil }, "\(line)")
      #expect(offsets.compactMap { $0 } == offsets.compactMap { $0 }.sorted(), "\(line)")
      #expect(line.hasPrefix("{\"seq\":"))
    }
    #expect(
      (try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])?["message"] as? String
        == "GET \"/x\"\n")
    #expect(lines[2].contains("\"truncated\":true"))
    #expect(expected.breadcrumbs[2].messageTruncated)

    let summary = result.stderrLines
    try #require(summary.count == 1, "\(summary)")
    #expect(summary[0].contains("3 valid, 0 torn, 0 overwritten"))
    #expect(summary[0].contains("pid \(getpid())"))
    #expect(summary[0].contains("session \(ring.sessionID)"))
    #expect(summary[0].contains("state running"))
  }

  @Test func dumpHumanLinesAndLastN() throws {
    let directory = TestDirectory()
    let path = directory.file("h.ring")
    let ring = try BreadcrumbRing.create(at: path)
    for number in 0..<5 {
      ring.append("step \(number)", level: .debug, type: .navigation, attributes: ["n": "\(number)"])
    }
    ring.close(clean: true)

    let result = try CLIProcess.run(["ring", "dump", path, "--last", "2"])
    #expect(result.status == 0)
    #expect(result.stdoutLines.count == 2)
    #expect(result.stdoutLines.first?.contains("DEBUG") == true)
    #expect(result.stdoutLines.first?.contains("step 3  {n=3}") == true)
    #expect(result.stdoutLines.last?.contains("step 4  {n=4}") == true)
    #expect(
      result.stdoutLines.allSatisfy {
        $0.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "#, options: .regularExpression) != nil
      })
    #expect(result.stderrLines.first?.contains("state clean") == true)
  }

  @Test func dumpOfAForeignFileExitsNonZeroWithOneLine() throws {
    let directory = TestDirectory()
    let foreign = directory.file("notes.txt")
    try String(repeating: "not a ring at all\n", count: 500).write(
      toFile: foreign, atomically: false, encoding: .utf8)
    let result = try CLIProcess.run(["ring", "dump", foreign])
    #expect(result.status != 0)
    #expect(result.stdout.isEmpty)
    #expect(result.stderrLines.count == 1)
    #expect(result.stderrLines.first?.contains("not a Crumbs ring") == true)

    // A ring cut short: also one line, and it says so.
    let ringPath = directory.file("cut.ring")
    let ring = try BreadcrumbRing.create(at: ringPath)
    ring.append("x")
    ring.close()
    #expect(truncate(ringPath, 5000) == 0)
    let cut = try CLIProcess.run(["ring", "dump", ringPath, "--json"])
    #expect(cut.status != 0)
    #expect(cut.stdout.isEmpty)
    #expect(cut.stderrLines.count == 1)
    #expect(cut.stderrLines.first?.contains("truncated") == true)

    let missing = try CLIProcess.run(["ring", "dump", directory.file("absent.ring")])
    #expect(missing.status != 0)
    #expect(missing.stderrLines.count == 1)
  }

  // MARK: stress

  @Test func stressLeavesARingWhosePerThreadCountersStrictlyIncrease() throws {
    let directory = TestDirectory()
    let path = directory.file("stress.ring")
    let stress = try CLIProcess.run([
      "ring", "stress", "--file", path, "--threads", "3", "--seconds", "0.3", "--slots", "1024",
    ])
    #expect(stress.status == 0, "\(stress.stderr)")
    let totalLine = try #require(stress.stdoutLines.first)
    let total = try #require(Int(totalLine.split(separator: " ")[1]), "\(totalLine)")
    #expect(stress.stdout.contains("appends/s"))
    #expect(stress.stdout.contains("ns/append"))

    let dump = try CLIProcess.run(["ring", "dump", path, "--json"])
    #expect(dump.status == 0)
    #expect(dump.stderrLines.first?.contains("state clean") == true)
    // Torn slots are possible (a writer preempted mid-slot while its lane laps it) and are
    // never printed; what is printed must be in order.
    let records = try dump.stdoutLines.map { line in
      try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }
    #expect(!records.isEmpty)
    #expect(records.count <= total)
    var lastCounter: [String: Int] = [:]
    var lastSequence: [Int: Int] = [:]
    var threadOfWriter: [String: Int] = [:]
    for record in records {
      let attributes = try #require(record["attributes"] as? [String: String])
      let thread = try #require(attributes["thread"])
      let counter = try #require(attributes["n"].flatMap { Int($0) })
      #expect(["0", "1", "2"].contains(thread))
      #expect(record["message"] as? String == "stress t=\(thread) n=\(counter)")
      if let previous = lastCounter[thread] {
        #expect(counter > previous, "t=\(thread): \(counter) after \(previous)")
      }
      lastCounter[thread] = counter
      let tid = try #require(record["thread"] as? Int)
      let sequence = try #require(record["seq"] as? Int)
      if let previous = lastSequence[tid] { #expect(sequence > previous) }
      lastSequence[tid] = sequence
      if let known = threadOfWriter[thread] { #expect(known == tid) }
      threadOfWriter[thread] = tid
    }
  }

  // MARK: tail

  @Test func tailWithoutFollowPrintsTheNewestTen() throws {
    let directory = TestDirectory()
    let path = directory.file("t.ring")
    let ring = try BreadcrumbRing.create(at: path)
    for number in 0..<25 { ring.append("line \(number)") }
    ring.close(clean: false)
    let result = try CLIProcess.run(["ring", "tail", path, "--json"])
    #expect(result.status == 0)
    let messages = try result.stdoutLines.map { line in
      try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["message"]
        as? String
    }
    #expect(messages == (15..<25).map { "line \($0)" })
  }

  @Test func tailFollowPrintsNewBreadcrumbsOnceAndStopsWhenTheRingIsClosedClean() throws {
    let directory = TestDirectory()
    let path = directory.file("live.ring")
    let ring = try BreadcrumbRing.create(at: path)
    for number in 1...3 { ring.append("before-\(number)") }

    let tail = try CLIProcess([
      "ring", "tail", "-f", "-n", "2", "--json", "--interval-milliseconds", "20", path,
    ])
    var seen: [String] = []
    func nextMessage() throws -> String? {
      guard let line = tail.readLine(timeoutSeconds: 20) else { return nil }
      let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
      return object["message"] as? String
    }
    for _ in 0..<2 { if let message = try nextMessage() { seen.append(message) } }
    #expect(seen == ["before-2", "before-3"])

    ring.append("after-1", level: .warning)
    if let message = try nextMessage() { seen.append(message) }
    ring.append("after-2")
    ring.append("after-3", attributes: ["k": "v"])
    for _ in 0..<2 { if let message = try nextMessage() { seen.append(message) } }
    #expect(seen == ["before-2", "before-3", "after-1", "after-2", "after-3"])

    ring.close(clean: true)
    let status = tail.wait(timeoutSeconds: 20)
    #expect(status == 0)
    #expect(tail.readLine(timeoutSeconds: 5) == nil, "nothing printed twice")
    #expect(tail.readStderr().contains("ring is clean"))
  }

  @Test func tailFollowStopsWhenTheFileDisappears() throws {
    let directory = TestDirectory()
    let path = directory.file("gone.ring")
    let ring = try BreadcrumbRing.create(at: path)
    ring.append("only")
    let tail = try CLIProcess(["ring", "tail", "-f", "--interval-milliseconds", "20", path])
    #expect(tail.readLine(timeoutSeconds: 20)?.contains("only") == true)
    #expect(unlink(path) == 0)
    #expect(tail.wait(timeoutSeconds: 20) == 0)
    #expect(tail.readStderr().contains("gone"))
    ring.close(clean: true)
  }

  static func parseISO8601(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    // Some Foundations read only milliseconds: compare at that precision.
    guard let dot = text.firstIndex(of: "."), text.count > text.distance(from: text.startIndex, to: dot) + 5
    else {
      return nil
    }
    let milliseconds = text[...text.index(dot, offsetBy: 3)] + "Z"
    return formatter.date(from: String(milliseconds))
  }
}

/// The built `crumbs` executable as a child process: stdout and stderr on pipes. `deinit` kills
/// (SIGKILL) and reaps it if the test did not wait for it, so no test leaves a process behind.
final class CLIProcess {
  struct Result {
    var status: Int32
    var stdout: String
    var stderr: String
    var stdoutLines: [String] {
      stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
    var stderrLines: [String] {
      stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
  }

  /// The `crumbs` product: in the same bin directory as the test bundle (`swift test` runs
  /// `<bin>/CrumbsPackageTests.xctest`, an executable on Linux, so /proc/self/exe names it).
  static let executable: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    var own =
      count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    if !own.contains(".xctest") { own = CommandLine.arguments[0] }
    if let range = own.range(of: ".xctest") { own = String(own[..<range.upperBound]) }
    return URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("crumbs").path
  }()

  let pid: pid_t
  private let stdoutDescriptor: Int32
  private let stderrDescriptor: Int32
  private var stdoutBuffer: [UInt8] = []
  private var stdoutClosed = false
  private(set) var exitStatus: Int32?

  /// Runs `crumbs arguments` to completion (killed after `timeoutSeconds`).
  static func run(_ arguments: [String], timeoutSeconds: Double = 60) throws -> Result {
    let process = try CLIProcess(arguments)
    let stdout = process.readAllStdout()
    let stderr = process.readStderr()
    let status = process.wait(timeoutSeconds: timeoutSeconds)
    return Result(status: status, stdout: stdout, stderr: stderr)
  }

  init(_ arguments: [String]) throws {
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
  func readLine(timeoutSeconds: Double) -> String? {
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
  func readAllStdout() -> String {
    while !stdoutClosed { readChunk() }
    defer { stdoutBuffer.removeAll() }
    return String(decoding: stdoutBuffer, as: UTF8.self)
  }

  /// Everything on stderr, up to end of file (call after stdout is drained or closed).
  func readStderr() -> String {
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
  func wait(timeoutSeconds: Double) -> Int32 {
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

enum CLIProcessError: Error {
  case missing(String)
  case spawn(Int32)
}
