// EnvironmentConfigurationTests.swift — a client configured by the CRUMBS_* and OTEL_* variables:
// read by CrumbsEnvironment (the one reader the CLI uses too) from an injected dictionary, and
// end to end by a real child process whose environment holds them and whose code configures
// nothing. Code wins over the environment; a value that cannot be used is named in `problems`;
// the token file is untrusted input (a FIFO, a device, a long or many-line file are refused).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct EnvironmentConfigurationTests {
  // MARK: - The reader

  @Test func everyVariableIsRead() throws {
    let directory = TestDirectory()
    let tokenFile = directory.file("token")
    try Syscall.writeFileAtomically(tokenFile, Array("t0ken-from-file\n".utf8))
    let environment = CrumbsEnvironment([
      "CRUMBS_DIRECTORY": "/srv/crumbs", "CRUMBS_DISABLED": "TRUE", "CRUMBS_APP_NAME": "shop",
      "CRUMBS_APP_VERSION": " 3.1.4\n", "CRUMBS_OTLP_ENDPOINT": "http://collector:4318",
      "CRUMBS_BACKTRACE_URL": "https://submit.backtrace.io/acme", "CRUMBS_BACKTRACE_TOKEN_FILE": tokenFile,
      "OTEL_EXPORTER_OTLP_HEADERS": "x-key=k",
    ])
    #expect(environment.problemDescriptions == [])
    #expect(environment.directory == "/srv/crumbs")
    #expect(environment.isDisabled)
    #expect(environment.appName == "shop")
    #expect(environment.appVersion == "3.1.4")
    #expect(environment.backtraceToken == "t0ken-from-file")
    let destinations = CrumbsConfiguration().resolvedDestinations(environment)
    #expect(destinations.count == 2)
    let otlp = try #require(destinations.first as? OTLPDestination)
    #expect(otlp.endpoint == "http://collector:4318")
    #expect(otlp.headers.contains { $0.name == "x-key" && $0.isSecret })
    #expect(destinations.last is BacktraceDestination)

    // Unset, empty and false are all "on", with nothing to say.
    for value in ["", "false", "0", "off", "No"] {
      let read = CrumbsEnvironment(["CRUMBS_DISABLED": value])
      #expect(!read.isDisabled && read.problems.isEmpty, "\(value)")
    }
    #expect(CrumbsEnvironment([:]).directory == nil)
  }

  @Test func aValueThatCannotBeUsedIsNamedAndLeftUnused() throws {
    let directory = TestDirectory()
    let environment = CrumbsEnvironment([
      "CRUMBS_DISABLED": "maybe", "CRUMBS_OTLP_ENDPOINT": "collector:4318",
      "CRUMBS_BACKTRACE_URL": "https://x.invalid/?token=s3cret oops",
      "CRUMBS_BACKTRACE_TOKEN_FILE": directory.file("missing"), "CRUMBS_BACKTRACE_TOKEN": "other",
      "OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://nope",
    ])
    let problems = environment.problemDescriptions
    #expect(problems.contains("CRUMBS_DISABLED=maybe is not true or false (Crumbs stays on)"), "\(problems)")
    #expect(problems.contains("CRUMBS_OTLP_ENDPOINT is not an http(s) URL (ignored)"), "\(problems)")
    #expect(problems.contains("CRUMBS_BACKTRACE_URL is not an http(s) URL (ignored)"), "\(problems)")
    #expect(problems.contains { $0.hasPrefix("CRUMBS_BACKTRACE_TOKEN is ignored") }, "\(problems)")
    #expect(problems.contains { $0.hasPrefix("OTEL_EXPORTER_OTLP_ENDPOINT ignored") }, "\(problems)")
    #expect(!problems.joined().contains("s3cret"))
    #expect(!environment.isDisabled)
    #expect(environment.destinations.isEmpty)
    #expect(CrumbsConfiguration().resolvedDestinations(environment).isEmpty)

    // A token file that cannot be read makes no Backtrace destination: the reports wait.
    let failing = CrumbsEnvironment([
      "CRUMBS_BACKTRACE_URL": "https://x.invalid", "CRUMBS_BACKTRACE_TOKEN_FILE": directory.file("missing"),
    ])
    #expect(failing.backtraceTokenFailed && failing.destinations.isEmpty)
    #expect(
      failing.problemDescriptions.first?.hasPrefix(
        "CRUMBS_BACKTRACE_TOKEN_FILE \(directory.file("missing")) cannot be read") == true)
  }

  /// The token file is untrusted input: only a regular file, bounded, one line, read without
  /// ever blocking; the line break around it trimmed; a link (as Kubernetes mounts secrets)
  /// followed to a regular file.
  @Test func theTokenFileIsReadAsUntrustedInput() throws {
    let directory = TestDirectory()
    func read(_ path: String) -> Swift.Result<String, CrumbsEnvironment.SecretFileError> {
      CrumbsEnvironment.readSecret(file: path, limit: 4096, singleLine: true)
    }
    let plain = directory.file("plain")
    try Syscall.writeFileAtomically(plain, Array("  abc123\r\n\n".utf8))
    #expect(try read(plain).get() == "abc123")
    let link = directory.file("link")
    #expect(symlink(plain, link) == 0)
    #expect(try read(link).get() == "abc123")

    let fifo = directory.file("fifo")
    #expect(mkfifo(fifo, 0o600) == 0)
    let started = ChildProcess.now()
    guard case .failure(let fifoError) = read(fifo) else { throw TestFailure("a FIFO was read") }
    #expect(ChildProcess.now() - started < 10)
    #expect(fifoError.description.contains("cannot be read"), "\(fifoError)")
    guard case .failure = read("/dev/zero") else { throw TestFailure("a device was read") }
    guard case .failure = read(directory.path) else { throw TestFailure("a directory was read") }

    let long = directory.file("long")
    try Syscall.writeFileAtomically(long, [UInt8](repeating: UInt8(ascii: "a"), count: 5000))
    guard case .failure = read(long) else { throw TestFailure("5000 bytes were read") }
    let twoLines = directory.file("two")
    try Syscall.writeFileAtomically(twoLines, Array("first\nsecond\n".utf8))
    guard case .failure(let lines) = read(twoLines) else { throw TestFailure("two lines were read") }
    #expect(lines.description == "holds more than one line, or a control character")
    let empty = directory.file("empty")
    try Syscall.writeFileAtomically(empty, Array("\n".utf8))
    guard case .failure(let emptyError) = read(empty) else { throw TestFailure("an empty file was read") }
    #expect(emptyError.description == "is empty")
  }

  // MARK: - The client

  /// Code wins: a directory, version and OTLP destination set in code are used, the
  /// environment's left unused (and still named when malformed).
  @Test func codeWinsOverTheEnvironment() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      let other = try LoopbackHTTPServer(status: 200)
      defer { other.stop() }
      var configuration = CrumbsConfiguration(directory: directory.file("code"))
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.appVersion = "1.0-code"
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      configuration.environment = [
        "CRUMBS_DIRECTORY": directory.file("environment"), "CRUMBS_APP_VERSION": "2.0-environment",
        "CRUMBS_APP_NAME": "from-environment", "CRUMBS_OTLP_ENDPOINT": other.baseURL,
        "OTEL_EXPORTER_OTLP_ENDPOINT": other.baseURL, "CRUMBS_DISABLED": "sometimes",
      ]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      client.waitForPreviousSessions()
      #expect(client.configuration.directory == directory.file("code"))
      #expect(client.configuration.appVersion == "1.0-code")
      // What code left unset comes from the environment.
      #expect(client.configuration.appName == "from-environment")
      #expect(!Syscall.fileExists(directory.file("environment")))
      #expect(client.problems.contains { $0.hasPrefix("CRUMBS_DISABLED=sometimes") }, "\(client.problems)")
      let destinations = try #require(client.uploader).destinations
      #expect(destinations.count == 1)
      #expect((destinations.first as? OTLPDestination)?.endpoint == server.baseURL)
    }
  }

  @Test func withoutADirectoryAnywhereStartSaysHowToNameOne() throws {
    try ProcessWideState.exclusive {
      var configuration = CrumbsConfiguration()
      configuration.environment = [:]
      do {
        let client = try CrumbsClient.start(configuration, shared: false)
        client.close()
        Issue.record("started without a directory, in \(client.configuration.directory)")
      } catch let error as CrumbsError {
        guard case .noDirectory = error else { throw error }
        #expect(error.description.contains("CRUMBS_DIRECTORY"))
      }
    }
  }

  /// CRUMBS_DISABLED turns this process's client off as `setEnabled(false)` does, without
  /// persisting it; `setEnabled(true)` (code) turns it back on.
  @Test func crumbsDisabledTurnsTheClientOffForThisProcess() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = CrumbsConfiguration()
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.environment = ["CRUMBS_DIRECTORY": directory.path, "CRUMBS_DISABLED": "1"]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      #expect(!client.isEnabled)
      #expect(client.send(message: "not while off") == nil)
      #expect(!Syscall.fileExists(directory.file("disabled")))
      client.setEnabled(true)
      #expect(client.isEnabled)
      #expect(client.send(message: "on again") != nil)
    }
  }

  /// A real process whose code configures nothing (`CrumbsConfiguration()`) and whose
  /// environment holds CRUMBS_DIRECTORY, CRUMBS_APP_VERSION and OTEL_EXPORTER_OTLP_ENDPOINT:
  /// it stores in that directory and delivers to the collector that variable alone names.
  @Test func aClientConfiguredByTheEnvironmentAloneDelivers() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("from-environment")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-env-only"],
      environment: [
        "SWIFT_BACKTRACE": "enable=no", "CRUMBS_DIRECTORY": crumbs, "CRUMBS_APP_VERSION": "3.1.4",
        "OTEL_EXPORTER_OTLP_ENDPOINT": server.baseURL, "CRUMBS_OTLP_ENDPOINT": "", "CRUMBS_DISABLED": "",
        "CRUMBS_BACKTRACE_URL": "", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "",
      ])
    let lines = child.readLines(until: "sent yes", seconds: 120)
    child.wait(seconds: 120)
    #expect(child.exitCode == 0, "\(lines)")
    #expect(lines.contains("directory \(crumbs)"), "\(lines)")
    #expect(lines.contains("sent yes"), "\(lines)")
    #expect(!lines.contains { $0.hasPrefix("problem ") }, "\(lines)")
    let request = try #require(server.requests.first { $0.target == "/v1/logs" })
    let sent = try decodeOTLP(request.body)
    let resource = try #require(sent["resource"] as? [String: Any])
    #expect(resource["service.version"] as? String == "3.1.4")
    #expect(Syscall.isDirectory(crumbs + "/reports"))
  }

  /// The same child with a malformed value: named among its problems, never a crash.
  @Test func aChildNamesAMalformedValue() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-env-only"],
      environment: [
        "SWIFT_BACKTRACE": "enable=no", "CRUMBS_DIRECTORY": directory.path,
        "CRUMBS_OTLP_ENDPOINT": "not a url", "OTEL_EXPORTER_OTLP_ENDPOINT": "", "CRUMBS_BACKTRACE_URL": "",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "", "CRUMBS_DISABLED": "",
      ])
    let lines = child.readLines(until: "sent no", seconds: 120)
    child.wait(seconds: 120)
    #expect(child.exitCode == 0, "\(lines)")
    #expect(lines.contains("problem CRUMBS_OTLP_ENDPOINT is not an http(s) URL (ignored)"), "\(lines)")
  }
}

private struct TestFailure: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}
