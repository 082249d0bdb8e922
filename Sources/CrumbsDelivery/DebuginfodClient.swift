// DebuginfodClient.swift — fetches debug files by GNU build ID from debuginfod servers (the
// elfutils protocol: GET <server>/buildid/<hex>/debuginfo, …/executable), through the transport
// delivery uses, into a DebuginfodCache; a Symbolicator asks it through RemoteDebugFiles.
//
// Entry points, in call order:
//   DebuginfodSettings(environment:crumbsDirectory:)  the elfutils variables as elfutils reads
//                                       them (nil without DEBUGINFOD_URLS): URLS (servers,
//                                       space-separated), TIMEOUT, MAXTIME, MAXSIZE, CACHE_PATH
//   DebuginfodClient(settings:transport:)
//   client.file(buildID:kind:)          the cache first (a kept file, or a recent miss), then each
//                                       server in turn; a 200 whose whole body passes
//                                       DebuginfodCache.check is kept and returned
//
// Bounds, each with its reason in the answer: idle for DEBUGINFOD_TIMEOUT seconds (default 90,
// as elfutils) or the whole exchange past four times it (a slow drip) → timed out; with
// DEBUGINFOD_MAXTIME, each exchange within it (the idle bound a quarter of it at most) and no
// new request once the client's total time passed it; a body past DEBUGINFOD_MAXSIZE (default
// `defaultMaxSize`), claimed or streamed, is refused without keeping it; a 3xx is refused
// (redirects are never followed); any other status is that server's answer. Servers that
// answer 404 all → a miss, kept in the cache. Not signal-safe; thread-safe.

import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import Synchronization

/// How to reach debuginfod servers and keep what they send (elfutils' variables).
public struct DebuginfodSettings: Sendable, Equatable {
  /// Server base URLs, in the order asked.
  public var urls: [String]
  /// Seconds without a byte before a request fails (DEBUGINFOD_TIMEOUT).
  public var timeout: Double
  /// Seconds a request may take in all, and the client's total (DEBUGINFOD_MAXTIME); nil: only
  /// the transport's bound, four times `timeout`.
  public var maxTime: Double?
  /// The largest file accepted, in bytes (DEBUGINFOD_MAXSIZE).
  public var maxSize: Int
  /// The cache folder (DEBUGINFOD_CACHE_PATH, else `debuginfod/` in the Crumbs directory).
  public var cachePath: String

  /// elfutils' default idle timeout.
  public static let defaultTimeout = 90.0
  /// The largest file accepted when DEBUGINFOD_MAXSIZE says nothing: the whole body is held in
  /// memory while it is checked, so it is bounded even where elfutils is not.
  public static let defaultMaxSize = 512 << 20
  /// The name of the cache folder in a Crumbs directory.
  public static let folderName = "debuginfod"

  public init(
    urls: [String], cachePath: String, timeout: Double = defaultTimeout, maxTime: Double? = nil,
    maxSize: Int = defaultMaxSize
  ) {
    self.urls = urls
    self.cachePath = cachePath
    self.timeout = timeout
    self.maxTime = maxTime
    self.maxSize = maxSize
  }

