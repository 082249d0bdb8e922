// DebuginfodClientTests.swift — DebuginfodClient against hostile loopback servers (issue 41), through
// Crumbs' own http client and libcurl where the transport matters: a
// file with another build ID, a truncated file, a 2 GiB answer (claimed, and streamed), a slow
// drip, a redirect. Each is refused within its bound with its reason; nothing is kept in the
// cache, and a refused file's start is quarantined with its reason.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct DebuginfodClientTests {
  /// The test child's debug file, and its build ID.
  static func debugFile(in directory: TestDirectory) throws -> (bytes: [UInt8], buildID: [UInt8]) {
    let path = directory.file("child.debug")
    let kept = try Subprocess.run(
      "/usr/bin/objcopy", ["--only-keep-debug", ChildProcess.testChild, path], timeoutMilliseconds: 120_000)
    #expect(kept.exitStatus == 0)
    let bytes = try Syscall.readFile(path)
    let image = try ELFImage.read(path: path, symbols: false)
    return (bytes, image.buildID)
  }

  func client(
    _ server: LoopbackHTTPServer, _ directory: TestDirectory, maxSize: Int? = nil, timeout: Double = 2,
    kind: TransportKind? = nil
  ) -> DebuginfodClient {
    var settings = DebuginfodSettings(
      urls: [server.baseURL], cachePath: directory.file("cache"), timeout: timeout)
    if let maxSize { settings.maxSize = maxSize }
    return DebuginfodClient(settings: settings, transport: kind?.transport(timeout: timeout))
  }

  /// The quarantined files' reasons.
  func quarantined(_ directory: TestDirectory) -> [String] {
    let folder = directory.file("cache/quarantine")
    return ((try? Syscall.directoryEntries(folder)) ?? []).filter { $0.hasSuffix(".reason") }.compactMap {
      (try? Syscall.readFile(folder + "/" + $0)).map { String(decoding: $0, as: UTF8.self) }
    }
  }

  @Test func aFileWithAnotherBuildIDIsRefusedAndQuarantined() throws {
    let directory = TestDirectory()
    let (bytes, _) = try Self.debugFile(in: directory)
    let server = try LoopbackHTTPServer { _, _ in .respondBytes(200, headers: [:], body: bytes) }
    defer { server.stop() }
    let asked = [UInt8](repeating: 0xab, count: 20)
    let answer = client(server, directory).file(buildID: asked, kind: .debuginfo)
    guard case .failure(let failure) = answer else {
      Issue.record("accepted: \(answer)")
      return
    }
    #expect(failure.reason.contains("refused: build id"), "\(failure)")
    #expect(failure.reason.contains("quarantined"), "\(failure)")
    #expect(!Syscall.fileExists(directory.file("cache/" + LoadedModule.hex(asked) + "/debuginfo")))
    #expect(quarantined(directory).contains { $0.contains("not the \(LoadedModule.hex(asked)) asked for") })
  }

  @Test func aTruncatedFileIsRefused() throws {
    let directory = TestDirectory()
    let (bytes, buildID) = try Self.debugFile(in: directory)
    let half = Array(bytes.prefix(bytes.count / 2))
    let server = try LoopbackHTTPServer { _, _ in .respondBytes(200, headers: [:], body: half) }
    defer { server.stop() }
    let answer = client(server, directory).file(buildID: buildID, kind: .debuginfo)
    guard case .failure(let failure) = answer else {
      Issue.record("accepted: \(answer)")
      return
    }
    #expect(failure.reason.contains("refused:"), "\(failure)")
    #expect(!Syscall.fileExists(directory.file("cache/" + LoadedModule.hex(buildID) + "/debuginfo")))
    #expect(quarantined(directory).count == 1)
  }

  @Test(arguments: TransportKind.allCases)
  func aTwoGiBAnswerIsRefusedWithoutKeepingIt(_ kind: TransportKind) throws {
    let directory = TestDirectory()
    let buildID = [UInt8](repeating: 0x5a, count: 20)
    // Claimed: a Content-Length of 2 GiB, refused on the header line.
    let claimed = try LoopbackHTTPServer { _, _ in .respondWithLargeBody(200, bodyBytes: 2 << 30) }
    defer { claimed.stop() }
    var started = SystemClock.monotonicNanoseconds()
    let first = client(claimed, directory, maxSize: 16 << 20, kind: kind).file(
      buildID: buildID, kind: .debuginfo)
    #expect(SystemClock.monotonicNanoseconds() - started < 30_000_000_000)
    guard case .failure(let claimedFailure) = first else {
      Issue.record("accepted: \(first)")
      return
    }
    #expect(claimedFailure.reason.contains("larger than DEBUGINFOD_MAXSIZE"), "\(claimedFailure)")
    // Streamed: a chunked body that never ends, cut at the bound.
    let streamed = try LoopbackHTTPServer { _, _ in .respondEndlessly(200) }
    defer { streamed.stop() }
    started = SystemClock.monotonicNanoseconds()
    let second = client(streamed, directory, maxSize: 16 << 20, kind: kind).file(
      buildID: buildID, kind: .debuginfo)
    #expect(SystemClock.monotonicNanoseconds() - started < 60_000_000_000)
    guard case .failure(let streamedFailure) = second else {
      Issue.record("accepted: \(second)")
      return
    }
    #expect(streamedFailure.reason.contains("larger than DEBUGINFOD_MAXSIZE"), "\(streamedFailure)")
    #expect(!Syscall.fileExists(directory.file("cache/" + LoadedModule.hex(buildID))))
    #expect(quarantined(directory).isEmpty)
  }

  @Test(arguments: TransportKind.allCases)
  func aSlowDripIsCutAtTheWholeExchangeBound(_ kind: TransportKind) throws {
    let directory = TestDirectory()
    let buildID = [UInt8](repeating: 0x3c, count: 20)
    let server = try LoopbackHTTPServer { _, _ in .respondTrickling(200) }
    defer { server.stop() }
    let started = SystemClock.monotonicNanoseconds()
    // A byte every 200 ms is never idle for 1 s; the whole exchange is bounded at 4 s.
    let answer = client(server, directory, timeout: 1, kind: kind).file(buildID: buildID, kind: .debuginfo)
    let seconds = Double(SystemClock.monotonicNanoseconds() - started) / 1e9
    #expect(seconds >= 3.5 && seconds < 30, "\(seconds) s")
    guard case .failure(let failure) = answer else {
      Issue.record("accepted: \(answer)")
      return
    }
    #expect(failure.reason.contains("cut short"), "\(failure)")
  }

  @Test(arguments: TransportKind.allCases)
  func aRedirectIsRefusedAndNotFollowed(_ kind: TransportKind) throws {
    let directory = TestDirectory()
    let (bytes, buildID) = try Self.debugFile(in: directory)
    let target = try LoopbackHTTPServer { _, _ in .respondBytes(200, headers: [:], body: bytes) }
    defer { target.stop() }
    let server = try LoopbackHTTPServer { _, request in
      .respond(302, headers: ["Location": target.baseURL + request.target])
    }
    defer { server.stop() }
    let answer = client(server, directory, kind: kind).file(buildID: buildID, kind: .debuginfo)
    guard case .failure(let failure) = answer else {
      Issue.record("accepted: \(answer)")
      return
    }
    #expect(failure.reason.contains("redirect refused (302)"), "\(failure)")
    #expect(target.requests.isEmpty)
  }

  @Test func aGoodFileIsKeptAndAMissIsRemembered() throws {
    let directory = TestDirectory()
    let (bytes, buildID) = try Self.debugFile(in: directory)
    let server = try LoopbackHTTPServer { _, request in
      request.target.contains(LoadedModule.hex(buildID))
        ? .respondBytes(200, headers: [:], body: bytes) : .respond(404)
    }
    defer { server.stop() }
    let debuginfod = client(server, directory)
    #expect(
      debuginfod.file(buildID: buildID, kind: .debuginfo)
        == .success(
          directory.file("cache/" + LoadedModule.hex(buildID) + "/debuginfo")))
    let other = [UInt8](repeating: 0x11, count: 20)
    #expect(debuginfod.file(buildID: other, kind: .debuginfo) != .success(""))
    #expect(debuginfod.requestCount == 2)
    // Asked again: the kept file and the remembered miss, no request.
    _ = debuginfod.file(buildID: buildID, kind: .debuginfo)
    let again = debuginfod.file(buildID: other, kind: .debuginfo)
    #expect(again == .failure(.init("no server has it (cached miss)")))
    #expect(debuginfod.requestCount == 2)
    #expect(
      DebuginfodClient.withoutCredentials("https://user:secret@example.com/x") == "https://example.com/x")
  }

  @Test func aSourceIsAskedByItsEscapedPathKeptAndAMissIsRemembered() throws {
    let directory = TestDirectory()
    let targets = Mutex<[String]>([])
    let server = try LoopbackHTTPServer { _, request in
      targets.withLock { $0.append(request.target) }
      return request.target.contains("/found")
        ? .respond(200, body: "let a = 1\nlet b = 2\n") : .respond(404)
    }
    defer { server.stop() }
    let debuginfod = client(server, directory)
    let hex = "ab12cd"
    let path = "/src/found dir/a+b~c$;é.swift"
    #expect(
      debuginfod.source(path: path, buildID: hex, limit: 1024)
        == .success(SourceFile(bytes: Array("let a = 1\nlet b = 2\n".utf8))))
    // Every byte not unreserved (RFC 3986 2.3) escaped, the path's own `/` kept.
    #expect(targets.withLock { $0 } == ["/buildid/ab12cd/source/src/found%20dir/a%2Bb~c%24%3B%C3%A9.swift"])
    // Kept in elfutils' layout: `source`, then the path with each `/` a `#`.
    let kept = directory.file("cache/ab12cd/source#src#found dir#a+b~c$;é.swift")
    #expect(Syscall.fileExists(kept))
    // Asked again: from the cache. A miss is remembered too.
    _ = debuginfod.source(path: path, buildID: hex, limit: 1024)
    #expect(
      debuginfod.source(path: "/src/gone.swift", buildID: hex, limit: 1024) != .success(SourceFile(bytes: []))
    )
    #expect(
      debuginfod.source(path: "/src/gone.swift", buildID: hex, limit: 1024)
        == .failure(SourceUnavailable("debuginfod: no server has it (cached miss)")))
    #expect(debuginfod.requestCount == 2)
    // Never asked: no build id, a relative path, a name not like source code.
    #expect(
      debuginfod.source(path: path, buildID: nil, limit: 1024) == .failure(SourceUnavailable("no build id")))
    #expect(
      debuginfod.source(path: "src/a.swift", buildID: hex, limit: 1024) != .success(SourceFile(bytes: [])))
    #expect(
      debuginfod.source(path: "/etc/shadow", buildID: hex, limit: 1024) != .success(SourceFile(bytes: [])))
    #expect(debuginfod.requestCount == 2)
    // A kept file replaced by a link (the cache is a folder another user may write): not read.
    Syscall.removeTree(kept)
    #expect(symlink("/etc/passwd", kept) == 0)
    let linked = debuginfod.source(path: path, buildID: hex, limit: 1024)
    #expect(linked == .success(SourceFile(bytes: Array("let a = 1\nlet b = 2\n".utf8))))
    #expect(debuginfod.requestCount == 3)
  }

  @Test func aPackageNotesURLIsRefusedUnlessPlainHTTP() {
    #expect(DebuginfodSettings.refusal(ofNoteURL: "https://debuginfod.example.com") == nil)
    #expect(DebuginfodSettings.refusal(ofNoteURL: "http://127.0.0.1:8002/") == nil)
    #expect(DebuginfodSettings.refusal(ofNoteURL: "file:///etc") == "not an http(s) URL")
    #expect(DebuginfodSettings.refusal(ofNoteURL: "ftp://example.com") == "not an http(s) URL")
    #expect(DebuginfodSettings.refusal(ofNoteURL: "https://user:pw@example.com") == "carries credentials")
    #expect(DebuginfodSettings.refusal(ofNoteURL: "https://example.com x") != nil)
    #expect(DebuginfodSettings.refusal(ofNoteURL: "https://") == "names no host")
    #expect(DebuginfodSettings.refusal(ofNoteURL: "https://" + String(repeating: "a", count: 1100)) != nil)
    let make = DebuginfodClient.packageNoteClients(environment: [:], crumbsDirectory: "/tmp/crumbs")
    guard case .success(let remote) = make("http://127.0.0.1:1"), let made = remote as? DebuginfodClient
    else {
      Issue.record("no client for a good URL")
      return
    }
    #expect(made.settings.urls == ["http://127.0.0.1:1"])
    #expect(made.settings.cachePath == "/tmp/crumbs/debuginfod")
    guard case .failure(let failure) = make("http://a:b@127.0.0.1:1") else {
      Issue.record("credentials accepted")
      return
    }
    #expect(failure.reason == "the package note's debugInfoUrl is not asked: carries credentials")
  }
}
