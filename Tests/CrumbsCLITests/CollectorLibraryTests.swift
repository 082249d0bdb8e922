// CollectorLibraryTests.swift — the collector driven as a library (CrumbsCollector), without
// the command line: a real child crashes, one CollectEngine pass in this process reports its
// session to a real loopback OTLP server, and the lines `crumbs collect` would print come back
// through CollectOutput. The CLI's own runs of the same work are CollectTests.

import Crumbs
import CrumbsCollector
import CrumbsDelivery
import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct CollectorLibraryTests {
  /// What the engine said, line by line.
  final class Said: Sendable {
    let lines = Mutex<[String]>([])
    let problems = Mutex<[String]>([])

    var output: CollectOutput {
      CollectOutput(
        line: { line in self.lines.withLock { $0.append(line) } },
        problem: { problem in self.problems.withLock { $0.append(problem) } })
    }
  }

  /// The OTLP destination `crumbs collect --otlp URL` resolves to.
  static func otlp(_ url: String) -> [any ReportDestination] {
    var configuration = CrumbsConfiguration(directory: "")
    configuration.destinations = [.otlp(endpoint: url)]
    return configuration.resolvedDestinations(CrumbsEnvironment([:]))
  }

  @Test func oneEngineCollectsACrashedSessionIntoTheStoreAndDeliversIt() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    let status = child.wait(seconds: 60)
    #expect(status & 0x7f == SIGSEGV, "the child died by SIGSEGV (wait status \(status))")

    let said = Said()
    let engine = CollectEngine(
      directories: [crumbs], destinations: Self.otlp(arrivals.server.baseURL),
      transport: CurlTransport(timeout: 30), summaryResource: [:], signals: nil, output: said.output)
    #expect(engine.collectOnce(), "problems: \(said.problems.withLock { $0 })")

    // Into the store, counted, and out to the server, as the CLI does it.
    let crumbsDirectory = CrumbsDirectory(crumbs)
    #expect(try Syscall.directoryEntries(crumbsDirectory.reports + "/sent").count == 1)
    #expect(try Syscall.directoryEntries(crumbsDirectory.reports + "/pending").isEmpty)
    #expect(Syscall.fileExists(crumbsDirectory.path(.sessionMetrics)))
    #expect(try arrivals.reports().map { attributes($0.record)["session.id"] as? String } == [session])
    let lines = said.lines.withLock { $0 }
    #expect(lines.count == 1, "\(lines)")
    #expect(
      lines.first?.hasPrefix(
        "\(crumbs): 1 session(s) ended (1 crash), 1 report(s) stored; 1 sent, 0 dropped, 0 pending") == true,
      "\(lines)")
    #expect(said.problems.withLock { $0 }.isEmpty)

    // A second engine finds nothing more to do.
    let again = Said()
    let second = CollectEngine(
      directories: [crumbs], destinations: Self.otlp(arrivals.server.baseURL),
      transport: CurlTransport(timeout: 30), summaryResource: [:], signals: nil, output: again.output)
    let requests = arrivals.count
    #expect(second.collectOnce())
    #expect(arrivals.count == requests)
    #expect(again.lines.withLock { $0 } == ["\(crumbs): 0 sent, 0 dropped, 0 pending"])
  }

  /// The directory's one answer (CrumbsDirectory.delivery) holds for the library too: a
  /// directory turned off is processed, its report stored, and nothing leaves.
  @Test func aDirectoryTurnedOffIsProcessedAndSendsNothing() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"])
    _ = try #require(child.value(after: "session "))
    child.wait(seconds: 60)
    try CrumbsDirectory(crumbs).setEnabled(false)

    let said = Said()
    let engine = CollectEngine(
      directories: [crumbs], destinations: Self.otlp(arrivals.server.baseURL),
      transport: CurlTransport(timeout: 30), summaryResource: [:], signals: nil, output: said.output)
    #expect(engine.collectOnce())
    #expect(arrivals.count == 0)
    #expect(try Syscall.directoryEntries(CrumbsDirectory(crumbs).reports + "/pending").count == 1)
    #expect(
      said.lines.withLock { $0 }.first?.hasSuffix("not sent: the app turned Crumbs off in this directory")
        == true)
  }
}