  /// The settings `environment` gives, the cache in `crumbsDirectory` unless
  /// DEBUGINFOD_CACHE_PATH names one (nil: neither, so no cache, so nil); nil without
  /// DEBUGINFOD_URLS or with no URL in it. `extraURLs` (a package note's `debugInfoUrl`) are
  /// asked after the environment's.
  public init?(environment: [String: String], crumbsDirectory: String?, extraURLs: [String] = []) {
    var urls = (environment["DEBUGINFOD_URLS"] ?? "").split(whereSeparator: { $0 == " " || $0 == "\t" })
      .map(String.init).filter { $0.hasPrefix("http://") || $0.hasPrefix("https://") }
    urls += extraURLs.filter { ($0.hasPrefix("http://") || $0.hasPrefix("https://")) && !urls.contains($0) }
    guard !urls.isEmpty else { return nil }
    let cache: String
    if let path = environment["DEBUGINFOD_CACHE_PATH"], path.hasPrefix("/") {
      cache = path
    } else if let crumbsDirectory {
      cache = crumbsDirectory + "/" + Self.folderName
    } else {
      return nil
    }
    self.init(urls: urls.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }, cachePath: cache)
    if let text = environment["DEBUGINFOD_TIMEOUT"], let seconds = Double(text), seconds > 0 {
      timeout = seconds
    }
    if let text = environment["DEBUGINFOD_MAXTIME"], let seconds = Double(text), seconds > 0 {
      maxTime = seconds
    }
    if let text = environment["DEBUGINFOD_MAXSIZE"], let bytes = Int(text), bytes > 0 { maxSize = bytes }
  }
}

/// A debuginfod client (see the file comment).
public final class DebuginfodClient: RemoteDebugFiles {
  public let settings: DebuginfodSettings
  public let cache: DebuginfodCache
  private let transport: any HTTPTransport
  /// When the first request went (monotonic), for DEBUGINFOD_MAXTIME's total.
  private let firstRequest = Mutex<UInt64?>(nil)
  /// Requests sent (tests: a cached file costs none).
  private let sent = Mutex(0)

  public init(settings: DebuginfodSettings, transport: (any HTTPTransport)? = nil) {
    self.settings = settings
    cache = DebuginfodCache(path: settings.cachePath)
    self.transport = transport ?? DeliveryTransport(timeout: settings.timeout)
  }

  /// How many requests this client sent.
  public var requestCount: Int { sent.withLock { $0 } }

  public func file(buildID: [UInt8], kind: DebugFileKind) -> Result<String, RemoteDebugFileFailure> {
    guard !buildID.isEmpty else { return .failure(.init("no build id")) }
    switch cache.lookup(buildID: buildID, kind: kind) {
    case .file(let path): return .success(path)
    case .miss: return .failure(.init("no server has it (cached miss)"))
    case .none: break
    }
    let hex = LoadedModule.hex(buildID)
    var reasons: [String] = []
    var allMissing = true
    for base in settings.urls {
      let url = base + "/buildid/" + hex + "/" + kind.rawValue
      switch fetch(url, buildID: buildID, kind: kind) {
      case .success(let path):
        return .success(path)
      case .failure(let failure):
        if !failure.notFound { allMissing = false }
        reasons.append("\(Self.withoutCredentials(base)): \(failure.reason)")
      }
    }
    if allMissing { cache.recordMiss(buildID: buildID, kind: kind) }
    return .failure(.init(reasons.joined(separator: "; ")))
  }

  private struct FetchFailure: Error {
    var reason: String
    var notFound = false
  }

  private func fetch(_ url: String, buildID: [UInt8], kind: DebugFileKind) -> Result<String, FetchFailure> {
    download(
      url, id: LoadedModule.hex(buildID), maxBytes: settings.maxSize,
      tooLarge: "larger than DEBUGINFOD_MAXSIZE (\(settings.maxSize) bytes), not kept"
    ).flatMap { body in
      cache.store(body, buildID: buildID, kind: kind).mapError { FetchFailure(reason: $0.reason) }
    }
  }

