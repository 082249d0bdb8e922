// ConsumerPackage.swift — building the packages in Tests/Consumers the way users build theirs:
// from another package, through Crumbs' public products only.

import CrumbsPlatform
import Testing

@testable import CrumbsRecorder

package enum ConsumerPackage {
  /// The checkout these tests were built from (Tests/CrumbsTestSupport/ConsumerPackage.swift).
  package static let packageRoot: String = {
    var path = "\(#filePath)"
    for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path
  }()

  /// Copies the consumer at `Tests/Consumers/<name>` into `directory` with its path dependency
  /// pointing at this checkout, builds it (its own scratch path under `.build-consumers`, kept
  /// between runs), and returns the built executable. `swiftFlags` go to swiftc (`-Xswiftc`), e.g.
  /// `-static-executable`. `files` are written into the copy first (path inside the package →
  /// text, folders made as needed): a source taken from the documentation, say.
  package static func build(
    _ name: String, in directory: TestDirectory, swiftFlags: [String] = [], files: [String: String] = [:]
  ) throws -> String {
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
    for (path, text) in files {
      let file = copy + "/" + path
      try Syscall.makeDirectories(Syscall.directoryName(of: file))
      try Syscall.writeFileAtomically(file, Array(text.utf8))
    }
    return try build(package: copy, product: name, scratch: name, swiftFlags: swiftFlags)
  }

  /// Builds the server at `Examples/<name>` in place (its path dependency, `../..`, is this
  /// checkout) into `.build-consumers/<name>`, and returns the built executable `name`.
  package static func buildExample(_ name: String) throws -> String {
    try build(package: packageRoot + "/Examples/" + name, product: name, scratch: name, swiftFlags: [])
  }

  private static func build(package copy: String, product name: String, scratch: String, swiftFlags: [String])
    throws -> String
  {
    let scratch = packageRoot + "/.build-consumers/" + scratch
    // A first build resolves and compiles the dependencies: minutes on a busy 2-core machine,
    // so the limit is generous; a later build takes seconds. Without the build manifest cache:
    // a cached manifest of a kept scratch folder misses source files added to Crumbs since, and
    // the build fails on them (SwiftPM 6.3).
    let build = try Subprocess.run(
      "/usr/bin/env",
      [
        "swift", "build", "--package-path", copy, "--scratch-path", scratch, "--product", name,
        "--disable-build-manifest-caching",
      ]
        + swiftFlags.flatMap { ["-Xswiftc", $0] },
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

  /// The fenced block that follows the line holding `marker` in the checkout's README.md (an
  /// HTML comment there, which GitHub does not show): its text without the fence lines. Throws
  /// when the marker, or a fenced block right after it, is missing, so a README edit that drops
  /// the marker fails the test that builds the block rather than building nothing.
  package static func readmeBlock(after marker: String) throws -> String {
    let readme = String(
      decoding: try Syscall.readFile(packageRoot + "/README.md", limit: 1 << 20), as: UTF8.self)
    let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
    let markerLine = try #require(
      lines.firstIndex { $0.contains(marker) }, "README.md has no line holding \(marker)")
    let opening = markerLine + 1
    try #require(
      opening < lines.count && lines[opening].hasPrefix("```"),
      "README.md: no fenced block right after \(marker)")
    let closing = try #require(
      lines[(opening + 1)...].firstIndex { $0.hasPrefix("```") },
      "README.md: the block after \(marker) is not closed")
    return lines[(opening + 1)..<closing].joined(separator: "\n") + "\n"
  }
}
