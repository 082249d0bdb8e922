// CrumbsDirectoryTests.swift — the Crumbs directory's one answer to "may this directory
// deliver?" (CrumbsDirectory.delivery), asked by the client and the collector, over every
// state of its files, written as the client writes them; and its names, each spelled once.

import Crumbs
import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import CrumbsTestSupport
import Testing

@Suite struct CrumbsDirectoryTests {
  /// Every `disabled` × `consent` state, asked by a client with and without a handler and by
  /// the collector (which cannot ask the app: nil).
  @Test func oneAnswerForEveryDeliverer() throws {
    typealias Expected = (
      client: CrumbsDirectory.Delivery, clientWithHandler: CrumbsDirectory.Delivery,
      collector: CrumbsDirectory.Delivery
    )
    let cases: [(disabled: Bool, consent: CrumbsDirectory.Consent, expected: Expected)] = [
      (false, .notRequired, (.allowed, .awaitingConsent, .allowed)),
      (false, .required, (.allowed, .awaitingConsent, .awaitingConsent)),
      (false, .granted, (.allowed, .allowed, .allowed)),
      (true, .notRequired, (.turnedOff, .turnedOff, .turnedOff)),
      (true, .required, (.turnedOff, .turnedOff, .turnedOff)),
      (true, .granted, (.turnedOff, .turnedOff, .turnedOff)),
    ]
    for (disabled, consent, expected) in cases {
      let folder = TestDirectory()
      let directory = CrumbsDirectory(folder.path)
      try directory.setEnabled(!disabled)
      switch consent {
      case .notRequired: break
      case .required: try directory.markConsentRequired()
      case .granted: try directory.grantConsent()
      }
      #expect(directory.consent == consent)
      #expect(directory.isEnabled == !disabled)
      let what = "disabled \(disabled), consent \(consent)"
      #expect(directory.delivery(consentHandlerSet: false) == expected.client, "\(what)")
      #expect(directory.delivery(consentHandlerSet: true) == expected.clientWithHandler, "\(what)")
      #expect(directory.delivery(consentHandlerSet: nil) == expected.collector, "\(what)")
    }
  }

  /// Standing consent is never taken back by a handler configured later.
  @Test func requiredIsNeverWrittenOverAlways() throws {
    let folder = TestDirectory()
    let directory = CrumbsDirectory(folder.path)
    try directory.grantConsent()
    try directory.markConsentRequired()
    #expect(directory.consent == .granted)
    #expect(try Syscall.readFile(directory.path(.consent)) == Array("always\n".utf8))
  }

  /// The names the client, the collector, the recorder and the store use are the directory's,
  /// as docs/collector.md and docs/storage.md show them.
  @Test func theNamesAreTheDocumentedOnes() throws {
    let directory = CrumbsDirectory("/d")
    #expect(directory.rings == "/d/rings")
    #expect(directory.quarantine == "/d/quarantine")
    #expect(directory.reports == "/d/reports")
    #expect(
      CrumbsDirectory.Name.allCases.map(directory.path) == [
        "/d/consent", "/d/disabled", "/d/session-starts", "/d/session-metrics.json", "/d/session-summaries",
        "/d/closing-spans", "/d/crash-loop.json", "/d/crash-loop.lock",
      ])
    #expect(
      CrumbsDirectory.stateFiles == ["session-metrics.json", "crash-loop.json", "consent", "disabled"])
    let folder = TestDirectory()
    let rings = try RingDirectory(path: folder.path)
    #expect(rings.ringsPath == CrumbsDirectory(folder.path).rings)
    #expect(try ReportStore(directory: folder.path).path == CrumbsDirectory(folder.path).reports)
  }
}
