// ClosingSpanTests.swift — the spans a death cut, closed (issue 38, point 4): a real child holds
// traced operations on three threads (one with a remote parent, an e-mail address in its name
// and a password attribute) and one untraced, and crashes in a traced request of its own, or is
// SIGKILLed. The next launch — `crumbs collect` and a starting client racing for the session —
// sends one span per traced operation to a loopback OTLP server's `/v1/traces`, decoded by the
// official OTLP classes: its own ids, parent, name, kind and start, ended at the death, status
// ERROR with the death, redacted, linked to the crash record. Later launches send none again.
// Waits are on the child's pipe, process exits and server requests, bounded.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct ClosingSpanTests {
  /// Runs the `closing-spans` child to its death; returns the crashing thread's tid (crash).
  func die(_ crumbs: String, mode: String) throws -> (orderThread: String, crashThread: String?) {
    let child = try ChildProcess(
      ChildProcess.testChild, ["closing-spans", crumbs, mode], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let orderThread = try #require(child.value(after: "order-thread "))
    #expect(child.readLine(seconds: 120) == "held")
    var crashThread: String?
    if mode == "kill" {
      #expect(child.readLine(seconds: 120) == "ready")
      child.signal(SIGKILL)
    } else {
      crashThread = child.value(after: "crash-thread ")
    }
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == (mode == "kill" ? SIGKILL : SIGSEGV))
    return (orderThread, crashThread)
  }

  /// The next launch twice over: `crumbs collect` and a client (a child process that starts,
  /// flushes and exits) at once, then a last collector for whatever the client left pending.
  func nextLaunch(_ crumbs: String, _ server: LoopbackHTTPServer) throws {
    let collector = try CLIProcess.start(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    let client = try ChildProcess(
      ChildProcess.testChild, ["client-cli-flush", crumbs, server.baseURL, "60"],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    #expect(client.wait(seconds: 180) == 0)
    // A one-shot collector that raced the client may leave work to it (a report the client was
    // delivering, or held pending while it delivered): exit status 1, never a signal. The last
    // collector below sends whatever is left, and must finish clean.
    let status = collector.wait(timeoutMilliseconds: 180_000)
    let output = collector.readRemaining()
    #expect(status == 0 || status == 256, "collect: \(output)")
    let last = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    #expect(last.status == 0, "stderr: \(last.stderr)")
  }

  /// The crash record the server received (the one with open operations).
  func crashRecord(_ server: LoopbackHTTPServer) throws -> [String: Any] {
    let records = try server.requests.filter { $0.target.hasSuffix("/v1/logs") }.flatMap {
      try decodeOTLP($0.body)["records"] as? [[String: Any]] ?? []
    }
    let crashes = records.filter { attributes($0)["crumbs.open_operations.count"] != nil }
    #expect(crashes.count == 1, "one crash record")
    return try #require(crashes.first)
  }

  func spans(_ spans: [[String: Any]], named name: String) -> [[String: Any]] {
    spans.filter { $0["name"] as? String == name }
  }

  @Test func aCrashClosesEveryTracedOperationOnce() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let (orderThread, crashThread) = try die(crumbs, mode: "crash")
    try nextLaunch(crumbs, server)

    let record = try crashRecord(server)
    let recordAttributes = attributes(record)
    let reportID = try #require(recordAttributes["crumbs.report.id"] as? String)
    #expect(recordAttributes["crumbs.open_operations.count"] as? Int == 4)
    #expect(recordAttributes["crumbs.open_operations.crashing.name"] as? String == "POST /v1/crash")
    let listed = try #require(recordAttributes["crumbs.open_operations"] as? [[String: Any]])
    // Redacted on the record as in the spans: the crashed session's own rules.
    #expect(!String(describing: record).contains("alice@example.com"))
    #expect(!String(describing: record).contains("hunter2"))

    let received = try receivedSpans(server)
    #expect(received.count == 3, "one span per traced operation: \(received.map { $0["name"] ?? "" })")
    let order = try #require(spans(received, named: "GET /v1/users/[redacted]/orders").first)
    #expect(spans(received, named: "orders.export").count == 1)
    #expect(spans(received, named: "POST /v1/crash").count == 1)
    #expect(
      spans(received, named: "untraced.job").isEmpty && spans(received, named: "GET /v1/finished").isEmpty)

    #expect(order["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
    #expect(order["span_id"] as? String == "00f067aa0ba902b7")
    #expect(order["parent_span_id"] as? String == "b7ad6b7169203331")
    #expect(order["kind"] as? Int == 2)
    let orderAttributes = try #require(order["attributes"] as? [String: Any])
    #expect(orderAttributes["url.path"] as? String == "/v1/users/[redacted]/orders")
    #expect(orderAttributes["password"] as? String == "[redacted]")
    #expect(orderAttributes["crumbs.report.id"] as? String == reportID)
    #expect(String(describing: orderAttributes["thread.id"] ?? "") == orderThread)
    let export = try #require(spans(received, named: "orders.export").first)
    #expect(export["trace_id"] as? String == "5bf92f3577b34da6a3ce929d0e0e4737")
    #expect(export["parent_span_id"] as? String == "" && export["kind"] as? Int == 1)
    let crash = try #require(spans(received, named: "POST /v1/crash").first)
    #expect(crash["parent_span_id"] as? String == "c7ad6b7169203332")
    #expect((crash["attributes"] as? [String: Any])?["crumbs.operation.on_crashing_thread"] as? Bool == true)
    #expect(String(describing: (crash["attributes"] as? [String: Any])?["thread.id"] ?? "") == crashThread)

    // Each starts when its operation began and ends at the death, as the record lists them.
    for span in received {
      let status = try #require(span["status"] as? [String: Any])
      #expect(status["code"] as? Int == 2 && status["message"] as? String == "crashed: SIGSEGV")
      let entry = try #require(listed.first { $0["span_id"] as? String == span["span_id"] as? String })
      let start = try #require(UInt64(span["start_time_unix_nano"] as? String ?? ""))
      let end = try #require(UInt64(span["end_time_unix_nano"] as? String ?? ""))
      #expect(start == UInt64(entry["start_time_unix_nano"] as? Int ?? -1))
      #expect(end == start + UInt64(entry["age_ns"] as? Int ?? -1))
      #expect(end >= start && end - start < 600_000_000_000)
      #expect(end <= UInt64(record["time_unix_nano"] as? String ?? "") ?? 0 + 1_000_000_000)
      // Linked to the crash record: its trace and span (the breadcrumb's child span of the request).
      let link = try #require((span["links"] as? [[String: Any]])?.first)
      #expect(link["trace_id"] as? String == record["trace_id"] as? String)
      #expect(
        link["span_id"] as? String == "30f067aa0ba902ba" && record["span_id"] as? String == "30f067aa0ba902ba"
      )
      #expect((link["attributes"] as? [String: Any])?["crumbs.report.id"] as? String == reportID)
    }

    // Later launches send none again.
    let before = server.requests.count
    try nextLaunch(crumbs, server)
    #expect(try receivedSpans(server).count == 3, "no span sent twice")
    #expect(server.requests.dropFirst(before).allSatisfy { !$0.target.hasSuffix("/v1/traces") })
    #expect(((try? Syscall.directoryEntries(crumbs + "/closing-spans")) ?? []).isEmpty)
  }

  @Test func aSIGKILLClosesTheTracedOperationsOnce() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    _ = try die(crumbs, mode: "kill")
    try nextLaunch(crumbs, server)
    let record = try crashRecord(server)
    #expect(attributes(record)["crumbs.open_operations.count"] as? Int == 3)
    let received = try receivedSpans(server)
    #expect(
      received.compactMap { $0["name"] as? String }.sorted() == [
        "GET /v1/users/[redacted]/orders", "orders.export",
      ])
    for span in received {
      let status = try #require(span["status"] as? [String: Any])
      #expect(status["code"] as? Int == 2)
      #expect((status["message"] as? String)?.hasPrefix("killed: ") == true, "\(status)")
      #expect((span["attributes"] as? [String: Any])?["crumbs.operation.on_crashing_thread"] == nil)
    }
    try nextLaunch(crumbs, server)
    #expect(try receivedSpans(server).count == 2, "no span sent twice")
  }

  /// `crumbs collect` configured by the OTEL_* environment alone: each signal's request carries
  /// the generic headers and its own over them (OTEL_EXPORTER_OTLP_{LOGS,TRACES}_HEADERS), and
  /// the session counts go to OTEL_EXPORTER_OTLP_METRICS_ENDPOINT.
  @Test func eachSignalCarriesItsOwnHeadersFromTheEnvironment() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    _ = try die(crumbs, mode: "kill")
    let collect = try CLIProcess.run(
      ["collect", "--dir", crumbs],
      environment: [
        "CRUMBS_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
        "OTEL_EXPORTER_OTLP_ENDPOINT": server.baseURL,
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": server.baseURL + "/custom/metrics",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20all,X-Dataset=generic",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "X-Dataset=crashes",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "X-Dataset=spans",
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "",
      ])
    #expect(collect.status == 0, "stderr: \(collect.stderr)")
    let logs = server.requests.filter { $0.target == "/v1/logs" }
    let traces = server.requests.filter { $0.target == "/v1/traces" }
    let metrics = server.requests.filter { $0.target == "/custom/metrics" }
    #expect(!logs.isEmpty && !traces.isEmpty && !metrics.isEmpty, "\(server.requests.map(\.target))")
    #expect(try receivedSpans(server).count == 2)
    for request in logs + traces + metrics {
      #expect(request.headers["authorization"] == "Bearer all", "\(request.target)")
    }
    #expect(logs.allSatisfy { $0.headers["x-dataset"] == "crashes" })
    #expect(traces.allSatisfy { $0.headers["x-dataset"] == "spans" })
    #expect(metrics.allSatisfy { $0.headers["x-dataset"] == "generic" })
  }

  /// A collector that has no `/v1/traces` (404): the crash report is delivered all the same, and
  /// the spans are not tried again by later launches.
  @Test func aCollectorWithoutTracesStillGetsTheReport() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let server = try LoopbackHTTPServer { _, request in
      request.target.hasSuffix("/v1/traces") ? .respond(404) : .respond(200)
    }
    defer { server.stop() }
    _ = try die(crumbs, mode: "crash")
    let run = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    #expect(run.status == 0, "stderr: \(run.stderr)")
    _ = try crashRecord(server)
    #expect(server.requests.filter { $0.target.hasSuffix("/v1/traces") }.count == 1)
    let again = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", server.baseURL])
    #expect(again.status == 0)
    #expect(server.requests.filter { $0.target.hasSuffix("/v1/traces") }.count == 1, "dropped, not retried")
  }
}
