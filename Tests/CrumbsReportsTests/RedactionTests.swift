import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

/// The redaction matcher (Redaction.swift) on the edge cases the README promises.
struct RedactionTests {
  let redactor = Redaction().redactor()

  /// Free text and what the default rules make of it: the reports' redaction and the crash
  /// handler's (TerminationRedactionTests) are held to the same cases.
  static let pairCases = [
    // key=value and key: value, in free text
    ("login token=abc123", "login token=[redacted]"),
    ("login token = abc123 ok", "login token = [redacted] ok"),
    ("password: hunter2", "password: [redacted]"),
    ("Authorization: Bearer xyz", "Authorization: [redacted]"),
    ("authorization: Basic dXNlcjpwYXNz, next", "authorization: [redacted], next"),
    ("Cookie: a=1; session=2\nnext", "Cookie: [redacted]\nnext"),
    ("Set-Cookie: id=42", "Set-Cookie: [redacted]"),
    // quotes
    ("key secret=\"a b\" rest", "key secret=\"[redacted]\" rest"),
    ("secret='a b'", "secret='[redacted]'"),
    ("secret=\"unterminated value", "secret=\"[redacted]"),
    ("secret=\"a \\\" b\" tail", "secret=\"[redacted]\" tail"),
    // JSON-ish, and JSON escaped inside a message
    ("{\"token\":\"x\",\"user\":\"bob\"}", "{\"token\":\"[redacted]\",\"user\":\"bob\"}"),
    ("{\"token\": 42}", "{\"token\": [redacted]}"),
    ("body {\\\"password\\\":\\\"p w\\\"}", "body {\\\"password\\\":\\\"[redacted]\\\"}"),
    // URL query
    ("GET /cb?token=x&a=1", "GET /cb?token=[redacted]&a=1"),
    ("https://h/p?a=1&api_key=k9#frag", "https://h/p?a=1&api_key=[redacted]"),
    // case, `-` as `_`, and substrings (documented: `tokenizer` is caught too)
    ("PASSWORD=x", "PASSWORD=[redacted]"),
    ("X-Api-Key: k", "X-Api-Key: [redacted]"),
    ("access_token=t", "access_token=[redacted]"),
    ("tokenizer=bpe", "tokenizer=[redacted]"),
    // not caught: no separator, other keys, scopes, already redacted
    ("the token abc123", "the token abc123"),
    ("user=alice count: 3", "user=alice count: 3"),
    ("Swift.Token::init", "Swift.Token::init"),
    ("token=[redacted]", "token=[redacted]"),
    ("token=", "token="),
    ("ends: secret", "ends: secret"),
    // multi-byte text around a pair, and a key at the end of a short text
    ("Grüße token=ä1 ✓", "Grüße token=[redacted] ✓"),
    ("t:token", "t:token"),
  ]

  @Test(arguments: pairCases)
  func pairsInFreeText(input: String, expected: String) {
    #expect(redactor.text(input) == expected)
  }

  /// The crash handler's redaction of the termination line's message (crumbs_redact.c), with
  /// the default keys as the client gives them, on the same cases (the handler turns line ends
  /// into spaces before: the one case with a line end is the reports' alone).
  @Test(arguments: pairCases.filter { !$0.0.contains("\n") })
  func theCrashHandlersRedactionAgrees(input: String, expected: String) {
    let output = ProcessWideState.exclusive {
      let keys = Array(Redaction.defaultKeys.joined(separator: "\0").utf8) + [0]
      let kept = keys.withUnsafeBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) {
          crumbs_termination_message_set_redaction_keys($0.baseAddress, $0.count)
        }
      }
      #expect(kept)
      var out = [CChar](repeating: 0, count: 512)
      let count = input.utf8CString.withUnsafeBufferPointer { text in
        crumbs_termination_message_testing_redact(text.baseAddress, text.count - 1, &out, out.count)
      }
      _ = crumbs_termination_message_set_redaction_keys(nil, 0)
      return String(decoding: out.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    #expect(output == expected)
  }

  @Test func theCrashHandlersKeysAreBounded() {
    ProcessWideState.exclusive {
      let many = Array(repeating: "k", count: 300).joined(separator: "\0")
      let bytes = Array(many.utf8CString)
      #expect(
        !bytes.withUnsafeBufferPointer {
          crumbs_termination_message_set_redaction_keys($0.baseAddress, $0.count)
        })
      // Nothing kept: a pair passes unchanged.
      var out = [CChar](repeating: 0, count: 64)
      let count = "k=v".utf8CString.withUnsafeBufferPointer {
        crumbs_termination_message_testing_redact($0.baseAddress, 3, &out, out.count)
      }
      #expect(String(decoding: out.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "k=v")
    }
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

  @Test func valuePatternsReplaceEveryMatchAndBadPatternsAreNamed() {
    let rules = Redaction(valuePatterns: [Redaction.emailAddresses, "card [0-9]{4}", "(unclosed"])
    let redactor = rules.redactor()
    #expect(
      redactor.text("mail alice@example.com, bob.b@mail.example.org; card 1234")
        == "mail [redacted], [redacted]; [redacted]")
    #expect(redactor.problems.count == 1)
    #expect(rules.invalidPatterns.first?.contains("(unclosed") == true)
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
    let older = SessionMetadata(sessionID: SessionID(), appVersion: "1")
    let file = directory.file("old.session.json")
    try Syscall.writeFileAtomically(file, older.encoded())
    #expect(try SessionMetadata.read(file: file).redaction == nil)
  }
}
