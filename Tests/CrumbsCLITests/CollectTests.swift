// CollectTests.swift — `crumbs collect` run as a real process against real crashing and killed
// children and a real loopback OTLP server, what it sent decoded by the official classes
// (decode_otlp.py). Waits are on events: the server's requests, the children's lines and exits,
// the collector's "watching" line. Latencies are measured and printed, asserted only loosely (a
// busy 2-core CI machine).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReports
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What a loopback server (answering 200) received, decoded once per request, each request
/// stamped with the moment the test first saw it complete (woken by `requestReceived`).
final class ServerArrivals: @unchecked Sendable {
  let server: LoopbackHTTPServer
  /// Decoded records of the first `decoded.count` requests (test thread only).
  private var decoded: [[(time: Double, record: [String: Any])]] = []

  init() throws { server = try LoopbackHTTPServer(status: 200) }

  var count: Int { server.requests.count }

  /// The OTLP records of every request so far, with the moment each request was seen.
  func records() throws -> [(time: Double, record: [String: Any])] {
    let seen = ChildProcess.now()
    for request in server.requests.dropFirst(decoded.count) {
      decoded.append((try decodeOTLP(request.body)["records"] as? [[String: Any]] ?? []).map { (seen, $0) })
    }
    return decoded.flatMap { $0 }
  }

  /// Crash-report records (those with a report id), with the moment they were seen.
  func reports() throws -> [(time: Double, record: [String: Any])] {
    try records().filter { attributes($0.record)["crumbs.report.id"] != nil }
  }

  /// Waits (at most `seconds`, woken by each request) for a report of `session`.
  func waitForReport(session: String, seconds: Double) throws -> (time: Double, record: [String: Any])? {
    let deadline = ChildProcess.now() + seconds
    while true {
      if let found = try reports().first(where: { attributes($0.record)["session.id"] as? String == session })
      {
        return found
      }
      let left = deadline - ChildProcess.now()
      guard left > 0, server.requestReceived.wait(timeout: .now() + left) == .success else {
        return try reports().first { attributes($0.record)["session.id"] as? String == session }
      }
    }
  }
}

func attributes(_ record: [String: Any]) -> [String: Any] { record["attributes"] as? [String: Any] ?? [:] }

@Suite(.serialized) struct CollectTests {
  /// A child that starts a client in `directory` and crashes; returns its session id.
  func crashChild(_ directory: String) throws -> (session: String, crashedAt: Double) {
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", directory], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    #expect(child.value(after: "crashing") != nil)
    let crashedAt = ChildProcess.now()
    let status = child.wait(seconds: 60)
    #expect(status & 0x7f == SIGSEGV, "the child died by SIGSEGV (wait status \(status))")
    return (session, crashedAt)
  }

  /// (a) A child crashes and nothing starts again: one `crumbs collect` delivers its report, its
  /// session is counted and summarised as the client would, and a second run sends nothing.
  @Test func oneShotDeliversACrashOnceAndCountsItsSession() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    let server = arrivals.server
    defer { server.stop() }
    let (session, _) = try crashChild(crumbs)

    let first = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    #expect(first.status == 0, "stdout: \(first.stdout)\nstderr: \(first.stderr)")
    let reports = try arrivals.reports()
    #expect(reports.count == 1)
    let report = try #require(reports.first).record
    #expect(attributes(report)["session.id"] as? String == session)
    #expect(attributes(report)["crumbs.report.kind"] as? String == "crash")
    #expect(attributes(report)["crumbs.signal.name"] as? String == "SIGSEGV")
    // Counted and summarised as the client counts it (one function builds both processors).
    let summaries = try arrivals.records().filter {
      $0.record["event_name"] as? String == "crumbs.session.summary"
    }
    #expect(summaries.count == 1)
    #expect(summaries.first.map { attributes($0.record)["crumbs.session.end"] as? String } == "crash")
    let metrics =
      try JSONSerialization.jsonObject(
        with: Data(try Syscall.readFile(crumbs + "/session-metrics.json"))) as? [String: Any]
    #expect(metrics?["crashedSessions"] as? Int == 1)

