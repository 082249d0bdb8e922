import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// Redaction end to end (issue 25, done-when (e)): a child records secrets — a breadcrumb with
/// `password: hunter2` and "login token=abc123", a session attribute, a resource attribute, a
/// non-fatal report and a fatal error saying `Authorization: Bearer xyzSECRET` — and dies; the next launch processes
/// the crash and delivers both reports to a loopback OTLP server. With redaction on, no secret
/// is in any byte the server received (the trail decompressed by the official decoder's `lz4 -d`)
/// nor in any file of the store (its LZ4 trails decompressed), nor in the crash handler's
/// termination line; off, they are (the test can fail).
/// The processing client always runs with the default rules: the crashed session's own rules,
/// from its session file, decide.
@Suite(.serialized) struct RedactionEndToEndTests {
  static let secrets = ["hunter2", "abc123", "xyzSECRET"]

  @Test(arguments: [true, false]) func secretsLeaveNeitherTheServerNorTheStore(redacting: Bool) throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        "redaction-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
        environment: [
          "CRUMBS_TEST_REDACTION": redacting ? "on" : "off",
          "OTEL_RESOURCE_ATTRIBUTES": "deployment.db_password=hunter2",
        ])
      #expect(run.status & 0x7f == swiftTrapSignal, "\(run.lines) \(run.stderr)")
      // The crash handler's termination line (the orchestrator keeps it) carries the fatal
      // message with the pair's value redacted.
      let line = String(decoding: try Syscall.readFile(directory.file("termination-log")), as: UTF8.self)
      #expect(line.contains("Authorization: ") && line.hasSuffix("\n"), "\(line)")
      #expect(line.contains("xyzSECRET") == !redacting, "\(line)")
      if redacting { #expect(line.contains("Authorization: [redacted]"), "\(line)") }
      let server = try LoopbackHTTPServer(status: 200)
      defer { server.stop() }
      var configuration = CrumbsConfiguration(directory: directory.path)
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.environment = [:]
      configuration.destinations = [.otlp(endpoint: server.baseURL)]
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      try #require(client.waitForPreviousSessions(timeout: 300) != nil)
      _ = client.flush(timeout: 120)

      // Both reports went out: the child's non-fatal one and its crash.
      let sent = client.store.list(.sent).reports.map(\.report)
      #expect(Set(sent.map(\.kind)) == [.crash, .nonFatal], "\(sent.map(\.kind))")
      let received = try textsReceived(by: server)
      for report in sent {
        #expect(received.contains { $0.contains(report.id) }, "report \(report.id) not received")
      }
      var stored = try textsStored(under: directory.path + "/reports")
      // The trails once more, through the package's own LZ4 decoder.
      for report in client.store.list(.sent).reports {
        let trail = try Syscall.readFile(report.attachmentPath(TrailAttachment.name))
        stored.append(String(decoding: try LZ4Frame.decompress(trail), as: UTF8.self))
      }
      #expect(stored.contains { $0.contains("\"message\":\"login token=") }, "no trail in the store")
      for secret in Self.secrets {
        let sentWith = received.contains { $0.contains(secret) }
        let storedWith = stored.contains { $0.contains(secret) }
        #expect(sentWith == !redacting, "\(secret) sent: \(sentWith)")
        #expect(storedWith == !redacting, "\(secret) stored: \(storedWith)")
      }
      // The crashed session's summary carries its own resource, redacted alike.
      let summaries = received.filter { $0.contains(SessionSummaryQueue.eventName) }
      #expect(!summaries.isEmpty, "no session summary received")
      #expect(summaries.contains { $0.contains("deployment.db_password") })
      #expect(summaries.contains { $0.contains("hunter2") } == !redacting, "the summary's resource")
      // The crash alone (processed by this default-rules client): its session's own rules decide.
      let crash = try #require(sent.first { $0.kind == .crash })
      let crashSent = try textsReceived(by: server, reportKind: "crash")
      #expect(!crashSent.isEmpty)
      for secret in Self.secrets {
        #expect(crashSent.contains { $0.contains(secret) } == !redacting, "\(secret) sent with the crash")
      }
      if redacting {
        #expect(crash.exceptionMessage.contains("Authorization: [redacted]"), "\(crash.exceptionMessage)")
        #expect(crash.attributes["db.password"] == "[redacted]")
        #expect(received.contains { $0.contains("login token=[redacted]") })
      }
    }
  }

  /// A value pattern outside the linear-time subset is refused at start, with why, before
  /// anything is made (it used to be skipped: the processors then redacted without it).
  @Test func aRefusedPatternStopsStart() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      var configuration = CrumbsConfiguration(directory: directory.file("crumbs"))
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.redaction.valuePatterns = [Redaction.emailAddresses, #"(\w+) \1"#]
      do throws(CrumbsError) {
        let client = try CrumbsClient.start(configuration, shared: false)
        client.close()
        Issue.record("started with a back reference: \(client.problems)")
      } catch {
        guard case .redactionPatterns(let problems) = error else { throw error }
        #expect(problems.count == 1 && problems[0].contains(#"\1 is not supported"#), "\(problems)")
      }
      #expect(!Syscall.isDirectory(directory.file("crumbs")))
    }
  }

  /// The crash handler's termination line (issue 35, cases 15 and 16), which Kubernetes keeps
  /// in the pod's status, from a real crash.
  @Suite(.serialized) struct TerminationLine {
    /// The line a `redaction-crash` child left with `environment`.
    func line(_ environment: [String: String]) throws -> String {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        "redaction-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
        environment: environment)
      #expect(run.status & 0x7f == swiftTrapSignal, "\(run.lines) \(run.stderr)")
      return String(decoding: try Syscall.readFile(directory.file("termination-log")), as: UTF8.self)
    }

    /// How Swift prints a secret: `Optional("…")`, `=>`, and a URL's userinfo.
    @Test func swiftsFormsOfASecretAreRedacted() throws {
      let line = try line([
        "CRUMBS_TEST_FATAL_MESSAGE":
          #"password: Optional("hunter2") secret => "abc123" db postgres://app:xyzSECRET@db/prod"#
      ])
      #expect(line.hasPrefix("Crumbs: ") && line.hasSuffix("\n"), "\(line)")
      for secret in ["hunter2", "abc123", "xyzSECRET"] { #expect(!line.contains(secret), "\(line)") }
      #expect(line.contains(#"password: Optional("[redacted]")"#), "\(line)")
      #expect(line.contains("postgres://[redacted]@db/prod"), "\(line)")
    }

    /// More keys than the handler keeps: the message is left out, never written unredacted;
    /// the rest of the line (signal, report id) is still there.
    @Test func tooManyKeysWithholdTheMessage() throws {
      let line = try line(["CRUMBS_TEST_REDACTION": "many-keys"])
      #expect(line.hasPrefix("Crumbs: ") && line.contains("; report "), "\(line)")
      #expect(!line.contains("xyzSECRET"), "\(line)")
      #expect(line.contains("[message withheld]"), "\(line)")
    }
  }
}
