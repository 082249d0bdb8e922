// ChildProcess.swift — the tests' children are `Subprocess`es (the package's one process
// runner); this adds what tests ask of them: where the built products are, line protocols with
// the test child, and waits in seconds.

import CrumbsPlatform

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package typealias ChildProcess = Subprocess

extension Subprocess {
  /// The directory holding the built products (next to the test bundle).
  package static let productsDirectory: String = {
    var path = CommandLine.arguments[0]
    // swift test runs `.build/<config>/<Package>PackageTests.xctest` (a file on Linux).
    while !path.isEmpty, !path.hasSuffix(".xctest") {
      path = String(path.dropLast())
    }
    let bundle = path.isEmpty ? CommandLine.arguments[0] : path
    guard let slash = bundle.lastIndex(of: "/") else { return "." }
    return String(bundle[..<slash])
  }()

  /// The debug test child: the one built next to the tests, unless CRUMBS_TEST_CHILD names
  /// another. `make tsan` names the ordinary debug build's: a child built with the thread
  /// sanitizer dies before its `main` (it replaces malloc, which the sanitizer's runtime, linked
  /// into the same executable, owns), and a crash child's races are not the tests' to find.
  package static var testChild: String {
    if let path = getenv("CRUMBS_TEST_CHILD").map({ String(cString: $0) }), !path.isEmpty { return path }
    return productsDirectory + "/CrumbsTestChild"
  }

  /// Monotonic seconds, for deadlines.
  package static func now() -> Double { SystemClock.monotonicSeconds() }

  /// Reads stdout lines until one starts with `prefix` (at most `seconds`); returns the rest of
  /// that line.
  package func value(after prefix: String, seconds: Double = 60) -> String? {
    let deadline = Self.now() + seconds
    while let line = readLine(timeoutMilliseconds: Self.milliseconds(until: deadline)) {
      if line.hasPrefix(prefix) { return String(line.dropFirst(prefix.count)) }
    }
    return nil
  }

  /// The next stdout line within `seconds`; nil at end of file or after that.
  package func readLine(seconds: Double = 60) -> String? {
    readLine(timeoutMilliseconds: Self.milliseconds(until: Self.now() + seconds))
  }

  /// Reads stdout lines until `last` is seen, end of file, or `seconds` pass.
  package func readLines(until last: String, seconds: Double) -> [String] {
    let deadline = Self.now() + seconds
    var lines: [String] = []
    while let line = readLine(timeoutMilliseconds: Self.milliseconds(until: deadline)) {
      lines.append(line)
      if line == last { break }
    }
    return lines
  }

  /// Everything left on stdout (at most `seconds`).
  package func readRemaining(seconds: Double = 60) -> String {
    String(
      decoding: readToEnd(timeoutMilliseconds: Self.milliseconds(until: Self.now() + seconds)), as: UTF8.self)
  }

  /// Everything on stderr (when piped), up to end of file or `seconds`.
  package func readStderr(seconds: Double = 60) -> String {
    String(
      decoding: readToEnd(
        .standardError, timeoutMilliseconds: Self.milliseconds(until: Self.now() + seconds)),
      as: UTF8.self)
  }

  /// Waits at most `seconds` for the child to end; SIGKILLs it after that. Returns the raw
  /// wait status.
  @discardableResult
  package func wait(seconds: Double = 60) -> Int32 {
    wait(timeoutMilliseconds: Int(seconds * 1000))
  }

  /// The shell's view of how it ended: the exit code, or 128 + the signal.
  package var shellStatus: Int32? { exitCode ?? terminatingSignal.map { 128 + $0 } }

  private static func milliseconds(until deadline: Double) -> Int {
    max(0, Int(((deadline - now()) * 1000).rounded(.up)))
  }
}
