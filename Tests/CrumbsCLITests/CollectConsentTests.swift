// CollectConsentTests.swift — `crumbs collect` and an app's consent handler (issue 25): the
// collector cannot ask the handler, so it follows what the client recorded in the directory
// (CrumbsDirectory+Consent: `consent` is `required` until the user's standing consent, `always`).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct CollectConsentTests {
  @Test func theCollectorSendsNothingFromAnAppThatAsksForConsentUntilItIsGivenForGood() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-consent-crash", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    let status = child.wait(seconds: 60)
    #expect(status & 0x7f == SIGSEGV, "the child died by SIGSEGV (wait status \(status))")
    #expect(try Syscall.readFile(crumbs + "/consent") == Array("required\n".utf8))

    // Processed and counted, but nothing leaves: no report, no summary.
    let held = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", arrivals.server.baseURL])
    #expect(held.status == 0, "stdout: \(held.stdout)\nstderr: \(held.stderr)")
    #expect(held.stdout.contains("not sent: the app asks for consent"), "\(held.stdout)")
    #expect(arrivals.count == 0)
    #expect(try Syscall.directoryEntries(crumbs + "/reports/pending").count == 1)

    // The user's `.always`, as the client records it: the collector sends.
    try Syscall.writeFileAtomically(crumbs + "/consent", Array("always\n".utf8))
    let sent = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", arrivals.server.baseURL])
    #expect(sent.status == 0, "stdout: \(sent.stdout)\nstderr: \(sent.stderr)")
    #expect(try arrivals.reports().map { attributes($0.record)["session.id"] as? String } == [session])
    #expect(
      try arrivals.records().contains { $0.record["event_name"] as? String == "crumbs.session.summary" })
  }
}
