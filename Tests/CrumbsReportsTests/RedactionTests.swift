import CrumbsPlatform
import CrumbsSignalPath
import CrumbsSignalPathTesting
import CrumbsTestSupport
import FoundationEssentials
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

/// One case of Tests/Fixtures/redaction-cases.json: free text and what the default rules make
/// of it. The reports' redaction (Redaction.swift) and the crash handler's (crumbs_redact.c) are
/// held to the same table; `reportsOnly` says why a case is the reports' alone.
struct RedactionCase: Decodable, CustomTestStringConvertible {
  var input: String
  var expected: String
  var reportsOnly: String?

  var testDescription: String { input.debugDescription }

  static let file = ConsumerPackage.packageRoot + "/Tests/Fixtures/redaction-cases.json"

  /// The table; empty when it cannot be read (`theSharedTableIsRead` then fails).
  static let all: [RedactionCase] = {
    guard let bytes = try? Syscall.readFile(file, limit: 1 << 20) else { return [] }
    return (try? JSONDecoder().decode([RedactionCase].self, from: Data(bytes))) ?? []
  }()
}

/// The redaction matcher (Redaction.swift) on the edge cases docs/redaction.md promises.
struct RedactionTests {
  let redactor = Redaction().redactor()

  @Test func theSharedTableIsRead() {
    #expect(RedactionCase.all.count >= 50, "\(RedactionCase.file)")
  }

  @Test(arguments: RedactionCase.all)
  func pairsInFreeText(_ testCase: RedactionCase) {
    #expect(redactor.text(testCase.input) == testCase.expected)
  }

  /// The crash handler's redaction of the termination line's message (crumbs_redact.c), with
  /// the default keys and URL rule as the client gives them, on the same table.
  @Test(arguments: RedactionCase.all.filter { $0.reportsOnly == nil })
  func theCrashHandlersRedactionAgrees(_ testCase: RedactionCase) {
    let output = ProcessWideState.exclusive {
      let keys = Array(Redaction.defaultKeys.joined(separator: "\0").utf8) + [0]
      let kept = keys.withUnsafeBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) {
          crumbs_termination_message_set_redaction($0.baseAddress, $0.count, true)
        }
      }
      #expect(kept)
      var out = [CChar](repeating: 0, count: 512)
      let count = testCase.input.utf8CString.withUnsafeBufferPointer { text in
        crumbs_termination_message_testing_redact(text.baseAddress, text.count - 1, &out, out.count)
      }
      _ = crumbs_termination_message_set_redaction(nil, 0, false)
      return String(decoding: out.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    #expect(output == testCase.expected)
  }