  /// The whole body of a 200 answer to GET `url`, at most `maxBytes` (past it: "refused:
  /// `tooLarge`"), within the time bounds; else why not.
  private func download(_ url: String, id: String, maxBytes: Int, tooLarge: String) -> Result<
    [UInt8], FetchFailure
  > {
    let now = SystemClock.monotonicNanoseconds()
    var timeout = settings.timeout
    if let maxTime = settings.maxTime {
      let start = firstRequest.withLock { first in
        if first == nil { first = now }
        return first!
      }
      let spent = Double(now - start) / 1e9
      guard spent < maxTime else {
        return .failure(.init(reason: "not asked: DEBUGINFOD_MAXTIME (\(Self.seconds(maxTime))) spent"))
      }
      // The transport bounds a whole exchange at four times its idle timeout.
      timeout = min(timeout, max(0.001, (maxTime - spent) / 4))
    }
    var request = DeliveryRequest(
      destination: "debuginfod", reportID: id, url: url, headers: [], body: [], timeout: timeout)
    request.method = "GET"
    request.maxResponseBodyBytes = maxBytes
    sent.withLock { $0 += 1 }
    let started = SystemClock.monotonicNanoseconds()
    let answer: HTTPResponse
    switch transport.send(request) {
    case .failure(let error):
      return .failure(.init(reason: "\(error) after \(Self.elapsed(since: started))"))
    case .success(let response):
      answer = response
    }
    switch answer.status {
    case 200:
      break
    case 404:
      return .failure(.init(reason: "not found (404)", notFound: true))
    case 300..<400:
      return .failure(.init(reason: "redirect refused (\(answer.status)): redirects are not followed"))
    default:
      return .failure(.init(reason: "HTTP \(answer.status)"))
    }
    guard !answer.bodyTruncated else {
      if answer.body.count >= maxBytes || answer.body.isEmpty && Self.claimed(answer) > maxBytes {
        return .failure(.init(reason: "refused: " + tooLarge))
      }
      return .failure(
        .init(
          reason:
            "refused: the answer was cut short after \(answer.body.count) bytes in \(Self.elapsed(since: started)) (timeout \(Self.seconds(timeout)), or the connection ended)"
        ))
    }
    if let claimed = answer.headers["content-length"], let count = Int(claimed), count != answer.body.count {
      return .failure(.init(reason: "refused: \(answer.body.count) bytes of the \(count) announced"))
    }
    return .success(answer.body)
  }

  /// `url` without a `user:password@` part: a reason lands in reports.
  static func withoutCredentials(_ url: String) -> String {
    let parts = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
    // "scheme:", "", "authority", "rest"
    guard parts.count >= 3, parts[1].isEmpty, let at = parts[2].lastIndex(of: "@") else { return url }
    var cleaned = parts
    cleaned[2] = parts[2][parts[2].index(after: at)...]
    return cleaned.joined(separator: "/")
  }

  private static func claimed(_ answer: HTTPResponse) -> Int {
    answer.headers["content-length"].flatMap { Int($0) } ?? 0
  }

  private static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
  }

  private static func elapsed(since start: UInt64) -> String {
    let milliseconds = (SystemClock.monotonicNanoseconds() - start) / 1_000_000
    return milliseconds >= 1000 ? "\(Double(milliseconds / 100) / 10) s" : "\(milliseconds) ms"
  }
}

// MARK: Source files: GET <server>/buildid/<hex>/source/<absolute path>

extension DebuginfodClient: SourceProvider {
  public var name: String { "debuginfod" }

