// CrashScenarioRunner.swift — running the test child through a crash scenario and collecting
// what it printed, its exit status and its stderr; the debug/release × backtracer matrix.
// What the next launch makes of it is CrumbsReportTestSupport's `crashReport(leftIn:)`.

import CrumbsPlatform
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// One way of running the child.
package struct ChildVariant: CustomStringConvertible, Sendable {
  package var release: Bool
  package var backtracer: Bool

  package init(release: Bool, backtracer: Bool) {
    self.release = release
    self.backtracer = backtracer
  }
  package var description: String { (release ? "release" : "debug") + (backtracer ? "+backtracer" : "") }

  package static let all = [
    ChildVariant(release: false, backtracer: false), ChildVariant(release: false, backtracer: true),
    ChildVariant(release: true, backtracer: false), ChildVariant(release: true, backtracer: true),
  ]

  /// The child executable, or nil when this variant is not available.
  package var executable: String? {
    if !release { return ChildProcess.testChild }
    guard let path = getenv("CRUMBS_RELEASE_CHILD").map({ String(cString: $0) }), !path.isEmpty
    else { return nil }
    return path
  }

  package var environment: [String: String] {
    ["SWIFT_BACKTRACE": backtracer ? "enable=yes,interactive=no,color=no" : "enable=no"]
  }
}

#if arch(x86_64)
  package let swiftTrapSignal = SIGILL
  package let swiftTrapCode: Int32? = 2  // ILL_ILLOPN: ud2
#else
  package let swiftTrapSignal = SIGTRAP
  package let swiftTrapCode: Int32? = nil
#endif

// MARK: - Running a crashing child

/// A finished crash scenario: what the child printed, how it died, what it left.
package struct CrashRun {
  package var facts: [String: String] = [:]
  package var lines: [String] = []
  package var status: Int32 = 0
  package var stderr = ""
  package var recordPath: String? { facts["record"] }
  package var ringPath: String? { facts["ring"] }

  package var signal: Int32? {
    let low = status & 0x7f
    return low != 0 && low != 0x7f ? low : nil
  }
  package var exitCode: Int32? { status & 0x7f == 0 ? (status >> 8) & 0xff : nil }
  /// The shell's view: 128 + signal (139 for SIGSEGV, 132 for SIGILL, 134 for SIGABRT).
  package var shellStatus: Int32 { signal.map { 128 + $0 } ?? exitCode ?? -1 }

  /// "function NAME 0xADDRESS" → the address.
  package var functionAddress: UInt64? {
    guard let text = facts["function"], let hex = text.split(separator: " ").last,
      hex.hasPrefix("0x")
    else { return nil }
    return UInt64(hex.dropFirst(2), radix: 16)
  }
}

/// `swift-backtrace` helper processes started for `pid` that are still alive.
package func backtraceHelpers(for pid: pid_t) -> [pid_t] {
  guard let entries = try? Syscall.directoryEntries("/proc") else { return [] }
  var found: [pid_t] = []
  for name in entries {
    guard let helper = pid_t(name),
      let bytes = try? Syscall.readFile("/proc/\(name)/cmdline", limit: 1 << 16)
    else { continue }
    let arguments = bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    guard let program = arguments.first, program.hasSuffix("swift-backtrace") else { continue }
    if let index = arguments.firstIndex(of: "--pid"), index + 1 < arguments.count,
      arguments[index + 1] == String(pid)
    {
      found.append(helper)
    }
  }
  return found
}

/// Runs `scenario` in a fresh directory; `whileRunning` gets the child after "crashing" was
/// printed (e.g. to send it a signal). Checks that no backtracer helper is left behind.
package func runCrashScenario(
  _ scenario: String, variant: ChildVariant, directory: TestDirectory,
  environment: [String: String] = [:], whileRunning: ((Subprocess, CrashRun) -> Void)? = nil
) throws -> CrashRun {
  let executable = try #require(variant.executable)
  let stderrPath = directory.file("stderr.txt")
  let child = try Subprocess(
    executable, [scenario, directory.path],
    environment: variant.environment.merging(environment) { _, new in new },
    standardError: .file(stderrPath))
  var run = CrashRun()
  run.lines = child.readLines(until: "crashing", seconds: 60)
  for line in run.lines {
    guard let space = line.firstIndex(of: " ") else { continue }
    let key = String(line[..<space])
    run.facts[key] = String(line[line.index(after: space)...])  // the last one wins
  }
  whileRunning?(child, run)
  // The backtracer symbolicates before the process dies: allow it time, bounded.
  run.status = child.wait(seconds: 120)
  run.lines += child.readLines(until: "\u{0}never", seconds: 0.2)
  run.stderr = (try? Syscall.readFile(stderrPath)).map { String(decoding: $0, as: UTF8.self) } ?? ""

  // No orphaned swift-backtrace helper: poll (bounded) for any to finish, then kill and fail.
  let deadline = ChildProcess.now() + 20
  var helpers = backtraceHelpers(for: child.pid)
  while !helpers.isEmpty && ChildProcess.now() < deadline {
    var descriptor = pollfd(fd: -1, events: 0, revents: 0)
    _ = poll(&descriptor, 0, 50)
    helpers = backtraceHelpers(for: child.pid)
  }
  for helper in helpers { kill(helper, SIGKILL) }
  #expect(helpers.isEmpty, "orphaned swift-backtrace helper(s) \(helpers) for \(scenario)")
  return run
}
