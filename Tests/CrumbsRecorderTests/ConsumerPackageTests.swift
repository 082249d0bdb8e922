// ConsumerPackageTests.swift — Crumbs used the way users use it: from another package, through
// its public products only. The consumer's own Package.swift names the product; nothing here
// reaches into the package's internals except to read back what the consumer recorded.

import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct ConsumerPackageTests {
  /// The checkout this test was built from (Tests/CrumbsTests/ConsumerPackageTests.swift).
  static let packageRoot: String = {
    var path = "\(#filePath)"
    for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path
  }()

  /// Copies the consumer at `Tests/Consumers/<name>` into `directory` with its path dependency
  /// pointing at this checkout, builds it (its own scratch path under `.build-consumers`, kept
  /// between runs), and returns the built executable.
  static func buildConsumer(_ name: String, in directory: TestDirectory) throws -> String {
    let source = packageRoot + "/Tests/Consumers/" + name
    let copy = directory.file(name)
    let copied = try Subprocess.run("/bin/cp", ["-R", source, copy], timeoutMilliseconds: 60_000)
    #expect(copied.exitStatus == 0)
    let manifestPath = copy + "/Package.swift"
    let manifest = String(decoding: try Syscall.readFile(manifestPath, limit: 1 << 20), as: UTF8.self)
    #expect(manifest.contains("path: \"../../..\""))
    try Syscall.writeFileAtomically(
      manifestPath,
      Array(manifest.replacing("path: \"../../..\"", with: "path: \"\(packageRoot)\"").utf8))
    let scratch = packageRoot + "/.build-consumers/" + name
    // A first build resolves and compiles the dependencies: minutes on a busy 2-core machine,
    // so the limit is generous; a later build takes seconds.
    let build = try Subprocess.run(
      "/usr/bin/env",
      ["swift", "build", "--package-path", copy, "--scratch-path", scratch, "--product", name],
      timeoutMilliseconds: 30 * 60_000)
    let log = String(decoding: build.standardOutput + build.standardError, as: UTF8.self)
    try #require(build.exitStatus == 0, "swift build of \(name) failed:\n\(log)")
    let binPath = try Subprocess.run(
      "/usr/bin/env",
      ["swift", "build", "--package-path", copy, "--scratch-path", scratch, "--show-bin-path"],
      timeoutMilliseconds: 10 * 60_000)
    let bin = String(decoding: binPath.standardOutput, as: UTF8.self).split(separator: "\n").last ?? ""
    return String(bin) + "/" + name
  }

  @Test func aRecorderOnlyProgramLinksNoFoundationCurlOrICUAndRecords() throws {
    let directory = TestDirectory()
    let executable = try Self.buildConsumer("RecorderConsumer", in: directory)

    let ldd = try Subprocess.run("/usr/bin/ldd", [executable], timeoutMilliseconds: 60_000)
    let libraries = String(decoding: ldd.standardOutput, as: UTF8.self).split(separator: "\n")
    #expect(ldd.exitStatus == 0)
    #expect(libraries.contains { $0.contains("libswiftCore.so") })  // ldd really listed it
    for forbidden in ["libFoundation", "libcurl", "libicu", "libxml2", "libgnutls"] {
      let found = libraries.filter { $0.contains(forbidden) }
      #expect(found.isEmpty, "the recorder consumer links \(found)")
    }
    print("recorder consumer links \(libraries.count) shared libraries")

    let crumbsDirectory = directory.file("crumbs")
    let run = try Subprocess.run(executable, [crumbsDirectory], timeoutMilliseconds: 60_000)
    #expect(run.exitStatus == 0, "\(String(decoding: run.standardError, as: UTF8.self))")
    let ringPath = String(decoding: run.standardOutput, as: UTF8.self).split(separator: "\n").first ?? ""
    let contents = try RingReader.read(file: String(ringPath))
    #expect(contents.header.state == .clean)
    #expect(contents.header.appName == "recorder-consumer")
    #expect(contents.breadcrumbs.map(\.message) == ["GET /items → 200", "consumer done"])
    #expect(contents.breadcrumbs.first?.attributes.first?.value == "200")
  }
}
