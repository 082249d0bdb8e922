// CLIEnvironmentTests.swift — every `crumbs` command reads the environment the client reads
// (CrumbsEnvironment), run as a real process with a real environment: in a container where
// CRUMBS_DIRECTORY and the destination variables are set, `crumbs reports list`, `reports send`
// and `collect` need no flag; without a directory anywhere the command says how to name one
// (never a `crumbs-demo` folder it happens to find); a flag wins over a variable; a value that
// cannot be used is named, a token file that is a FIFO is refused without blocking.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct CLIEnvironmentTests {
  /// No variable of the test process's own environment leaks into a command under test.
  static let clean: [String: String] = [
    "CRUMBS_DIRECTORY": "", "CRUMBS_DISABLED": "", "CRUMBS_OTLP_ENDPOINT": "", "CRUMBS_BACKTRACE_URL": "",
    "CRUMBS_BACKTRACE_TOKEN_FILE": "", "CRUMBS_BACKTRACE_TOKEN": "", "CRUMBS_APP_NAME": "",
    "CRUMBS_APP_VERSION": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "",
    "OTEL_EXPORTER_OTLP_HEADERS": "", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "",
  ]

  static func run(_ arguments: [String], _ environment: [String: String]) throws -> CLIProcess.Result {
    try CLIProcess.run(
      arguments, environment: clean.merging(environment) { _, set in set }, timeoutSeconds: 120)
  }

  /// A Crumbs directory (rings/ and reports/) with one pending report `id`.
  static func crumbsDirectory(_ directory: TestDirectory, name: String, id: String) throws -> String {
    let path = directory.file(name)
    _ = try RingDirectory(path: path)
    try ReportStore(directory: path).plant(CrashReport.sample(id: id, observed: 1_000), in: .pending)
    return path
  }

  static let appID = "cccc1111-0000-4000-8000-000000000001"
  static let demoID = "dddd2222-0000-4000-8000-000000000002"

  @Test func reportsListReadsTheDirectoryFromCRUMBS_DIRECTORY() throws {
    let directory = TestDirectory()
    let app = try Self.crumbsDirectory(directory, name: "app", id: Self.appID)
    let list = try Self.run(["reports", "list"], ["CRUMBS_DIRECTORY": app])
    #expect(list.status == 0, "\(list.stderr)")
    #expect(list.stdout.contains(Self.appID), "\(list.stdout)")
    // A flag wins over the variable.
    let other = try Self.crumbsDirectory(directory, name: "other", id: Self.demoID)
    let flagged = try Self.run(["reports", "list", "--dir", other], ["CRUMBS_DIRECTORY": app])
    #expect(flagged.status == 0, "\(flagged.stderr)")
    #expect(flagged.stdout.contains(Self.demoID) && !flagged.stdout.contains(Self.appID), "\(flagged.stdout)")
    // The other store commands too.
    let show = try Self.run(["reports", "show", "cccc", "--json"], ["CRUMBS_DIRECTORY": app])
    #expect(show.status == 0 && show.stdout.contains(Self.appID), "\(show.stderr)")
  }

  /// Run where a `crumbs-demo` folder with a report lies in the working directory: without
  /// --dir and CRUMBS_DIRECTORY, the command says how to name the directory and lists nothing.
  @Test func withoutADirectoryTheCommandSaysHowToNameOneAndNeverReadsCrumbsDemo() throws {
    let directory = TestDirectory()
    _ = try Self.crumbsDirectory(directory, name: "crumbs-demo", id: Self.demoID)
    for arguments in [
      ["reports", "list"], ["reports", "show", "dddd"], ["collect", "--otlp", "http://127.0.0.1:9"],
    ] {
      let result = Result(
        try Subprocess.run(
          "/bin/sh",
          ["-c", "cd \"$1\" && shift && exec \"$@\"", "sh", directory.path, CLIProcess.executable]
            + arguments,
          environment: Self.clean, timeoutMilliseconds: 120_000))
      #expect(result.status == 64, "\(arguments): \(result.stdout) \(result.stderr)")
      #expect(!result.stdout.contains(Self.demoID), "\(arguments): \(result.stdout)")
      #expect(
        result.stderr.contains("--dir") && result.stderr.contains("CRUMBS_DIRECTORY"), "\(result.stderr)")
    }
    // The demo keeps its own folder.
    let help = try Self.run(["demo", "--help"], [:])
    #expect(help.stdout.contains("crumbs-demo"), "\(help.stdout)")
  }

  typealias Result = CLIProcess.Result

  /// `crumbs collect` in a container: the directory from CRUMBS_DIRECTORY, the destination from
  /// OTEL_EXPORTER_OTLP_ENDPOINT (with its headers), no flag.
  @Test func collectNeedsNoFlagInAConfiguredEnvironment() throws {
    let directory = TestDirectory()
    let app = try Self.crumbsDirectory(directory, name: "app", id: Self.appID)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let result = try Self.run(
      ["collect"],
      [
        "CRUMBS_DIRECTORY": app, "OTEL_EXPORTER_OTLP_ENDPOINT": server.baseURL,
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cret",
      ])
    #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    let request = try #require(server.requests.first { $0.target == "/v1/logs" }, "\(result.stderr)")
    #expect(request.headers["authorization"] == "Bearer s3cret")
    let records = try decodeOTLP(request.body)["records"] as? [[String: Any]] ?? []
    #expect(records.contains { attributes($0)["crumbs.report.id"] as? String == Self.appID }, "\(records)")
    #expect(!result.stdout.contains("s3cret") && !result.stderr.contains("s3cret"))
  }

  /// CRUMBS_OTLP_ENDPOINT wins over OTEL_EXPORTER_OTLP_ENDPOINT, and --otlp over both;
  /// `reports send` takes the environment's destination too.
  @Test func aFlagWinsOverCRUMBSWhichWinsOverOTEL() throws {
    let directory = TestDirectory()
    let crumbsServer = try LoopbackHTTPServer(status: 200)
    defer { crumbsServer.stop() }
    let otelServer = try LoopbackHTTPServer(status: 200)
    defer { otelServer.stop() }
    let flagServer = try LoopbackHTTPServer(status: 200)
    defer { flagServer.stop() }
    let environment = [
      "CRUMBS_OTLP_ENDPOINT": crumbsServer.baseURL, "OTEL_EXPORTER_OTLP_ENDPOINT": otelServer.baseURL,
    ]
    let first = try Self.crumbsDirectory(directory, name: "first", id: Self.appID)
    var fromEnvironment = environment
    fromEnvironment["CRUMBS_DIRECTORY"] = first
    let sent = try Self.run(["reports", "send"], fromEnvironment)
    #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
    #expect(crumbsServer.requests.contains { $0.target == "/v1/logs" })
    #expect(otelServer.requests.isEmpty)

    let second = try Self.crumbsDirectory(directory, name: "second", id: Self.demoID)
    let flagged = try Self.run(["collect", "--dir", second, "--otlp", flagServer.baseURL], fromEnvironment)
    #expect(flagged.status == 0, "\(flagged.stdout) \(flagged.stderr)")
    #expect(flagServer.requests.contains { $0.target == "/v1/logs" })
    #expect(crumbsServer.requests.count == 1 && otelServer.requests.isEmpty)
  }

  /// A value that cannot be used is named on stderr (never quoted when it may hold a secret),
  /// and what it would have made is not used; a token file that is a FIFO is refused at once.
  @Test func aMalformedValueIsNamed() throws {
    let directory = TestDirectory()
    let app = try Self.crumbsDirectory(directory, name: "app", id: Self.appID)
    let fifo = directory.file("token")
    #expect(mkfifo(fifo, 0o600) == 0)
    let started = ChildProcess.now()
    let result = try Self.run(
      ["collect"],
      [
        "CRUMBS_DIRECTORY": app, "CRUMBS_OTLP_ENDPOINT": "localhost:4318 token=s3cr3tZ",
        "CRUMBS_BACKTRACE_URL": "https://example.invalid", "CRUMBS_BACKTRACE_TOKEN_FILE": fifo,
        "CRUMBS_DISABLED": "perhaps",
      ])
    #expect(ChildProcess.now() - started < 60, "a FIFO never blocks the reader")
    #expect(result.status == 64, "\(result.stdout) \(result.stderr)")
    #expect(result.stderr.contains("CRUMBS_OTLP_ENDPOINT is not an http(s) URL"), "\(result.stderr)")
    #expect(!result.stderr.contains("s3cr3tZ"), "\(result.stderr)")
    #expect(result.stderr.contains("CRUMBS_BACKTRACE_TOKEN_FILE \(fifo) cannot be read"), "\(result.stderr)")
    #expect(result.stderr.contains("CRUMBS_DISABLED=perhaps is not true or false"), "\(result.stderr)")
    #expect(result.stderr.contains("no destination"), "\(result.stderr)")
  }

  /// CRUMBS_DISABLED: `collect` processes but sends nothing, `reports send` refuses.
  @Test func crumbsDisabledSendsNothing() throws {
    let directory = TestDirectory()
    let app = try Self.crumbsDirectory(directory, name: "app", id: Self.appID)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let environment = [
      "CRUMBS_DIRECTORY": app, "CRUMBS_OTLP_ENDPOINT": server.baseURL, "CRUMBS_DISABLED": "true",
    ]
    let collect = try Self.run(["collect"], environment)
    #expect(collect.status == 0, "\(collect.stderr)")
    #expect(collect.stdout.contains("not sent: CRUMBS_DISABLED is set"), "\(collect.stdout)")
    let send = try Self.run(["reports", "send"], environment)
    #expect(send.status == 1)
    #expect(send.stderr.contains("CRUMBS_DISABLED is set"), "\(send.stderr)")
    #expect(server.requests.isEmpty)
  }
}
