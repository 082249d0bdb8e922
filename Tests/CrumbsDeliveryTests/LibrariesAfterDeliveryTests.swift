// LibrariesAfterDeliveryTests.swift — what a process keeps mapped once its client delivered the
// report its previous, crashed session left (a real crash, a real child, its /proc/PID/maps):
// plain http never loads libcurl, and libcurl, when a pass used it, is unloaded at the pass's
// end. Memory a server can afford (issue 37): the figures are the benchmark's; what is checked
// here is what the design guarantees.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct LibrariesAfterDeliveryTests {
  /// The libraries (file names) mapped by a child that started a client delivering to `server`,
  /// once its previous session's crash report was delivered; `environment` is the child's.
  static func librariesAfterDelivery(
    to server: LoopbackHTTPServer, environment: [String: String] = [:]
  ) throws -> (libraries: Set<String>, flushed: String?) {
    let directory = TestDirectory()
    let crash = try ChildProcess(
      ChildProcess.testChild, ["client-release", "1.0", directory.path, "crash"], environment: environment)
    #expect(crash.value(after: "crashing", seconds: 60) != nil)
    crash.wait(seconds: 60)
    let child = try ChildProcess(
      ChildProcess.testChild, ["after-delivery", directory.path, "client", server.baseURL],
      environment: environment)
    defer {
      child.signal(SIGKILL)
      child.wait(seconds: 60)
    }
    let flushed = child.value(after: "flushed ", seconds: 120)
    #expect(child.value(after: "ready", seconds: 60) != nil)
    let maps = try Syscall.readFile("/proc/\(child.pid)/maps")
    let libraries = Set(
      String(decoding: maps, as: UTF8.self).split(separator: "\n").compactMap { line -> String? in
        guard let slash = line.lastIndex(of: "/") else { return nil }
        return String(line[line.index(after: slash)...])
      })
    #expect(
      server.requests.contains { String(decoding: $0.body, as: UTF8.self).contains("SIGSEGV") },
      "the crash report was not delivered: \(flushed ?? "no flush line")")
    return (libraries, flushed)
  }

  /// An OTLP collector on loopback (plain http): the report goes out and libcurl, its TLS and
  /// every library it links were never loaded. Fails on the old code, which sent everything
  /// through libcurl and kept it loaded: libcurl.so.4.8.0, libssl.so.3, libcrypto.so.3…
  @Test func plainHTTPDeliveryNeverLoadsLibcurl() throws {
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let (libraries, _) = try Self.librariesAfterDelivery(to: server)
    let loaded = libraries.filter {
      $0.hasPrefix("libcurl") || $0.hasPrefix("libssl") || $0.hasPrefix("libcrypto")
    }
    #expect(loaded.isEmpty, "mapped after delivery: \(loaded.sorted())")
  }

  /// Through libcurl (CRUMBS_PLAIN_HTTP=libcurl, as https goes): once the pass ended, libcurl
  /// and the libraries only it needed are unmapped again. OpenSSL 3 (libssl, libcrypto) and
  /// p11-kit stay: Debian links them -z nodelete (docs/platform-facts.md). Fails on the old
  /// code, which kept libcurl loaded for the life of the process.
  @Test func libcurlIsUnloadedOnceThePassEnded() throws {
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let (libraries, _) = try Self.librariesAfterDelivery(
      to: server, environment: ["CRUMBS_PLAIN_HTTP": "libcurl"])
    let curl = libraries.filter {
      $0.hasPrefix("libcurl") || $0.hasPrefix("libnghttp2") || $0.hasPrefix("libssh")
    }
    #expect(curl.isEmpty, "mapped after the pass: \(curl.sorted())")
  }
}
