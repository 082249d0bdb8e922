// CollectStopTests.swift — `crumbs collect --watch` stops on SIGTERM within 5 s whatever it is
// doing (processing a long backlog, a request in flight), and one directory's backlog or bad
// input never holds up another's reports. Real collector processes, real rings left by ended
// sessions, a real loopback server; waits are on events (the collector's lines, the server's
// requests, process exit) with generous bounds.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import CrumbsTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct CollectStopTests {
  /// Leaves `count` rings in `directory` as processes that ended without a clean exit would
  /// (each becomes an abnormal-termination report), each with `breadcrumbs` breadcrumbs.
  func leaveEndedSessions(in directory: String, count: Int, breadcrumbs: Int) throws -> Set<String> {
    let rings = try RingDirectory(path: directory)
    var options = RingOptions()
    options.slotCount = 4096
    var sessions = Set<String>()
    for index in 0..<count {
      let ring = try rings.createRing(options: options)
      for step in 0..<breadcrumbs {
        ring.append("step \(step) of session \(index)", level: .info, attributes: ["step": "\(step)"])
      }
      sessions.insert(ring.sessionID.description)
      ring.close(clean: false)
    }
    return sessions
  }

  /// Rings still waiting in `directory` (claimed or not).
  func waitingRings(_ directory: String) -> Int {
    ((try? Syscall.directoryEntries(directory + "/rings")) ?? []).filter {
      $0.hasSuffix(".ring") || $0.hasSuffix(".ring.claimed")
    }.count
  }

  /// Waits (woken by each request the server completes, at most `seconds`) until `directory`'s
  /// store holds a sent report of `session`.
  func waitForSent(session: String, in directory: String, server: LoopbackHTTPServer, seconds: Double) throws
    -> Bool
  {
    let store = try ReportStore(directory: directory)
    let deadline = ChildProcess.now() + seconds
    while true {
      if store.list(.sent).reports.contains(where: { $0.report.sessionID == session }) { return true }
      let left = deadline - ChildProcess.now()
      guard left > 0, server.requestReceived.wait(timeout: .now() + left) == .success else {
        return store.list(.sent).reports.contains { $0.report.sessionID == session }
      }
    }
  }

  /// Issue 35 case 5. A directory with a long backlog, one with hostile input, and one where a
  /// client crashes while the collector works through the backlog: the crash is reported in a
  /// few seconds (the backlog is processed a slice at a time, in turn); SIGTERM sent while the
  /// backlog is still being processed ends the collector within 5 s; what it had not processed
  /// is left whole for the next run, which reports every session exactly once.
  @Test func watchStopsWithin5sOnSIGTERMWhileBusyAndABacklogHoldsUpNoOtherDirectory() throws {
    let directory = TestDirectory()
    let busy = directory.file("busy")
    let hostile = directory.file("hostile")
    let good = directory.file("good")
    let backlog = try leaveEndedSessions(in: busy, count: 300, breadcrumbs: 3000)
    // Hostile input beside: a ring that is no ring, a ring name that is a folder, and a
    // rings/ that is a file.
    _ = try RingDirectory(path: hostile)
    try Syscall.writeFileAtomically(
      hostile + "/rings/" + SessionID().description + ".ring", Array(repeating: 0xA5, count: 9000))
    try Syscall.makeDirectory(hostile + "/rings/" + SessionID().description + ".ring")
    let notCrumbs = directory.file("not-crumbs")
    try Syscall.makeDirectory(notCrumbs)
    try Syscall.writeFileAtomically(notCrumbs + "/rings", Array("a file".utf8))
    _ = try RingDirectory(path: good)

    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let collector = try CLIProcess.start([
      "collect", "--watch", "--dir", busy, "--dir", hostile, "--dir", notCrumbs, "--dir", good,
      "--otlp", server.baseURL,
    ])
    defer { if collector.exitCode == nil { kill(collector.pid, SIGKILL) } }
    try #require(collector.value(after: "watching ") != nil, "the collector set up its watches")

    // A crash in the good directory while the backlog is being processed.
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", good], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    let crashedAt = ChildProcess.now()
    #expect(child.wait(seconds: 60) & 0x7f == SIGSEGV)
    let reported = try waitForSent(session: session, in: good, server: server, seconds: 20)
    let latency = ChildProcess.now() - crashedAt
    let left = waitingRings(busy)
    print(
      "collect --watch: a crash beside a backlog of \(backlog.count) sessions: sent after \(Int(latency * 1000)) ms, \(left) of the backlog still waiting"
    )
    #expect(reported, "the good directory's crash was not sent within 20 s while the backlog was processed")

    // Still busy with the backlog (the event: rings left to process), SIGTERM.
    try #require(left > 0, "the backlog was processed before the test could stop the collector mid-way")
    let stopAt = ChildProcess.now()
    kill(collector.pid, SIGTERM)
    let status = collector.wait(timeoutMilliseconds: 60_000)
    let stopTime = ChildProcess.now() - stopAt
    print(
      "collect --watch: SIGTERM while busy → exit in \(Int(stopTime * 1000)) ms (\(waitingRings(busy)) rings left)"
    )
    #expect(collector.exitCode == 0, "wait status \(status)")
    #expect(stopTime < 5, "SIGTERM took \(stopTime) s to end the collector")

    // Nothing half-done: a one-shot run finishes the backlog; every session is processed
    // once (the store keeps the newest reports within its limits: count the collector's lines).
    let restAt = ChildProcess.now()
    let rest = try CLIProcess.run(["collect", "--dir", busy, "--otlp", server.baseURL], timeoutSeconds: 600)
    print("collect: the rest of the backlog in \(Int((ChildProcess.now() - restAt) * 1000)) ms")
    #expect(rest.status == 0, "\(rest.stderr)")
    #expect(waitingRings(busy) == 0)
    let lines = collector.readRemaining().split(separator: "\n") + rest.stdoutLines.map { Substring($0) }
    let ended = lines.filter { $0.hasPrefix(busy + ": ") && $0.contains(" session(s) ended") }.compactMap {
      line in
      Int(line.dropFirst(busy.count + 2).prefix { $0 != " " })
    }
    #expect(ended.reduce(0, +) == backlog.count, "sessions processed per pass: \(ended)")
    let store = try ReportStore(directory: busy)
    let stored = [ReportState.pending, .sent, .dropped].flatMap {
      store.list($0).reports.map(\.report.sessionID)
    }
    #expect(
      stored.count == Set(stored).count && Set(stored).isSubset(of: backlog), "a session reported twice")
  }

  /// Issue 35 case 5. A request in flight to a server that never answers (the request timeout
  /// is 30 s): SIGTERM ends the collector within 5 s, and the report stays pending for the
  /// next run.
  @Test func watchStopsWithin5sOnSIGTERMDuringARequestThatNeverEnds() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer { _, _ in .stall(seconds: 120) }
    defer { server.stop() }
    let collector = try CLIProcess.start(["collect", "--watch", "--dir", crumbs, "--otlp", server.baseURL])
    defer { if collector.exitCode == nil { kill(collector.pid, SIGKILL) } }
    try #require(collector.value(after: "watching ") != nil, "the collector set up its watches")
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    #expect(child.wait(seconds: 60) & 0x7f == SIGSEGV)
    // The event: the server has the request, and keeps it unanswered.
    try #require(
      server.requestReceived.wait(timeout: .now() + 60) == .success, "no request reached the server")

    let stopAt = ChildProcess.now()
    kill(collector.pid, SIGTERM)
    let status = collector.wait(timeoutMilliseconds: 200_000)
    let stopTime = ChildProcess.now() - stopAt
    print("collect --watch: SIGTERM during a request in flight → exit in \(Int(stopTime * 1000)) ms")
    #expect(collector.exitCode == 0, "wait status \(status)")
    #expect(stopTime < 5, "SIGTERM took \(stopTime) s to end the collector")
    let pending = try ReportStore(directory: crumbs).list(.pending).reports.map(\.report.sessionID)
    #expect(pending == [session], "the report must stay pending for the next run")
  }
}
