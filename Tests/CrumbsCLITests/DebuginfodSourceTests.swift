// DebuginfodSourceTests.swift — source lines from a real debuginfod's /buildid/<id>/source/<path>
// (issue 41): a tiny C program compiled from a folder only root can read, stripped, its debug
// file served by `debuginfod -F` (root: it reads the source); `crumbs` run as a second user
// (who cannot) shows the lines, so they came from the server; then from the cache, and hostile
// answers leave the report unharmed. And a package note's `debugInfoUrl` asked by `crumbs
// collect` with DEBUGINFOD_URLS unset, refused when it carries credentials, never asked by a
// next launch that may not fetch.

import Crumbs
import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct DebuginfodSourceTests {
  static let marker = "crumbs-source-marker: the faulting line"
  static let program = """
    int crash_here(int *p) {
      return *p; /* \(marker) */
    }
    int main(int argc, char **argv) {
      (void)argv;
      return crash_here(argc > 5 ? &argc : 0);
    }

    """

  static var canRun: Bool {
    getuid() == 0 && Syscall.fileExists(DebuginfodServer.path) && Syscall.fileExists("/usr/bin/cc")
  }

  /// How many /buildid/…/source requests `server` received.
  static func sourceRequests(_ server: DebuginfodServer) -> Int {
    DebuginfodServer.value(server.metrics() ?? "", "http_requests_total{type=\"source\"}")
  }

  @Test(.enabled(if: canRun, "needs root (a second user), debuginfod (make test-deps) and cc"))
  func sourceLinesComeFromDebuginfodWhenTheMachineCannotReadThem() throws {
    let user = try #require(try ThreadsCommandHostileTests.secondUser())
    let directory = TestDirectory()
    try #require(chown(directory.path, user.uid, user.gid) == 0)
    // The source, where only root (the server) can read it.
    let hidden = directory.file("private")
    try Syscall.makeDirectory(hidden)
    try #require(chmod(hidden, 0o700) == 0)
    let source = hidden + "/app.c"
    try Syscall.writeFileAtomically(source, Array(Self.program.utf8))
    let full = directory.file("app.full")
    let built = try Subprocess.run(
      "/usr/bin/cc", ["-g", "-O0", "-no-pie", source, "-o", full], timeoutMilliseconds: 120_000)
    try #require(built.exitStatus == 0, "\(String(decoding: built.standardError, as: UTF8.self))")
    let app = directory.file("app")
    #expect(
      try Subprocess.run("/usr/bin/strip", ["-s", full, "-o", app], timeoutMilliseconds: 60_000).exitStatus
        == 0)
    let served = directory.file("served")
    try Syscall.makeDirectory(served)
    let debug = served + "/app.debug"
    #expect(
      try Subprocess.run("/usr/bin/objcopy", ["--only-keep-debug", full, debug], timeoutMilliseconds: 60_000)
        .exitStatus == 0)
    let symbols = String(
      decoding: try Subprocess.run("/usr/bin/nm", [full], timeoutMilliseconds: 60_000).standardOutput,
      as: UTF8.self)
    let line = try #require(symbols.split(separator: "\n").first { $0.hasSuffix(" crash_here") })
    let function = try #require(UInt64(line.prefix { $0 != " " }, radix: 16))
    let image = try ELFImage.read(path: app, symbols: false)
    let buildID = LoadedModule.hex(image.buildID)

    // A stored crash report of the stripped program (the faulting instruction in crash_here),
    // in a Crumbs directory the second user owns.
    let crumbs = directory.file("crumbs")
    let store = try ReportStore(directory: crumbs)
    var report = CrashReport.sample()
    report.modules = [
      LoadedModule(path: app, loadBias: 0, buildID: image.buildID, start: 0x40_0000, end: 0x50_0000)
    ]
    report.frames = [
      CrashReport.Frame(
        index: 0, address: "0x" + String(function + 4, radix: 16), module: app,
        moduleOffset: "0x" + String(function + 4, radix: 16), buildID: buildID, function: nil, symbol: nil,
        symbolOffset: nil, file: nil, line: nil, note: "stripped")
    ]
    try store.store(report)
    let id = String(report.id.prefix(8))
    #expect(
      try Subprocess.run(
        "/bin/chown", ["-R", "\(user.uid):\(user.gid)", crumbs], timeoutMilliseconds: 60_000
      ).exitStatus == 0)
    let asUser = [
      "--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", CLIProcess.executable,
    ]
    func crumbsAsUser(_ arguments: [String], _ environment: [String: String]) throws -> CLIProcess.Result {
      CLIProcess.Result(
        try Subprocess.run(
          "/usr/bin/setpriv", asUser + arguments, environment: environment, timeoutMilliseconds: 300_000))
    }
    // The second user cannot read the source itself.
    let peek = try Subprocess.run(
      "/usr/bin/setpriv", Array(asUser.dropLast()) + ["/bin/cat", source], timeoutMilliseconds: 60_000)
    #expect(peek.exitStatus != 0)

    let server = try DebuginfodServer(folder: served, database: directory.file("db.sqlite"), files: 1)
    defer { server.stop() }
    let environment = ["DEBUGINFOD_URLS": server.url, "DEBUGINFOD_TIMEOUT": "30"]

    // 1. From the server: named from the fetched debug file, the lines from /source.
    let first = try crumbsAsUser(["symbolicate", id, "--dir", crumbs], environment)
    #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
    let named = try store.load(id: report.id).report
    let top = try #require(named.frames.first)
    #expect(top.function == "crash_here", "\(top)")
    #expect(top.file == source, "\(top)")
    #expect(top.source?.origin == "debuginfod", "\(top)")
    #expect(top.source?.lines.contains { $0.contains(Self.marker) } == true, "\(top)")
    let kept = crumbs + "/debuginfod/" + buildID + "/source" + source.replacingOccurrences(of: "/", with: "#")
    #expect(Syscall.fileExists(kept), "\(kept)")
    let asked = Self.sourceRequests(server)
    #expect(asked >= 1)

    // 2. From the cache: `reports show --symbolicate` prints the lines; no request for them.
    let shown = try crumbsAsUser(["reports", "show", id, "--symbolicate", "--dir", crumbs], environment)
    #expect(shown.status == 0, "\(shown.stderr)")
    #expect(shown.stdout.contains(Self.marker), "\(shown.stdout)")
    #expect(Self.sourceRequests(server) == asked)

    // 3. Hostile answers for the source (the debug file itself is good, and kept): a NUL byte,
    // then a file over the source-file cap → no lines, a note saying why, the report unharmed.
    let debugBytes = try Syscall.readFile(debug)
    for (body, reason) in [
      (Array("int main(void) {\n  return 0; \0\n}\n".utf8), "NUL"),
      ([UInt8](repeating: UInt8(ascii: "a"), count: (4 << 20) + 1), "over 4194304 bytes"),
    ] {
      Syscall.removeTree(kept)
      let hostile = try LoopbackHTTPServer { _, request in
        if request.target.hasSuffix("/debuginfo") {
          return .respondBytes(200, headers: [:], body: debugBytes)
        }
        if request.target.contains("/source/") { return .respondBytes(200, headers: [:], body: body) }
        return .respond(404)
      }
      defer { hostile.stop() }
      let run = try crumbsAsUser(["symbolicate", id, "--dir", crumbs], ["DEBUGINFOD_URLS": hostile.baseURL])
      #expect(run.status == 0, "\(run.stderr)")
      let unharmed = try store.load(id: report.id).report
      #expect(unharmed.frames.count == report.frames.count)
      let frame = try #require(unharmed.frames.first)
      #expect(frame.function == "crash_here", "\(frame)")
      #expect(frame.source == nil, "\(frame)")
      #expect(frame.note?.contains("no source lines: debuginfod:") == true, "\(frame)")
      #expect(frame.note?.contains(reason) == true, "\(frame)")
      #expect(!Syscall.fileExists(kept))
    }
  }

  @Test(
    .enabled(if: Syscall.fileExists(DebuginfodServer.path), "debuginfod is not installed (make test-deps)"),
    .enabled(
      if: CrumbsEnvironment.debuginfodEnvironment()["DEBUGINFOD_URLS"] == nil,
      "DEBUGINFOD_URLS is set in the tests' environment"))
  func aPackageNotesDebugInfoURLIsAskedOnlyByWhoMayFetch() throws {
    let directory = TestDirectory()
    let stripped = directory.file("stripped")
    #expect(
      try Subprocess.run(
        "/usr/bin/strip", ["-s", ChildProcess.testChild, "-o", stripped], timeoutMilliseconds: 120_000
      )
      .exitStatus == 0)
    let files = directory.file("served")
    try Syscall.makeDirectory(files)
    #expect(
      try Subprocess.run(
        "/usr/bin/objcopy", ["--only-keep-debug", ChildProcess.testChild, files + "/app.debug"],
        timeoutMilliseconds: 120_000
      ).exitStatus == 0)
    let server = try DebuginfodServer(folder: files, database: directory.file("db.sqlite"), files: 1)
    defer { server.stop() }

    /// A crash of the stripped child carrying a note whose debugInfoUrl is `url`, in `crumbs`.
    func crash(noteURL url: String, name: String) throws -> (app: String, crumbs: String) {
      let app = directory.file(name)
      let (status, errors) = try PackageNote.add(
        #"{"type":"deb","name":"shop-server","version":"4.5.6","debugInfoUrl":"\#(url)"}"#, to: stripped,
        output: app)
      try #require(status == 0, "\(errors)")
      let crumbs = directory.file(name + "-crumbs")
      let child = try Subprocess(
        app, ["null-deref", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"], standardOutput: .discard)
      child.wait(seconds: 120)
      #expect(child.terminatingSignal == SIGSEGV)
      return (app, crumbs)
    }
    func collect(_ crumbs: String) throws -> CrashReport {
      let run = try CLIProcess.run(
        ["collect", "--otlp", "http://127.0.0.1:\(refusedPort())", "--dir", crumbs], timeoutSeconds: 300)
      #expect(run.status == 1, "\(run.stderr)")  // stored, not delivered: nobody listens
      return try #require(try ReportStore(directory: crumbs).list(.pending).reports.first).report
    }
    func named(_ report: CrashReport, _ app: String) -> Bool {
      report.frames.contains { $0.module == app && $0.function?.contains("crumbs_test_null_deref") == true }
    }

    // 1. The next launch of an app that did not ask to fetch: the note's URL is not asked.
    let quiet = try crash(noteURL: server.url, name: "quiet")
    let configuration = CrumbsConfiguration(directory: quiet.crumbs)
    let store = try ReportStore(directory: quiet.crumbs)
    let processor = configuration.makePostMortemProcessor(
      directory: try RingDirectory(path: quiet.crumbs), store: store
    ) { _ in }
    #expect(processor.symbolicatorOptions.packageDebugInfo == nil)
    _ = processor.run()
    let unasked = try #require(store.list(.pending).reports.first).report
    #expect(!named(unasked, quiet.app))
    #expect(server.debuginfoRequests == 0)

    // 2. `crumbs collect`, DEBUGINFOD_URLS unset: the note's server names the stripped frames,
    // the file kept in the directory's cache.
    let noted = try crash(noteURL: server.url, name: "noted")
    let collected = try collect(noted.crumbs)
    #expect(named(collected, noted.app), "\(collected.frames.prefix(3))")
    let buildID = try #require(collected.modules.first { $0.path == noted.app }?.buildIDHex)
    #expect(Syscall.fileExists(noted.crumbs + "/debuginfod/" + buildID + "/debuginfo"))
    #expect(server.debuginfoRequests >= 1)
    let asked = server.debuginfoRequests

    // 3. The note is untrusted: a URL with credentials, or not http(s), is refused with a note
    // in the report, and the server is not asked (it would have answered).
    let withCredentials = "http://user:secret@" + server.url.dropFirst("http://".count)
    for (url, reason) in [(withCredentials, "carries credentials"), ("file:///etc", "not an http(s) URL")] {
      let refused = try crash(noteURL: url, name: "refused-\(reason.count)")
      let report = try collect(refused.crumbs)
      #expect(!named(report, refused.app))
      #expect(
        report.evidence.contains { $0.contains("debugInfoUrl is not asked: " + reason) }, "\(report.evidence)"
      )
      #expect(!report.evidence.joined().contains("secret"))
    }
    #expect(server.debuginfoRequests == asked)
  }
}