    let requestsBefore = arrivals.count
    let second = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    #expect(second.status == 0, "stderr: \(second.stderr)")
    #expect(arrivals.count == requestsBefore, "the second run sent nothing new")
  }

  /// Issue 38, point 3 (d): a child holding operations is SIGKILLed and never starts again; one
  /// `crumbs collect` makes and delivers its report, which lists the operations open at the
  /// death (oldest first, with trace ids and threads), and `crumbs reports show` prints them.
  @Test func oneShotReportsTheOperationsOpenWhenAProcessWasKilled() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }
    let child = try ChildProcess(ChildProcess.testChild, ["ledger-death", crumbs, "kill"])
    let orderThread = try #require(child.value(after: "order-thread ").flatMap(UInt32.init))
    #expect(child.value(after: "ready") != nil)
    child.signal(SIGKILL)
    child.wait()

    let result = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", arrivals.server.baseURL])
    #expect(result.status == 0, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
    // The report went to /v1/logs (closing spans for its open operations go to /v1/traces).
    #expect(arrivals.server.requests.contains { $0.target == "/v1/logs" })
    let store = try ReportStore(directory: crumbs)
    let stored = try #require(
      ReportState.allCases.flatMap { store.list($0).reports }.first { $0.report.kind == .abnormalTermination }
    )
    let open = try #require(stored.report.openOperations)
    #expect(open.operations.map(\.name).sorted() == ["GET /v1/orders/:id", "orders.export"])
    let order = try #require(open.operations.first { $0.name == "GET /v1/orders/:id" })
    #expect(order.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
    #expect(order.threadID == orderThread)
    let shown = try CLIProcess.run(["reports", "show", stored.report.id, "--dir", crumbs])
    #expect(shown.status == 0, "\(shown.stderr)")
    #expect(
      shown.stdoutLines.contains { $0.hasPrefix("Open operations") && $0.contains("2 open at the death") },
      "\(shown.stdout)")
    #expect(shown.stdoutLines.contains { $0.contains("GET /v1/orders/:id") && $0.contains("trace 4bf92f35") })
  }

  /// Without --otlp or --backtrace the destination is the OTEL_* environment's, read as the
  /// client reads it (OTEL_EXPORTER_OTLP_ENDPOINT + /v1/logs and /v1/metrics).
  @Test func oneShotReadsTheOTELEnvironment() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }
    let (session, _) = try crashChild(crumbs)
    let result = try CLIProcess.run(
      ["collect", "--dir", crumbs],
      environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": arrivals.server.baseURL, "OTEL_SERVICE_NAME": "collector"])
    #expect(result.status == 0, "stderr: \(result.stderr)")
    #expect(try arrivals.reports().map { attributes($0.record)["session.id"] as? String } == [session])
    // Reports and summaries to /v1/logs, the session counts to /v1/metrics (ReleaseHealthTests).
    #expect(arrivals.server.requests.allSatisfy { $0.target == "/v1/logs" || $0.target == "/v1/metrics" })
    #expect(arrivals.server.requests.contains { $0.target == "/v1/logs" })
  }

  /// A damaged ring is quarantined with its reason, as the client's next start does it, and
  /// named on stderr; the run still succeeds (nothing was left to deliver).
  @Test func oneShotQuarantinesADamagedRing() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    try Syscall.makeDirectory(crumbs)
    try Syscall.makeDirectory(crumbs + "/rings")
    try Syscall.writeFileAtomically(crumbs + "/rings/damaged.ring", Array(repeating: 0x78, count: 4096))
    let result = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", "http://127.0.0.1:9"])
    #expect(result.status == 0, "stderr: \(result.stderr)")
    #expect(result.stderr.contains("quarantined"))
    let quarantined = try Syscall.directoryEntries(crumbs + "/quarantine")
    #expect(quarantined.contains { $0.hasPrefix("damaged.ring") && !$0.hasSuffix(".reason") })
    #expect(quarantined.contains { $0.hasSuffix(".reason") })
    #expect(!Syscall.fileExists(crumbs + "/rings/damaged.ring"))
  }

  /// A directory that is not there is a failure (exit 1) in one-shot mode, said in words.
  @Test func oneShotFailsOnAMissingDirectory() throws {
    let directory = TestDirectory()
    let result = try CLIProcess.run([
      "collect", "--dir", directory.file("nowhere"), "--otlp", "http://127.0.0.1:9",
    ])
    #expect(result.status == 1)
    #expect(result.stderr.contains("no such directory"))
  }

  /// (b) A watching collector: a crash, then a SIGKILL, each reported while the app stays dead
  /// (latency printed; asserted within a generous bound); a collector beside starting clients
  /// makes one report per session; SIGTERM ends it promptly with status 0. The Crumbs directory
  /// does not exist when the collector starts.
  @Test func watchReportsCrashesAndKillsAtOnceBesideClientsAndStopsOnSIGTERM() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    let server = arrivals.server
    defer { server.stop() }
    let collector = try CLIProcess.start(["collect", "--watch", "--dir", crumbs, "--otlp", server.baseURL])
    defer { if collector.exitCode == nil { kill(collector.pid, SIGKILL) } }
    try #require(collector.value(after: "watching ") != nil, "the collector set up its watches")

    // A crash.
    let crash = try crashChild(crumbs)
    let crashReport = try #require(try arrivals.waitForReport(session: crash.session, seconds: 30))
    #expect(attributes(crashReport.record)["crumbs.report.kind"] as? String == "crash")
    let crashLatency = crashReport.time - crash.crashedAt
    print("collect --watch: crash → report at the server in \(Int(crashLatency * 1000)) ms")

    // A SIGKILL.
    let waiting = try ChildProcess(
      ChildProcess.testChild, ["client-wait", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let killedSession = try #require(waiting.value(after: "ready "))
    let killedAt = ChildProcess.now()
    kill(waiting.pid, SIGKILL)
    waiting.wait(seconds: 60)
    let killReport = try #require(try arrivals.waitForReport(session: killedSession, seconds: 30))
    #expect(attributes(killReport.record)["crumbs.report.kind"] as? String == "abnormal_termination")
    let killLatency = killReport.time - killedAt
    print("collect --watch: SIGKILL → report at the server in \(Int(killLatency * 1000)) ms")
    // Loose: the goal is 2 s; a busy CI machine gets ten times that.
    #expect(crashLatency < 20 && killLatency < 20)

    // Beside starting clients: each crash is claimed by the collector or by the client that
    // starts right after it, never both.
    var crashed: [String] = []
    var clients: [ChildProcess] = []
    for _ in 0..<3 {
      crashed.append(try crashChild(crumbs).session)
      clients.append(
        try ChildProcess(
          ChildProcess.testChild, ["client-cli-flush", crumbs, server.baseURL, "30"],
          environment: ["SWIFT_BACKTRACE": "enable=no"]))
    }
    for client in clients { #expect(client.wait(seconds: 120) == 0) }
    for session in crashed { #expect(try arrivals.waitForReport(session: session, seconds: 30) != nil) }

    // SIGTERM: a clean, prompt end.
    let stopAt = ChildProcess.now()
    kill(collector.pid, SIGTERM)
    let status = collector.wait(seconds: 30)
    #expect(status == 0, "exit status \(status)")
    print("collect --watch: SIGTERM → exit in \(Int((ChildProcess.now() - stopAt) * 1000)) ms")

    // Whatever is still pending, sent now: a client that flushed before its report was stored,
    // or one whose background pass had an attempt in flight when it returned from main. That
    // attempt was counted before it went out (DeliveryState.swift), with its retry time, so the
    // report waits for its backoff: `reports send` ignores the schedule. Such a request may have
    // reached the server before the process ended: delivery is at least once, so the same
    // report may arrive twice; one session never has two reports (one claim per session).
    _ = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    _ = try CLIProcess.run(["reports", "send", "--dir", crumbs, "--otlp", server.baseURL])
    let reports = try arrivals.reports()
    for session in crashed + [crash.session, killedSession] {
      let ids = Set(
        reports.filter { attributes($0.record)["session.id"] as? String == session }
          .compactMap { attributes($0.record)["crumbs.report.id"] as? String })
      #expect(
        ids.count == 1,
        "session \(session): reports \(ids.sorted()); \(whereIsTheReport(of: session, in: crumbs))")
    }
  }

  /// Where the store holds `session`'s reports (folder and delivery history), or that the
  /// session's ring is still waiting: what a failure of the watching test needs to say.
  func whereIsTheReport(of session: String, in crumbs: String) -> String {
    guard let store = try? ReportStore(directory: crumbs) else { return "no store" }
    var found: [String] = []
    for state in ReportState.allCases {
      for stored in store.list(state).reports where stored.report.sessionID == session {
        let delivery = (try? stored.readFile(DeliveryState.fileName, limit: 1 << 16)) ?? []
        found.append("\(state) \(stored.report.id) delivery \(String(decoding: delivery, as: UTF8.self))")
      }
    }
    let rings = ((try? Syscall.directoryEntries(crumbs + "/rings")) ?? []).filter { $0.hasPrefix(session) }
    return "stored: \(found); rings/: \(rings)"
  }

  /// A collector in another pid namespace than the app (a Kubernetes sidecar without
  /// `shareProcessNamespace`): the ring's header names a pid that means nothing here, so the
  /// writer's flock decides; a crash and a SIGKILL are still reported, once. Needs root (for
  /// `unshare --pid`).
  @Test(.enabled(if: getuid() == 0 && Syscall.fileExists("/usr/bin/unshare")))
  func watchReportsAcrossPidNamespaces() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    let server = arrivals.server
    defer { server.stop() }
    let collector = try CLIProcess.start(["collect", "--watch", "--dir", crumbs, "--otlp", server.baseURL])
    defer { if collector.exitCode == nil { kill(collector.pid, SIGKILL) } }
    try #require(collector.value(after: "watching ") != nil)

    // unshare's child is pid 1 of a new pid namespace: it crashes there.
    let crashing = try ChildProcess(
      "/usr/bin/unshare", ["--pid", "--fork", ChildProcess.testChild, "client-crash", crumbs],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let crashed = try #require(crashing.value(after: "session "))
    crashing.wait(seconds: 60)
    let crash = try #require(try arrivals.waitForReport(session: crashed, seconds: 30))
    #expect(attributes(crash.record)["crumbs.report.kind"] as? String == "crash")

    // Killing pid 1 of a namespace (from here, through unshare's pid: it forwards nothing, so
    // the namespace's init is found by its parent) ends it by SIGKILL.
    let waiting = try ChildProcess(
      "/usr/bin/unshare", ["--pid", "--fork", ChildProcess.testChild, "client-wait", crumbs],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let killed = try #require(waiting.value(after: "ready "))
    let children = try Syscall.readFile("/proc/\(waiting.pid)/task/\(waiting.pid)/children")
    let initPID = try #require(
      Int32(String(decoding: children, as: UTF8.self).split(separator: " ").first ?? ""))
    kill(initPID, SIGKILL)
    waiting.wait(seconds: 60)
    let killReport = try #require(try arrivals.waitForReport(session: killed, seconds: 30))
    #expect(attributes(killReport.record)["crumbs.report.kind"] as? String == "abnormal_termination")

    let ids = try arrivals.reports().compactMap { attributes($0.record)["crumbs.report.id"] as? String }
    #expect(ids.count == 2)
    kill(collector.pid, SIGTERM)
    #expect(collector.wait(seconds: 30) == 0)
  }
}
