// DebuginfodTests.swift — a real debuginfod (elfutils, Debian's package) started on loopback over
// a folder holding the `objcopy --only-keep-debug` file of the test child; a stripped copy of the
// child crashes, and `crumbs symbolicate`, `crumbs collect` and `crumbs reports show --symbolicate`
// name its frames from the file the server sends (issue 41): once from the server, once from the
// cache (the server's own metrics show no new request), with the server gone unnamed, saying why,
// and from a hostile server unharmed.

import Crumbs
import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

/// A debuginfod server of the test's own, over `folder`, on a free loopback port.
final class DebuginfodServer {
  static let path = "/usr/bin/debuginfod"
  let port: UInt16
  let process: Subprocess
  var url: String { "http://127.0.0.1:\(port)" }

  /// Starts it and waits (bounded, on its answers) until it has scanned `files` files.
  init(folder: String, database: String, files: Int) throws {
    port = refusedPort()
    process = try Subprocess(
      Self.path, ["-F", folder, "-p", "\(port)", "-d", database, "-t", "0", "-g", "0"],
      standardOutput: .discard, standardError: .pipe)
    let deadline = SystemClock.monotonicNanoseconds() + 120 * 1_000_000_000
    while SystemClock.monotonicNanoseconds() < deadline {
      if let metrics = metrics(), Self.value(metrics, "scanned_files_total{source=\"file\"}") >= files {
        return
      }
      // Paced by the server's own log lines (or 200 ms without one), not by a sleep.
      _ = process.readLine(from: .standardError, timeoutMilliseconds: 200)
    }
    stop()
    throw SystemCallError(call: "debuginfod", path: folder, refusal: .other("not ready within 120 s"))
  }

  /// Its /metrics page, or nil when it does not answer.
  func metrics() -> String? {
    var request = DeliveryRequest(
      destination: "metrics", reportID: "-", url: url + "/metrics", headers: [], body: [], timeout: 5)
    request.method = "GET"
    guard case .success(let answer) = PlainHTTPTransport(timeout: 5).send(request), answer.status == 200
    else {
      return nil
    }
    return String(decoding: answer.body, as: UTF8.self)
  }

  /// How many /buildid/…/debuginfo requests it received.
  var debuginfoRequests: Int { Self.value(metrics() ?? "", "http_requests_total{type=\"debuginfo\"}") }

  static func value(_ metrics: String, _ name: String) -> Int {
    for line in metrics.split(separator: "\n") where line.hasPrefix(name + " ") {
      return Int(Double(line.dropFirst(name.count + 1)) ?? 0)
    }
    return 0
  }

  func stop() {
    process.signal(SIGTERM)
    if process.wait(timeoutMilliseconds: 30_000) < 0 { process.signal(SIGKILL) }
    _ = process.wait(timeoutMilliseconds: nil)
  }

  deinit { if process.exitCode == nil && process.terminatingSignal == nil { stop() } }
}

