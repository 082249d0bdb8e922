// ShortLivedAndServiceTests.swift — the two shapes of program docs/client.md's "Use it in a CLI"
// and "Use it in a server" sections describe, run as real processes:
//   - a CLI that crashed last time, reports a failure this time and returns from main right
//     after `flush(timeout:)`: both reports reach a real loopback server before it exits;
//   - a server built from Tests/Consumers/ServiceConsumer (its own package, Crumbs' public
//     products only, and linking no libcurl or FoundationNetworking) under
//     swift-service-lifecycle's ServiceGroup: each SIGTERM leaves one
//     "SIGTERM received" breadcrumb, a graceful shutdown, and a session the next launch records
//     as terminated by SIGTERM, not as clean and not as a crash;
//   - a CLI's exit hooks: OpenSSL, loaded with libcurl, is still usable in them (its own exit
//     hook used to tear it down under the uploader's thread).
// Every wait is on an event (a line, a request, the process's exit), bounded with a wide margin.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ShortLivedAndServiceTests {
  /// The CLI: a crash last launch, a failure now, flush, return.
  func runFlushingCLI(async: Bool) throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer { _, _ in .respond(200) }
    defer { server.stop() }
    // The last launch crashed.
    let crashed = try ChildProcess(ChildProcess.testChild, ["client-crash-at-once", directory.path])
    crashed.wait(seconds: 120)
    #expect(crashed.terminatingSignal == SIGSEGV)

    let cli = try ChildProcess(
      ChildProcess.testChild,
      ["client-cli-flush", directory.path, server.baseURL + "/v1/logs", "120"] + (async ? ["async"] : []))
    let line = try #require(cli.value(after: "flushed ", seconds: 300))
    #expect(cli.wait(seconds: 60) == 0)
    #expect(line.hasPrefix("delivered="))
    #expect(line.contains("pending=0 timed-out=false busy=false"), "\(line)")
    // Both reports reached the server before the process returned from main: the crash the
    // last launch left (processed by this launch) and this launch's non-fatal one.
    // (Besides them, the session summaries go to the same OTLP endpoint.)
    let bodies = server.requests.map { String(decoding: $0.body, as: UTF8.self) }
    #expect(bodies.filter { $0.contains("cli step failed") }.count == 1, "\(bodies.count) requests")
    #expect(bodies.filter { $0.contains("SIGSEGV") }.count == 1, "\(bodies.count) requests")
    let store = try ReportStore(directory: directory.path)
    #expect(store.list(.pending).reports.isEmpty)
    #expect(store.list(.sent).reports.count == 2)
  }

  @Test func aCLIThatFlushesBeforeReturningDeliversTheLastCrashAndItsOwnReport() throws {
    try runFlushingCLI(async: false)
  }

  @Test func theAsyncFlushDoesTheSame() throws {
    try runFlushingCLI(async: true)
  }

  /// OpenSSL, as libcurl loads it for the uploader, stays usable through the program's exit
  /// hooks: its own hook (OPENSSL_cleanup, registered by default when it is initialised) ran
  /// before the hooks registered earlier, while the uploader's thread could still be in a TLS
  /// exchange — a crash at exit in a short-lived program that did nothing wrong.
  @Test func tlsStaysUsableUntilAShortLivedProgramHasExited() throws {
    let directory = TestDirectory()
    let server = try LoopbackHTTPServer { _, _ in .respond(200) }
    defer { server.stop() }
    // Plain http needs no libcurl: through libcurl, as https goes (OpenSSL stays loaded once
    // libcurl is unloaded after the pass: it is linked -z nodelete).
    let cli = try ChildProcess(
      ChildProcess.testChild, ["client-tls-at-exit", directory.path, server.baseURL + "/v1/logs"],
      environment: ["CRUMBS_PLAIN_HTTP": "libcurl"])
    let verdict = try #require(cli.value(after: "tls-at-exit ", seconds: 300))
    #expect(cli.wait(seconds: 60) == 0)
    // libcurl was loaded and used: the report reached the server.
    let bodies = server.requests.map { String(decoding: $0.body, as: UTF8.self) }
    #expect(bodies.contains { $0.contains("cli step failed") }, "\(bodies.count) requests")
    try #require(verdict != "absent", "this machine's libcurl does not use OpenSSL 3: nothing to check")
    #expect(verdict == "usable")
  }

  @Test func aServerUnderServiceGroupEndsEachSessionAsTerminatedBySIGTERM() throws {
    let directory = TestDirectory()
    let executable = try ConsumerPackage.build("ServiceConsumer", in: directory)
    // Checked on this build, which is a whole package's: a program on the `Crumbs` product links
    // no HTTP stack (CurlTransport loads libcurl with dlopen at the first upload).
    let ldd = try Subprocess.run("/usr/bin/ldd", [executable], timeoutMilliseconds: 60_000)
    let libraries = String(decoding: ldd.standardOutput, as: UTF8.self).split(separator: "\n")
    #expect(libraries.contains { $0.contains("libswiftCore.so") })  // ldd really listed it
    for forbidden in ["libFoundationNetworking", "libcurl"] {
      let found = libraries.filter { $0.contains(forbidden) }
      #expect(found.isEmpty, "the Crumbs consumer links \(found)")
    }
    let crumbs = directory.file("crumbs")
    // Several rounds: whether Crumbs' own signal handler or the group's signalfd sees a SIGTERM
    // first is up to the kernel, round by round; every round must end the same way.
    let rounds = 5
    for round in 1...rounds {
      let server = try ChildProcess(executable, ["serve", crumbs], standardError: .pipe)
      let ringPath = try #require(
        server.value(after: "ring ", seconds: 300), "round \(round): \(server.readStderr(seconds: 5))")
      #expect(server.readLine(seconds: 300) == "ready", "round \(round): \(server.readStderr(seconds: 5))")
      server.signal(SIGTERM)
      #expect(server.readLine(seconds: 120) == "stopped", "round \(round)")
      #expect(server.wait(seconds: 120) == 0, "round \(round): the graceful shutdown did not end in exit 0")

      // The ring as the server left it: one breadcrumb for the SIGTERM. (When the group's
      // signalfd took the signal first, it is recorded from Crumbs' own Dispatch source, which
      // may run after the other services' first shutdown breadcrumbs: no order is checked.)
      let contents = try RingReader.read(file: ringPath)
      let messages = contents.breadcrumbs.map(\.message)
      #expect(messages.filter { $0 == "SIGTERM received" }.count == 1, "round \(round): \(messages)")
      #expect(messages.contains("server stopped"), "round \(round): \(messages)")
      #expect(contents.header.state == .terminatedBySignal, "round \(round)")
      #expect(contents.header.endSignal == SIGTERM, "round \(round)")
      // Whichever path saw it, the stop request is in the header too (issue 24): a SIGKILL
      // before the clean exit would have been reported as a shutdown that did not finish.
      #expect(contents.header.uncleanEndSigns.stopRequest?.signal == SIGTERM, "round \(round)")

      // The next launch (the consumer's own, through the public API) says so.
      let inspect = try ChildProcess(executable, ["inspect", crumbs])
      let ends = inspect.readRemaining(seconds: 300).split(separator: "\n")
      #expect(inspect.wait(seconds: 60) == 0)
      // Earlier rounds' inspections are clean sessions of their own.
      #expect(ends.filter { $0 == "terminated_by_signal SIGTERM" }.count == 1, "round \(round): \(ends)")
      #expect(
        ends.allSatisfy { $0 == "clean -" || $0 == "terminated_by_signal SIGTERM" }, "round \(round): \(ends)"
      )
    }
  }

  /// Issue 25's API from a consumer package that uses only the public products: the delegate
  /// and consent handler in the configuration, typed attributes and a user, willSend removing a
  /// breadcrumb, redaction of a breadcrumb's and an attribute's secrets; the report reaches a
  /// loopback OTLP server (decoded by the official classes) typed, without the removed
  /// breadcrumb and without a secret.
  @Test func aConsumersReportArrivesTypedRedactedAndEditedByItsDelegate() throws {
    let directory = TestDirectory()
    let executable = try ConsumerPackage.build("ServiceConsumer", in: directory)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let run = try ChildProcess(executable, ["report", directory.file("crumbs"), server.baseURL])
    let output = run.readRemaining(seconds: 300)
    #expect(run.wait(seconds: 60) == 0, "\(output)")
    #expect(output.contains("pending 0"), "\(output)")
    let texts = try textsReceived(by: server)
    for secret in ["hunter2", "abc123"] { #expect(!texts.contains { $0.contains(secret) }, "\(secret) sent") }
    var report: [String: Any]?
    for request in server.requests where request.target.hasSuffix("/v1/logs") {
      let decoded = try decodeOTLP(request.body)
      for record in decoded["records"] as? [[String: Any]] ?? []
      where (record["attributes"] as? [String: Any])?["crumbs.report.kind"] as? String == "non_fatal" {
        report = record
        let trail = try #require(decoded["trail_jsonl"] as? String)
        #expect(trail.contains("login token=[redacted]"), "\(trail)")
        #expect(!trail.contains("internal only"), "willSend's edit: \(trail)")
      }
    }
    let record = try #require(report, "no non-fatal report received")
    let attributes = record["attributes"] as? [String: Any] ?? [:]
    let types = record["attribute_types"] as? [String: String] ?? [:]
    #expect(attributes["feature.beta"] as? Bool == true && types["feature.beta"] == "bool_value")
    #expect(types["cart.items"] == "int_value")
    #expect(attributes["enduser.id"] as? String == "acct-7")
    #expect(attributes["api_key"] as? String == "[redacted]")
    #expect(attributes["crumbs.signature"] is String)
  }
}
