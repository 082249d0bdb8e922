// CLIConventionTests.swift — what every `crumbs` command does the same way, run as a real
// process: exit codes, --version, colour (NO_COLOR, --color, a real terminal through script(1)),
// readers that create nothing, ambiguous id prefixes, report decode's words, secrets from files
// and the environment, and `reports send --json`.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct CLIConventionTests {
  /// A store with reports planted in pending/, their ids given.
  static func store(ids: [String], in directory: TestDirectory) throws -> ReportStore {
    let store = try ReportStore(directory: directory.path)
    for (index, id) in ids.enumerated() {
      try store.plant(CrashReport.sample(id: id, observed: 1_000 + UInt64(index)), in: .pending)
    }
    return store
  }

  static let ids = [
    "aaaa1111-0000-4000-8000-000000000001", "aaaa2222-0000-4000-8000-000000000002",
    "bbbb3333-0000-4000-8000-000000000003",
  ]

  @Test func versionPrintsTheLibrarysVersion() throws {
    let result = try CLIProcess.run(["--version"])
    #expect(result.status == 0)
    #expect(result.stdout == CrumbsVersion.string + "\n")
  }

  @Test func everyCommandFollowsTheExitCodeConvention() throws {
    let directory = TestDirectory()
    _ = try Self.store(ids: Self.ids, in: directory)
    let help = try CLIProcess.run(["--help"])
    #expect(help.status == 0)
    #expect(help.stdout.contains("Exit codes: 0 success; 1 failure"), "\(help.stdout)")

    // 64: usage.
    for arguments in [
      ["no-such-command"], ["reports", "list", "--dir", directory.path, "--state", "later"],
      ["reports", "show", "aaaa", "--dir", directory.path], ["debug-files", "list"],
    ] {
      let result = try CLIProcess.run(arguments)
      #expect(result.status == 64, "\(arguments): \(result.stderr)")
    }
    // 3: nothing found.
    let empty = TestDirectory()
    for arguments in [
      ["reports", "show", "cccc", "--dir", directory.path], ["debug-files", "list", empty.path],
    ] {
      let result = try CLIProcess.run(arguments)
      #expect(result.status == 3, "\(arguments): \(result.stderr)")
      #expect(result.stderr.hasPrefix("crumbs \(arguments[0]) \(arguments[1]): "), "\(result.stderr)")
    }
    // 1: failure, a file that is not what it should be included.
    let notACrashRecord = directory.file("not.crash")
    try Syscall.writeFileAtomically(notACrashRecord, Array("hello".utf8), durable: false)
    for arguments in [
      ["crash-record", "dump", notACrashRecord], ["report", "decode", directory.file("missing.json")],
      ["ring", "dump", notACrashRecord], ["reports", "list", "--dir", directory.file("missing")],
    ] {
      let result = try CLIProcess.run(arguments)
      #expect(result.status == 1, "\(arguments): \(result.stderr)")
      #expect(result.stdout.isEmpty)
    }
    // 0.
    #expect(try CLIProcess.run(["reports", "show", "bbbb", "--dir", directory.path]).status == 0)
  }

  @Test func readersNeverCreateTheDirectoryAndSayWhatIsWrongWithIt() throws {
    let directory = TestDirectory()
    let missing = directory.file("nothing-here")
    for arguments in [
      ["reports", "list", "--dir", missing], ["reports", "show", "abcd", "--dir", missing],
      ["reports", "send", "--dir", missing, "--otlp", "http://127.0.0.1:1"],
      ["symbolicate", "abcd", "--dir", missing],
    ] {
      let result = try CLIProcess.run(arguments)
      #expect(result.status == 1, "\(arguments)")
      #expect(result.stderr.contains("no such directory: \(missing)"), "\(arguments): \(result.stderr)")
      #expect(!Syscall.fileExists(missing), "\(arguments) made \(missing)")
    }

    // A directory that is not a Crumbs directory: said so, and left as it was.
    let foreign = directory.file("foreign")
    try Syscall.makeDirectory(foreign)
    try Syscall.writeFileAtomically(foreign + "/notes.txt", Array("mine".utf8), durable: false)
    for arguments in [["reports", "list", "--dir", foreign], ["reports", "show", "ab", "--dir", foreign]] {
      let result = try CLIProcess.run(arguments)
      #expect(result.status == 1)
      #expect(result.stderr.contains("\(foreign) is not a Crumbs directory"), "\(result.stderr)")
      #expect(try Syscall.directoryEntries(foreign) == ["notes.txt"])
    }

    // A store missing one of its state folders: the readers leave it missing.
    let crumbsDirectory = TestDirectory()
    let crumbs = crumbsDirectory.path
    let store = try Self.store(ids: [Self.ids[2]], in: crumbsDirectory)
    Syscall.removeTree(store.folder(.dropped))
    let before = try Syscall.directoryEntries(store.path).sorted()
    let list = try CLIProcess.run(["reports", "list", "--dir", crumbs])
    #expect(list.status == 0)
    #expect(list.stdout.contains(Self.ids[2]))
    #expect(try CLIProcess.run(["reports", "show", "bbbb", "--dir", crumbs, "--json"]).status == 0)
    #expect(try Syscall.directoryEntries(store.path).sorted() == before)
  }

  @Test func showRefusesAnAmbiguousPrefixAndNamesTheCandidates() throws {
    let directory = TestDirectory()
    _ = try Self.store(ids: Self.ids, in: directory)
    let result = try CLIProcess.run(["reports", "show", "aaaa", "--dir", directory.path])
    #expect(result.status == 64)
    #expect(result.stdout.isEmpty)
    #expect(result.stderr.contains("aaaa is the start of 2 report ids"), "\(result.stderr)")
    #expect(result.stderr.contains(Self.ids[0]) && result.stderr.contains(Self.ids[1]))
    #expect(!result.stderr.contains(Self.ids[2]))
    // A longer prefix, and a whole id, are one report.
    let unique = try CLIProcess.run(["reports", "show", "aaaa2", "--dir", directory.path])
    #expect(unique.status == 0)
    #expect(unique.stdout.contains(Self.ids[1]))
  }

  @Test func decodeSaysWhatIsWrongInWords() throws {
    let directory = TestDirectory()
    var object = try #require(
      try JSONSerialization.jsonObject(with: Data(try ReportStore.encode(CrashReport.sample())))
        as? [String: Any])
    func decode(_ object: Any) throws -> CLIProcess.Result {
      let path = directory.file("report-\(UUID().uuidString).json")
      try Syscall.writeFileAtomically(
        path, Array(try JSONSerialization.data(withJSONObject: object)), durable: false)
      return try CLIProcess.run(["report", "decode", path])
    }
    object["exception.type"] = nil
    let missing = try decode(object)
    #expect(missing.status == 1)
    #expect(
      missing.stderr.contains("is JSON but not a Crumbs report: the field 'exception.type' is missing"),
      "\(missing.stderr)")

    object["exception.type"] = "SIGSEGV"
    object["thread.id"] = "seven"
    let wrongType = try decode(object)
    #expect(wrongType.stderr.contains("the field 'thread.id' is not a whole number"), "\(wrongType.stderr)")

    object["thread.id"] = 7
    var modules = try #require(object["modules"] as? [[String: Any]])
    modules[0]["path"] = NSNull()
    object["modules"] = modules
    let null = try decode(object)
    #expect(
      null.stderr.contains("the field 'modules[0].path' is null, where a string belongs"), "\(null.stderr)")

    let notJSON = directory.file("notes.txt")
    try Syscall.writeFileAtomically(notJSON, Array("hello".utf8), durable: false)
    let text = try CLIProcess.run(["report", "decode", notJSON])
    #expect(text.stderr == "crumbs report decode: \(notJSON) is neither an LZ4 frame nor JSON\n")

    for result in [missing, wrongType, null, text] {
      #expect(result.status == 1)
      for swiftism in [
        "DecodingError", "keyNotFound", "typeMismatch", "CodingKeys", "codingPath", "Context(",
      ] {
        #expect(!result.stderr.contains(swiftism), "\(result.stderr)")
      }
    }
  }

  /// `crumbs arguments` on a terminal: script(1) gives it a pseudo-terminal as stdout.
  static func runOnATerminal(_ arguments: [String], environment: [String: String] = [:]) throws
    -> CLIProcess.Result
  {
    let command = ([CLIProcess.executable] + arguments).map { "'" + $0.replacing("'", with: "'\\''") + "'" }
      .joined(separator: " ")
    return CLIProcess.Result(
      try Subprocess.run(
        "/usr/bin/script", ["-qec", command, "/dev/null"], environment: environment,
        timeoutMilliseconds: 60_000))
  }

  @Test func colourFollowsTheTerminalNOCOLORAndTheColorOption() throws {
    let directory = TestDirectory()
    _ = try Self.store(ids: [Self.ids[2]], in: directory)
    let show = ["reports", "show", "bbbb", "--dir", directory.path]
    let escape = "\u{1B}["
    // A pipe: no colour, unless asked for.
    #expect(!(try CLIProcess.run(show)).stdout.contains(escape))
    #expect(try CLIProcess.run(show + ["--color", "always"]).stdout.contains(escape))
    // A terminal: colour, unless NO_COLOR (non-empty) or --color never. (The test runner may
    // set NO_COLOR itself: each case sets it.)
    let terminal = try Self.runOnATerminal(show, environment: ["NO_COLOR": ""])
    #expect(terminal.status == 0, "\(terminal.stdout)")
    #expect(terminal.stdout.contains(escape))
    #expect(!(try Self.runOnATerminal(show, environment: ["NO_COLOR": "1"])).stdout.contains(escape))
    #expect(
      !(try Self.runOnATerminal(show + ["--color", "never"], environment: ["NO_COLOR": ""])).stdout.contains(
        escape))
    #expect(
      try Self.runOnATerminal(show + ["--color", "always"], environment: ["NO_COLOR": "1"]).stdout.contains(
        escape))
    // The demo takes the same option.
    let demo = try CLIProcess.run(["demo", "--help"])
    #expect(demo.stdout.contains("--color"))
    #expect(
      try CLIProcess.run(["reports", "show", "bbbb", "--dir", directory.path, "--color", "pink"]).status == 64
    )
  }

  @Test func sendTakesSecretsFromFilesAndTheEnvironmentAndNeverPrintsThem() throws {
    let directory = TestDirectory()
    _ = try Self.store(ids: Self.ids, in: directory)
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let tokenFile = directory.file("token")
    try Syscall.writeFileAtomically(tokenFile, Array("file-t0ken\n".utf8), durable: false)
    let headerFile = directory.file("headers")
    try Syscall.writeFileAtomically(
      headerFile, Array("# for the proxy\nX-Proxy-Auth: pr0xy-secret\n\n".utf8), durable: false)
    let send = try CLIProcess.run([
      "reports", "send", "--dir", directory.path, "--backtrace", server.baseURL, "--token-file", tokenFile,
      "--header-file", headerFile,
    ])
    #expect(send.status == 0, "\(send.stdout)\(send.stderr)")
    #expect(server.requests.count == 3)
    #expect(server.requests.allSatisfy { $0.target == "/post?format=json&token=file-t0ken" })
    #expect(server.requests.allSatisfy { $0.headers["x-proxy-auth"] == "pr0xy-secret" })
    #expect(!(send.stdout + send.stderr).contains("t0ken") && !(send.stdout + send.stderr).contains("pr0xy"))

    // The environment, for the token and for secret headers.
    let other = TestDirectory()
    _ = try Self.store(ids: [Self.ids[0]], in: other)
    let fromEnvironment = try Subprocess.run(
      CLIProcess.executable, ["reports", "send", "--dir", other.path, "--backtrace", server.baseURL],
      environment: ["CRUMBS_BACKTRACE_TOKEN": "env-t0ken", "CRUMBS_SECRET_HEADERS": "X-Api-Key: env-k3y"],
      timeoutMilliseconds: 60_000)
    #expect(fromEnvironment.exitStatus == 0)
    let last = try #require(server.requests.last)
    #expect(last.target == "/post?format=json&token=env-t0ken")
    #expect(last.headers["x-api-key"] == "env-k3y")
    let printed = String(
      decoding: fromEnvironment.standardOutput + fromEnvironment.standardError, as: UTF8.self)
    #expect(!printed.contains("t0ken") && !printed.contains("k3y"))

    // An empty or unreadable token file is an error, not an empty token.
    try Syscall.writeFileAtomically(tokenFile, Array("\n".utf8), durable: false)
    let empty = try CLIProcess.run([
      "reports", "send", "--dir", directory.path, "--backtrace", server.baseURL, "--token-file", tokenFile,
    ])
    #expect(empty.status == 1)
    #expect(empty.stderr.contains("the token file \(tokenFile) is empty"), "\(empty.stderr)")
    let help = try CLIProcess.run(["reports", "send", "--help"])
    #expect(help.stdout.contains("--token-file") && help.stdout.contains("--header-file"))
  }

  @Test func sendJSONIsOneObjectWithEveryResult() throws {
    let directory = TestDirectory()
    _ = try Self.store(ids: Self.ids, in: directory)
    // The second request fails with a 503 (retryable for OTLP): it stays pending, the others are
    // sent.
    let server = try LoopbackHTTPServer { index, _ in .respond(index == 1 ? 503 : 200) }
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", directory.path, "--otlp", server.baseURL, "--json",
    ])
    #expect(send.status == 1)
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(send.stdout.utf8)) as? [String: Any], "\(send.stdout)")
    #expect(object["sent"] as? Int == 2)
    #expect(object["pending"] as? Int == 1)
    #expect(object["dropped"] as? Int == 0)
    let results = try #require(object["results"] as? [[String: Any]])
    #expect(results.count == 3)
    #expect(Set(results.compactMap { $0["report.id"] as? String }) == Set(Self.ids))
    #expect(
      results.map { $0["outcome"] as? String }.sorted { ($0 ?? "") < ($1 ?? "") } == [
        "delivered", "delivered", "will_retry",
      ])
    let failed = try #require(results.first { $0["outcome"] as? String == "will_retry" })
    #expect(failed["status"] as? Int == 503)
    #expect(failed["attempts"] as? Int == 1)
    #expect((failed["reason"] as? String)?.isEmpty == false)
    #expect(results.allSatisfy { $0["destination"] as? String == "otlp" })

    let again = try CLIProcess.run([
      "reports", "send", "--dir", directory.path, "--otlp", server.baseURL, "--json",
    ])
    #expect(again.status == 0)
    let second = try #require(
      try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
    #expect(second["sent"] as? Int == 1 && second["pending"] as? Int == 0)
    let none = try CLIProcess.run([
      "reports", "send", "--dir", directory.path, "--otlp", server.baseURL, "--json",
    ])
    #expect(none.status == 0)
    let nothing = try #require(
      try JSONSerialization.jsonObject(with: Data(none.stdout.utf8)) as? [String: Any])
    #expect(nothing["sent"] as? Int == 0 && (nothing["results"] as? [Any])?.isEmpty == true)
  }
}
