// `crumbs demo`: the whole story with nothing set up. A child process installs Crumbs, records
// breadcrumbs from several threads and crashes; then this process plays the next launch: it
// finds what the child left, builds and stores the report, and prints it.

import ArgumentParser
import Crumbs
import CrumbsPlatform
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

struct DemoCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "demo",
    abstract: "Run the whole story: a child records breadcrumbs, crashes, and its report is printed.")

  @Option(help: "How the child dies: \(CrashKind.allCases.map(\.rawValue).joined(separator: ", ")).")
  var crash: String = CrashKind.nullDereference.rawValue

  @Option(help: "Where the demo's files go.")
  var dir: String = "crumbs-demo"

  @Flag(help: "Print the stored report object as JSON instead of the human-readable form.")
  var json = false

  @OptionGroup var color: ColorOptions

  func validate() throws {
    guard CrashKind(rawValue: crash) != nil else {
      throw ValidationError(
        "unknown crash kind '\(crash)'; one of: \(CrashKind.allCases.map(\.rawValue).joined(separator: ", "))"
      )
    }
  }

  func run() throws {
    let kind = CrashKind(rawValue: crash)!
    let directory = absolute(dir)
    let style = TerminalStyle(enabled: !json && color.enabled)
    if !json {
      print(style.bold("Crumbs demo") + " — files in \(directory)")
      print(
        "1. A child process installs Crumbs, appends breadcrumbs from 3 threads, then crashes (\(kind.rawValue))."
      )
    }
    let status = try runChild(kind: kind, directory: directory)
    if !json {
      print("   The child is gone: \(describe(waitStatus: status)).")
      print(
        style.dim(
          "   (its stderr, with the Swift runtime's own backtrace that Crumbs chains to: \(stderrPath(directory)))"
        ))
      print("2. Next launch: Crumbs finds what the child left and turns it into a report.\n")
    }
    let ringDirectory = try RingDirectory(path: directory)
    let store = try ReportStore(directory: directory)
    var processor = PostMortemProcessor(directory: ringDirectory, store: store)
    // A person reads this one: file and line from llvm-symbolizer when it is installed.
    processor.symbolicatorOptions.useLLVMSymbolizer = true
    let outcome = processor.run()
    for problem in outcome.problems { printError("crumbs demo: \(problem)") }
    guard let stored = outcome.reports.last else {
      printError("crumbs demo: the child left no report (outcome: \(outcome.sessions.map(\.end.rawValue)))")
      throw ExitCode.failure
    }
    if json {
      print(String(decoding: try stored.readFile("report.json", limit: 64 << 20), as: UTF8.self))
    } else {
      print(ReportPrinter(style: style).render(stored))
    }
  }

  /// Starts `crumbs demo-child` and waits for it; returns its raw wait status.
  func runChild(kind: CrashKind, directory: String) throws -> Int32 {
    // The child's stderr (where the Swift runtime's own backtracer, which Crumbs chains to,
    // prints) goes to a file so the report is not interleaved with it.
    do {
      try Syscall.makeDirectories(directory)
      let child = try Subprocess(
        selfExecutable(), ["demo-child", "--crash", kind.rawValue, "--dir", directory],
        standardOutput: .inherit, standardError: .file(stderrPath(directory)))
      return child.wait(timeoutMilliseconds: nil)
    } catch {
      printError("crumbs demo: cannot start the child: \(error)")
      throw ExitCode.failure
    }
  }
}

/// `crumbs demo-child` (hidden): the process that records and crashes.
struct DemoChildCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "demo-child", abstract: "The demo's crashing child.", shouldDisplay: false)

  @Option var crash: String
  @Option var dir: String

  func run() throws {
    guard let kind = CrashKind(rawValue: crash) else { throw ExitCode.validationFailure }
    var options = RingOptions()
    options.appName = "crumbs-demo"
    let ring = try RingDirectory(path: dir).createRing(options: options)
    ring.install()
    try CrashHandler.install(ring: ring)
    let workers = DemoWorkload.start(threads: 3)
    addBreadcrumb(
      "checkout screen opened", level: .info, type: .navigation, attributes: ["screen": "checkout"])
    workers.waitUntil(appended: 300)
    addBreadcrumb(
      "user tapped Pay", level: .info, type: .user, attributes: ["button": "pay", "cart.items": "3"])
    addBreadcrumb(
      "payment service slow: retrying", level: .warning, type: .http,
      attributes: ["http.url": "/v1/charge", "attempt": "2"])
    addBreadcrumb("about to crash on purpose: \(kind.rawValue)", level: .error, type: .manual)
    withExtendedLifetime(ring) {}
    generateTestCrash(kind: kind)
  }
}

func stderrPath(_ directory: String) -> String { directory + "/child.stderr" }

func selfExecutable() -> String {
  Syscall.readLink("/proc/self/exe") ?? CommandLine.arguments[0]
}

func absolute(_ path: String) -> String { Syscall.absolutePath(path) }

func describe(waitStatus status: Int32) -> String {
  let signal = status & 0x7f
  if signal == 0 { return "exited with status \((status >> 8) & 0xff)" }
  let name = String(cString: strsignal(signal))
  return "killed by signal \(signal) (\(SignalNames.name(signal)): \(name)), shell status \(128 + signal)"
}

func printError(_ line: String) {
  Array((line + "\n").utf8).withUnsafeBytes { _ = try? Syscall.writeAll(2, $0, path: "stderr") }
}