  /// The source file `path` of the build `buildID`: the cache first (a kept file, or a recent
  /// miss), then each server in turn. What a server sends is untrusted text: at most `limit`
  /// bytes (the source-file cap, not DEBUGINFOD_MAXSIZE), no NUL byte, named like source code
  /// (LocalSourceFiles' rule); kept in the cache only when it passes. Asked only where the
  /// local file is not there (SourceContextOptions: the providers are asked in order).
  public func source(path: String, buildID: String?, limit: Int) -> Result<SourceFile, SourceUnavailable> {
    guard let hex = buildID, DebuginfodCache.isBuildID(hex) else {
      return .failure(SourceUnavailable("no build id"))
    }
    guard path.hasPrefix("/") else { return .failure(SourceUnavailable("a relative path")) }
    guard LocalSourceFiles.isNamedLikeSource(path) else {
      return .failure(SourceUnavailable("not named like source code"))
    }
    var keptRefusal: String?
    switch cache.source(buildID: hex, path: path, limit: limit) {
    case .file(let bytes): return .success(SourceFile(bytes: bytes))
    case .miss: return .failure(SourceUnavailable("debuginfod: no server has it (cached miss)"))
    case .none(let reason): keptRefusal = reason
    }
    var reasons: [String] = keptRefusal.map { [$0] } ?? []
    var allMissing = true
    for base in settings.urls {
      let url = base + "/buildid/" + hex + "/source" + Self.escapedSourcePath(path)
      let fetched = download(url, id: hex, maxBytes: limit, tooLarge: "over \(limit) bytes, not kept")
        .flatMap { body in
          cache.storeSource(body, buildID: hex, path: path, limit: limit).map { body }
            .mapError { FetchFailure(reason: $0.reason) }
        }
      switch fetched {
      case .success(let bytes):
        return .success(SourceFile(bytes: bytes))
      case .failure(let failure):
        if !failure.notFound { allMissing = false }
        reasons.append("\(Self.withoutCredentials(base)): \(failure.reason)")
      }
    }
    if allMissing { cache.recordSourceMiss(buildID: hex, path: path) }
    return .failure(SourceUnavailable("debuginfod: " + reasons.joined(separator: "; ")))
  }

  /// `path` as debuginfod's URL takes it (elfutils' debuginfod(8): every byte not "unreserved"
  /// in RFC 3986 section 2.3 %-escaped, the `/` between components kept).
  static func escapedSourcePath(_ path: String) -> String {
    var result = ""
    for byte in path.utf8 {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"), UInt8(ascii: "/"):
        result.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        let digits = Array("0123456789ABCDEF".utf8)
        result += "%" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
      }
    }
    return result
  }
}

// MARK: The package note's debugInfoUrl

extension DebuginfodSettings {
  /// Why a package note's `debugInfoUrl` is not asked (nil: it may be): the note is untrusted
  /// (any binary can carry one), so only a plain http(s) URL without credentials, spaces or
  /// control characters, at most 1 KiB.
  public static func refusal(ofNoteURL url: String) -> String? {
    guard url.hasPrefix("http://") || url.hasPrefix("https://") else { return "not an http(s) URL" }
    guard url.utf8.count <= 1024 else { return "longer than 1 KiB" }
    guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) else {
      return "holds a space or a control character"
    }
    let authority = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
    guard authority.count >= 3, !authority[2].isEmpty else { return "names no host" }
    guard !authority[2].contains("@") else { return "carries credentials" }
    return nil
  }
}

extension DebuginfodClient {
  /// What a process allowed to fetch debug files (`crumbs symbolicate`, `reports show
  /// --symbolicate`, `crumbs collect`, the next launch with `fetchesDebugFiles`) sets as
  /// `Symbolicator.Options.packageDebugInfo`: for a crashed executable's note `url`, a client
  /// asking DEBUGINFOD_URLS' servers (in `environment`) then `url`, caching as they do (in
  /// `crumbsDirectory` unless DEBUGINFOD_CACHE_PATH names a folder); or why `url` is refused.
  public static func packageNoteClients(environment: [String: String], crumbsDirectory: String?)
    -> @Sendable (String) -> Result<any RemoteDebugFiles, RemoteDebugFileFailure>
  {
    { url in
      if let refusal = DebuginfodSettings.refusal(ofNoteURL: url) {
        return .failure(.init("the package note's debugInfoUrl is not asked: \(refusal)"))
      }
      var noteEnvironment = environment
      if noteEnvironment["DEBUGINFOD_URLS"] == nil { noteEnvironment["DEBUGINFOD_URLS"] = "" }
      guard
        let settings = DebuginfodSettings(
          environment: noteEnvironment, crumbsDirectory: crumbsDirectory, extraURLs: [url])
      else {
        return .failure(.init("the package note's debugInfoUrl is not asked: no cache folder"))
      }
      return .success(DebuginfodClient(settings: settings))
    }
  }
}
