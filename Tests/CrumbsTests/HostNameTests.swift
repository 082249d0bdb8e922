// HostNameTests.swift — `reportsHostName = false` keeps the machine's name out of what Crumbs
// stores: a non-fatal report made now, and a crash report the next launch makes for a session
// that crashed before it recorded anything (whose machine facts are read by that launch).

import CrumbsTestSupport
import Testing

@testable import Crumbs

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct HostNameTests {
  /// Crashes a client at once in `directory`, then starts one there with `reportsHostName` as
  /// given, sends a non-fatal report, and returns both reports' resources.
  func resources(reportsHostName: Bool) throws -> (crash: [String: String], nonFatal: [String: String]) {
    let directory = TestDirectory()
    let crashed = try ChildProcess(ChildProcess.testChild, ["client-crash-at-once", directory.path])
    crashed.wait(seconds: 120)
    #expect(crashed.terminatingSignal == SIGSEGV)
    return try ProcessWideState.exclusive {
      var configuration = CrumbsConfiguration(directory: directory.path)
      // The test runner's own concurrency pool is blocked by synchronous tests: a hang report
      // would be true, and one more report than these tests count (HangTests watch children).
      configuration.hangs = nil
      configuration.automaticBreadcrumbs = nil
      configuration.reportsHostName = reportsHostName
      let client = try CrumbsClient.start(configuration, shared: false)
      defer { client.close() }
      let crash = try #require(client.waitForPreviousSessions(timeout: 300)?.lastSessionCrashReport)
      let nonFatal = try #require(client.send(message: "checked"))
      return (crash.resource, nonFatal.report.resource)
    }
  }

  @Test func reportsNameTheHostUnlessTurnedOff() throws {
    let named = try resources(reportsHostName: true)
    #expect(named.crash["host.name"] != nil)
    #expect(named.nonFatal["host.name"] != nil)

    let unnamed = try resources(reportsHostName: false)
    #expect(unnamed.crash["host.name"] == nil)
    #expect(unnamed.nonFatal["host.name"] == nil)
    // Everything else about the machine is still there.
    #expect(unnamed.crash["os.version"] != nil)
    #expect(unnamed.nonFatal["host.arch"] != nil)
  }
}
