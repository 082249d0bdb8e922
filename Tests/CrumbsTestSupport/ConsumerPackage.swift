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
  /// `-static-executable`.
  package static func build(
    _ name: String, in directory: TestDirectory, swiftFlags: [String] = []
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
    let scratch = packageRoot + "/.build-consumers/" + name
    // A first build resolves and compiles the dependencies: minutes on a busy 2-core machine,
    // so the limit is generous; a later build takes seconds.
    let build = try Subprocess.run(
      "/usr/bin/env",
      ["swift", "build", "--package-path", copy, "--scratch-path", scratch, "--product", name]
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
}
