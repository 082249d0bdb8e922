// ServerGuideTests.swift — the README's server, proven to work as written: the Swift block after
// README.md's `server-snippet` marker becomes the main.swift of Tests/Consumers/ServerGuide (a
// package of its own: Crumbs by path, Hummingbird 2, public products only), which is built, and
// run as a container would run it — configured by its environment alone — then:
//   - it answers a request on the port it listens on (PORT=0: the kernel's pick, read from the
//     line Hummingbird logs through the snippet's StreamLogHandler), and CrumbsMiddleware's
//     breadcrumbs name the request by its route;
//   - the route's non-fatal report reaches a loopback OTLP server through CRUMBS_OTLP_ENDPOINT
//     (Crumbs' own exporter: no swift-otel), carrying CRUMBS_APP_VERSION and the trace of the
//     request's `traceparent` (made inside the request's operation);
//   - a SIGTERM ends it gracefully (exit 0), and its ring says how: terminated by SIGTERM, with
//     the route's breadcrumb, a swift-log event (BreadcrumbLogHandler) and "SIGTERM received";
//   - `crumbs reports list` with CRUMBS_DIRECTORY and no flag lists the report.
// A README edit that breaks the snippet (an API renamed, the marker dropped) fails here.
// Every wait is on an event (a line, a request, the process's exit), bounded with a wide margin.

import Crumbs
import CrumbsDelivery
import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Dispatch
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ServerGuideTests {
  @Test func theReadmesServerBuildsServesReportsAndEndsOnSIGTERM() throws {
    let directory = TestDirectory()
    let snippet = try ConsumerPackage.readmeBlock(after: "server-snippet")
    let executable = try ConsumerPackage.build(
      "ServerGuide", in: directory, files: ["Sources/ServerGuide/main.swift": snippet])
    let collector = try LoopbackHTTPServer(status: 200)
    defer { collector.stop() }
    let crumbs = directory.file("crumbs")
    // What a container would set, and none of the test process's own CRUMBS_* and OTEL_*.
    let cleared = CrumbsEnvironment.processEnvironment().mapValues { _ in "" }
    let container = [
      "CRUMBS_DIRECTORY": crumbs, "CRUMBS_APP_VERSION": "1.4.2", "CRUMBS_OTLP_ENDPOINT": collector.baseURL,
      "SWIFT_BACKTRACE": "enable=no", "HOST": "127.0.0.1", "PORT": "0",
    ]
    let server = try ChildProcess(
      executable, [], environment: cleared.merging(container) { $1 }, standardError: .pipe)

    // Hummingbird says where it listens once it does ("… Server started and listening on
    // 127.0.0.1:PORT"); the first build's first run may be slow on a busy machine.
    let announcement = "Server started and listening on "
    var output: [String] = []
    let deadline = ChildProcess.now() + 300
    while let line = server.readLine(seconds: max(0, deadline - ChildProcess.now())) {
      output.append(line)
      if line.contains(announcement) { break }
    }
    let address = output.last.flatMap { line in
      line.firstRange(of: announcement).map { line[$0.upperBound...] }
    }
    let port = try #require(
      address.flatMap { $0.split(separator: ":").last.flatMap { Int($0) } },
      "the server never listened: \(output) \(server.readStderr(seconds: 5))")

    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    var request = DeliveryRequest(
      destination: "test", reportID: "-", url: "http://127.0.0.1:\(port)/orders/0",
      headers: [HTTPHeader("traceparent", traceparent)], body: [])
    request.method = "GET"
    let answer = try CurlTransport(timeout: 60).send(request).get()
    #expect(answer.status == 200)
    #expect(String(decoding: answer.body, as: UTF8.self) == "order 0\n")

    // The route's report, delivered by the client's own OTLP exporter while the server runs.
    var report: (record: [String: Any], resource: [String: Any])?
    let reportDeadline = ChildProcess.now() + 120
    while report == nil, ChildProcess.now() < reportDeadline {
      _ = collector.requestReceived.wait(timeout: .now() + max(0, reportDeadline - ChildProcess.now()))
      for received in collector.requests where received.target == "/v1/logs" {
        let decoded = try decodeOTLP(received.body)
        let records = decoded["records"] as? [[String: Any]] ?? []
        if let record = records.first(where: {
          attributes($0)["crumbs.report.kind"] as? String == "non_fatal"
        }) {
          report = (record, decoded["resource"] as? [String: Any] ?? [:])
        }
      }
    }
    let delivered = try #require(report, "no non-fatal report reached \(collector.baseURL)")
    let reported = attributes(delivered.record)
    #expect(reported["order.id"] as? String == "0", "\(reported)")
    // Made inside the request's operation (CrumbsMiddleware): it carries the caller's trace.
    #expect(
      delivered.record["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736", "\(delivered.record)")
    #expect(delivered.resource["service.version"] as? String == "1.4.2", "\(delivered.resource)")
    let reportID = try #require(reported["crumbs.report.id"] as? String, "\(reported)")

    server.signal(SIGTERM)
    let rest = server.readRemaining(seconds: 120)
    server.wait(seconds: 120)
    #expect(server.exitCode == 0, "the graceful shutdown did not end in exit 0: \(rest)")

    // How the session ended, as the next launch will read it.
    let rings = try Syscall.directoryEntries(crumbs + "/rings").filter { $0.hasSuffix(".ring") }
    try #require(rings.count == 1, "\(rings)")
    let contents = try RingReader.read(file: crumbs + "/rings/" + rings[0])
    #expect(contents.header.state == .terminatedBySignal)
    #expect(contents.header.endSignal == SIGTERM)
    let breadcrumbs = contents.breadcrumbs
    let messages = breadcrumbs.map(\.message)
    #expect(messages.filter { $0 == "SIGTERM received" }.count == 1, "\(messages)")
    let lookup = breadcrumbs.first { $0.message == "order lookup" }
    #expect(
      lookup?.type == .http && lookup?.attributes.contains { $0.key == "order.id" && $0.value == "0" } == true
    )
    // The snippet's CrumbsMiddleware: a breadcrumb at the request's start, named by its route.
    let began = breadcrumbs.first { $0.message == "GET /orders/{id}" }
    #expect(
      began?.type == .http && began?.attributes.contains { $0.key == "url.path" } == true, "\(messages)")
    #expect(messages.contains("GET /orders/{id} answered"), "\(messages)")
    let logged = breadcrumbs.first { $0.message.hasPrefix(announcement) }
    #expect(logged?.type == .log, "the log event is no breadcrumb: \(messages)")

    // In the container, the command line needs no flag.
    let list = try CLIProcess.run(
      ["reports", "list"], environment: cleared.merging(["CRUMBS_DIRECTORY": crumbs]) { $1 },
      timeoutSeconds: 120)
    #expect(list.status == 0, "\(list.stderr)")
    #expect(list.stdout.contains(reportID), "\(list.stdout)")
  }

  func attributes(_ record: [String: Any]) -> [String: Any] { record["attributes"] as? [String: Any] ?? [:] }
}