@Suite(.serialized) struct DebuginfodTests {
  @Test func theNextLaunchFetchesNothingUnlessItsConfigurationAsks() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    var configuration = CrumbsConfiguration(directory: crumbs)
    #expect(configuration.fetchesDebugFiles == false)
    let rings = try RingDirectory(path: crumbs)
    let store = try ReportStore(directory: crumbs)
    #expect(
      configuration.makePostMortemProcessor(directory: rings, store: store) { _ in }.symbolicatorOptions
        .remoteDebugFiles == nil)
    // Asked, it still needs a server named (DEBUGINFOD_URLS, unset in the tests' environment).
    configuration.fetchesDebugFiles = true
    if CrumbsEnvironment.debuginfodEnvironment()["DEBUGINFOD_URLS"] == nil {
      #expect(
        configuration.makePostMortemProcessor(directory: rings, store: store) { _ in }.symbolicatorOptions
          .remoteDebugFiles == nil)
    }
  }

  @Test(
    .enabled(if: Syscall.fileExists(DebuginfodServer.path), "debuginfod is not installed (make test-deps)"))
  func aRealServerNamesAStrippedCrashedChildThenTheCacheThenItsAbsenceIsSaid() throws {
    let directory = TestDirectory()
    let app = directory.file("app")
    let stripped = try Subprocess.run(
      "/usr/bin/strip", ["-s", ChildProcess.testChild, "-o", app], timeoutMilliseconds: 120_000)
    #expect(stripped.exitStatus == 0)
    let crumbs = directory.file("crumbs")
    let child = try Subprocess(
      app, ["null-deref", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"], standardOutput: .discard)
    child.wait(seconds: 120)
    #expect(child.terminatingSignal == SIGSEGV)
    let store = try ReportStore(directory: crumbs)
    _ = PostMortemProcessor(directory: try RingDirectory(path: crumbs), store: store).run()
    let original = try #require(store.list(.pending).reports.first)
    let id = String(original.report.id.prefix(8))
    #expect(!original.report.frames.contains { $0.function?.contains("crumbs_test_null_deref") == true })
    let buildID = try #require(original.report.modules.first { $0.path == app }?.buildIDHex)

    // The server's folder: only the debug file, as CI keeps it.
    let files = directory.file("served")
    try Syscall.makeDirectory(files)
    let kept = try Subprocess.run(
      "/usr/bin/objcopy", ["--only-keep-debug", ChildProcess.testChild, files + "/app.debug"],
      timeoutMilliseconds: 120_000)
    #expect(kept.exitStatus == 0)
    let server = try DebuginfodServer(folder: files, database: directory.file("db.sqlite"), files: 1)
    let environment = ["DEBUGINFOD_URLS": server.url, "DEBUGINFOD_TIMEOUT": "30"]

    // 1. From the server: the app's frames named, with file and line; the file kept in the cache.
    let first = try CLIProcess.run(
      ["symbolicate", id, "--dir", crumbs], environment: environment, timeoutSeconds: 300)
    #expect(first.status == 0, "\(first.stderr)")
    let named = try store.load(id: original.report.id).report
    let top = try #require(named.frames.first { $0.module == app })
    #expect(top.function?.contains("crumbs_test_null_deref") == true, "\(top)")
    #expect(top.file?.hasSuffix("crumbs_test_child.c") == true, "\(top)")
    #expect(Syscall.fileExists(crumbs + "/debuginfod/" + buildID + "/debuginfo"))
    #expect(server.debuginfoRequests >= 1)

    // 1b. `crumbs collect` (the client's processing run from outside) fetches too, into its
    // own directory's cache, for a crash it processes.
    let collected = directory.file("collected")
    let again = try Subprocess(
      app, ["null-deref", collected], environment: ["SWIFT_BACKTRACE": "enable=no"], standardOutput: .discard)
    again.wait(seconds: 120)
    let collect = try CLIProcess.run(
      ["collect", "--otlp", "http://127.0.0.1:\(refusedPort())", "--dir", collected],
      environment: environment,
      timeoutSeconds: 300)
    #expect(collect.status == 1, "\(collect.stderr)")  // stored, not delivered: nobody listens
    let collectedReport = try #require(try ReportStore(directory: collected).list(.pending).reports.first)
    #expect(
      collectedReport.report.frames.contains {
        $0.module == app && $0.function?.contains("crumbs_test_null_deref") == true
      },
      "\(collectedReport.report.frames.prefix(3))")
    #expect(Syscall.fileExists(collected + "/debuginfod/" + buildID + "/debuginfo"))
    let askedBefore = server.debuginfoRequests

    // 2. From the cache: `reports show --symbolicate` names them again, and no request reaches
    // the server (its own count stays: the app's file is kept, the other modules' misses too).
    try store.replace(original, with: original.report)
    let shown = try CLIProcess.run(
      ["reports", "show", id, "--symbolicate", "--dir", crumbs], environment: environment, timeoutSeconds: 300
    )
    #expect(shown.status == 0, "\(shown.stderr)")
    #expect(shown.stdout.contains("crumbs_test_null_deref"), "\(shown.stdout)")
    #expect(server.debuginfoRequests == askedBefore)

    // 3. The server stopped, the cache gone: the report still comes, unnamed, saying why.
    server.stop()
    Syscall.removeTree(crumbs + "/debuginfod")
    let third = try CLIProcess.run(
      ["symbolicate", id, "--dir", crumbs], environment: environment, timeoutSeconds: 300)
    #expect(third.status == 0, "\(third.stderr)")
    let unnamed = try store.load(id: original.report.id).report
    let appFrame = try #require(unnamed.frames.first { $0.module == app })
    #expect(appFrame.function?.contains("crumbs_test_null_deref") != true)
    #expect(appFrame.note?.contains("debuginfod: \(server.url): cannot connect") == true, "\(appFrame)")

    // 4. A hostile server sending a truncated file: refused, the report unharmed and saying so.
    let other = try Syscall.readFile(ChildProcess.testChild)
    let hostile = try LoopbackHTTPServer { _, request in
      request.target.contains(buildID)
        ? .respondBytes(200, headers: [:], body: Array(other.prefix(64 << 10))) : .respond(404)
    }
    defer { hostile.stop() }
    let fourth = try CLIProcess.run(
      ["symbolicate", id, "--dir", crumbs], environment: ["DEBUGINFOD_URLS": hostile.baseURL],
      timeoutSeconds: 300)
    #expect(fourth.status == 0, "\(fourth.stderr)")
    let unharmed = try store.load(id: original.report.id).report
    #expect(unharmed.frames.count == original.report.frames.count)
    let refused = try #require(unharmed.frames.first { $0.module == app })
    #expect(refused.note?.contains("refused:") == true, "\(refused)")
    #expect(!Syscall.fileExists(crumbs + "/debuginfod/" + buildID + "/debuginfo"))
  }
}