  /// Keys over the crash handler's room are refused whole; the line then leaves the message out
  /// (TerminationLineRedactionTests checks the line a real crash writes).
  @Test func theCrashHandlersKeysAreBounded() {
    ProcessWideState.exclusive {
      let many = Array(repeating: "k", count: 300).joined(separator: "\0")
      let bytes = Array(many.utf8CString)
      #expect(
        !bytes.withUnsafeBufferPointer {
          crumbs_termination_message_set_redaction($0.baseAddress, $0.count, true)
        })
      let fits = Array("password\0k\0".utf8CString)
      #expect(
        fits.withUnsafeBufferPointer {
          crumbs_termination_message_set_redaction($0.baseAddress, $0.count, true)
        })
      _ = crumbs_termination_message_set_redaction(nil, 0, false)
    }
  }

  @Test func urlCredentialsFollowTheirOwnSwitch() {
    let text = "postgres://app:s3cr3t@db/prod"
    #expect(Redaction(keys: []).redacting(text) == "postgres://[redacted]@db/prod")
    #expect(Redaction(redactsURLCredentials: false).redacting(text) == text)
    #expect(Redaction.off.redacting(text) == text)
  }

  @Test func attributeKeysMatchCaseInsensitiveSubstrings() {
    let attributes = redactor.attributes([
      "password": "hunter2", "DB_PASSWORD": "p", "http.request.header.cookie": "c", "region": "eu-west-1",
      "note": "retry with token=abc",
    ])
    #expect(attributes["password"] == "[redacted]")
    #expect(attributes["DB_PASSWORD"] == "[redacted]")
    #expect(attributes["http.request.header.cookie"] == "[redacted]")
    #expect(attributes["region"] == "eu-west-1")
    #expect(attributes["note"] == "retry with token=[redacted]")
  }

  @Test(arguments: [
    ("/home/alice/src/App/main.swift", "~/src/App/main.swift"),
    ("/root/.cache/x", "~/.cache/x"),
    ("/root", "~"),
    ("/Users/bob/app", "~/app"),
    ("open /home/alice/notes.txt: denied", "open ~/notes.txt: denied"),
    ("/data/home/alice/x", "/data/home/alice/x"),
    ("/rootfs/x", "/rootfs/x"),
    ("/home/", "/home/"),
  ])
  func homeDirectoriesAreShortened(input: String, expected: String) {
    #expect(redactor.text(input) == expected)
    #expect(redactor.path(input) == expected)
  }

  @Test func valuePatternsReplaceEveryMatch() {
    let rules = Redaction(valuePatterns: [Redaction.emailAddresses, "card [0-9]{4}"])
    let redactor = rules.redactor()
    #expect(
      redactor.text("mail alice@example.com, bob.b@mail.example.org; card 1234")
        == "mail [redacted], [redacted]; [redacted]")
    #expect(redactor.problems.isEmpty)
    #expect(rules.invalidPatterns.isEmpty)
  }

  /// A pattern outside the subset is refused with why; a processor given one (a session file)
  /// redacts every text whole, since it cannot know what the pattern would have caught.
  @Test func refusedPatternsFailClosed() {
    let rules = Redaction(valuePatterns: [Redaction.emailAddresses, "(unclosed", #"(\w+)\1"#, "(?=x)y"])
    #expect(rules.invalidPatterns.count == 3, "\(rules.invalidPatterns)")
    #expect(rules.invalidPatterns.first?.contains("(unclosed") == true)
    let redactor = rules.redactor()
    #expect(redactor.text("mail alice@example.com today") == "[redacted]")
    #expect(redactor.text("nothing to see") == "[redacted]")
    #expect(redactor.text("") == "")
    #expect(redactor.problems.count == 3)
    #expect(redactor.problems.allSatisfy { $0.contains("redacted whole") })
  }

  @Test func offChangesNothing() {
    let redactor = Redaction.off.redactor()
    #expect(Redaction.off.isOff)
    #expect(redactor.isIdentity)
    #expect(redactor.text("token=abc /home/alice") == "token=abc /home/alice")
    #expect(redactor.value("hunter2", key: "password") == "hunter2")
  }

  @Test func breadcrumbsKeepTheirKeysAndLoseTheirSecrets() {
    let breadcrumb = Breadcrumb(
      id: 1, threadSequence: 1, threadID: 7, wallTimeNanoseconds: 0, monotonicNanoseconds: 0, ticks: 0,
      level: .info, type: .http, message: "login token=abc123",
      attributes: [.init(key: "password", value: "hunter2"), .init(key: "path", value: "/home/alice/x")],
      messageTruncated: false, attributesTruncated: false, fromSignalHandler: false)
    let redacted = redactor.breadcrumbs([breadcrumb])[0]
    #expect(redacted.message == "login token=[redacted]")
    #expect(
      redacted.attributes == [.init(key: "password", value: "[redacted]"), .init(key: "path", value: "~/x")])
    let line = redacted.jsonLine()
    #expect(!line.contains("hunter2") && !line.contains("abc123"))
  }

  @Test func theSessionFileCarriesTheRules() throws {
    let directory = TestDirectory()
    let rules = Redaction(
      keys: ["pin", "ssn"], valuePatterns: [#"\d{3}-\d{2}"#], shortensHomeDirectories: false)
    for redaction in [rules, Redaction.off, Redaction()] {
      let metadata = SessionMetadata(sessionID: SessionID(), appVersion: "1", redaction: redaction)
      let file = directory.file("s.session.json")
      try Syscall.writeFileAtomically(file, metadata.encoded())
      #expect(try SessionMetadata.read(file: file).redaction == redaction)
    }
    // A file from before URL credentials had their switch: on, as by default.
    let before = directory.file("before.session.json")
    try Syscall.writeFileAtomically(
      before,
      Array(
        (#"{"format":1,"sessionID":"\#(SessionID())","replacedCrashSignals":[],"#
          + #""redaction":{"keys":["pin"],"valuePatterns":[],"shortensHomeDirectories":false},"#
          + #""attributes":{},"attachments":[],"omitted":0}"#).utf8))
    #expect(
      try SessionMetadata.read(file: before).redaction
        == Redaction(keys: ["pin"], shortensHomeDirectories: false, redactsURLCredentials: true))
    let older = SessionMetadata(sessionID: SessionID(), appVersion: "1")
    let file = directory.file("old.session.json")
    try Syscall.writeFileAtomically(file, older.encoded())
    #expect(try SessionMetadata.read(file: file).redaction == nil)
  }
}
