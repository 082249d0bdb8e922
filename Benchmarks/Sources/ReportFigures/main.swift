// ReportFigures — the figures of the crash path and the next launch, measured in one run:
//
//   crash handler   signal delivery → complete record, as the handler measures itself, for a
//                   1 MiB ring and a 64-frame stack (goal ≤ 1 ms); CrashHandler.install (≤ 2 ms)
//   next launch     PostMortemProcessor.run on what such a crash left: read the ring and the
//                   record, symbolicate 64+ frames, LZ4 the trail, store (goal ≤ 50 ms)
//   LZ4             compressing the trail's JSON Lines, against `lz4 -b1` on the same bytes
//   non-fatal       a report from call to stored with a full 1 MiB ring (goal ≤ 5 ms)
//   redaction       the default rules (and with an e-mail pattern) on a full 1 MiB ring's trail,
//                   against the trail encoded without them, and a non-fatal report with
//                   redaction on and off (`Redaction.off`), in the same run
// (CrumbsClient.start is measured by ProcessFigures, in a fresh process as an application
// starts it.)
//
// Each crash is a real child process (this executable, `crash-child DIR`). Medians of ROUNDS.
// Usage: ReportFigures [ROUNDS]   (default 9)

import BenchSummary
import Crumbs
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
}

func milliseconds(_ nanoseconds: Double) -> String { String(format: "%.3f ms", nanoseconds / 1e6) }

func fill(_ ring: BreadcrumbRing, count: Int) {
  for index in 0..<count {
    ring.append(
      "GET /api/v1/orders/\(index) answered 200 in 12 ms (cache miss)",
      level: index % 50 == 0 ? .warning : .info,
      type: .http, attributes: ["method": "GET", "status": "200", "n": String(index)])
  }
}

// MARK: - The crashing child

/// Called through a variable, so the optimizer cannot turn the recursion into a loop.
nonisolated(unsafe) var descendThroughPointer: (Int) -> Int = descend

@inline(never) func descend(_ depth: Int) -> Int {
  if depth == 0 {
    let pointer = UnsafeMutablePointer<Int>(bitPattern: Int(getpid() == 0 ? 1 : 0))
    unsafeBitCast(pointer, to: UnsafeMutablePointer<Int>.self).pointee = 1
    return 0
  }
  return descendThroughPointer(depth - 1) &+ depth
}

func crashChild(directory: String) -> Never {
  do {
    let ring = try RingDirectory(path: directory).createRing()  // 4096 × 256 B = 1 MiB
    ring.install()
    let started = threadCPUNanoseconds()
    try CrashHandler.install(ring: ring)
    let installed = threadCPUNanoseconds() - started
    fill(ring, count: 2 * ring.slotCount)  // wrapped: every slot full
    print("install-ns \(installed)")
    fflush(nil)
    _ = descend(64)
  } catch {
    print("error \(error)")
  }
  exit(1)
}

// MARK: - The parent

func runChild(_ directory: String) -> (status: Int32, installNanoseconds: Double?) {
  let executable = CommandLine.arguments[0]
  let output = directory + "/child.out"
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
  let arguments: [String] = [executable, "crash-child", directory]
  let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { argv.forEach { free($0) } }
  var environment = ProcessInfo.processInfo.environment
  environment["SWIFT_BACKTRACE"] = "enable=no"  // time our handler, not the runtime's backtracer
  let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
  defer { envp.forEach { free($0) } }
  var pid = pid_t()
  guard posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 else { return (-1, nil) }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
  let install = text.split(separator: "\n").first { $0.hasPrefix("install-ns ") }
    .flatMap { Double($0.dropFirst("install-ns ".count)) }
  return (status, install)
}

func temporaryDirectory(_ name: String) -> String {
  let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
  let path = "\(base)/crumbs-figures-\(getpid())-\(name)"
  try? FileManager.default.removeItem(atPath: path)
  try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  return path
}

func lz4CLIThroughput(_ file: String) -> Double? {
  let pipe = Pipe()
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/lz4")
  process.arguments = ["-b1", "-i3", file]
  process.standardOutput = pipe
  process.standardError = pipe
  guard (try? process.run()) != nil else { return nil }
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  // "...: 1048576 -> 300000 (3.49), 600.0 MB/s, 2000.0 MB/s" (progress lines end in \r)
  let text = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\r", with: "\n")
  guard let line = text.split(separator: "\n").last(where: { $0.contains("MB/s") }),
    let range = line.range(of: "MB/s")
  else { return nil }
  let before = line[..<range.lowerBound].split(whereSeparator: { $0 == " " || $0 == "," }).last
  return before.flatMap { Double($0) }
}

if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "crash-child" {
  crashChild(directory: CommandLine.arguments[2])
}

let rounds = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 9 : 9
print(
  "== Crash path and next launch: medians of \(rounds) crashes of a child with a full 1 MiB ring and a 64-deep stack =="
)

var handlerTimes: [Double] = []
var installTimes: [Double] = []
var processingTimes: [Double] = []
var framesSeen: [Int] = []
var trailBytes: [UInt8] = []
for round in 0..<rounds {
  let directory = temporaryDirectory("crash-\(round)")
  let (status, install) = runChild(directory)
  guard status & 0x7f == SIGSEGV else {
    print("round \(round): the child did not die by SIGSEGV (status \(status))")
    continue
  }
  if let install { installTimes.append(install) }
  let started = monotonicNanoseconds()
  let outcome = PostMortemProcessor(
    directory: try RingDirectory(path: directory), store: try ReportStore(directory: directory)
  ).run()
  processingTimes.append(Double(monotonicNanoseconds() - started))
  if let report = outcome.lastSessionCrashReport {
    handlerTimes.append(Double(report.handlerDurationNanoseconds ?? 0))
    framesSeen.append(report.frames.count)
    if trailBytes.isEmpty, let stored = outcome.reports.first, let name = report.breadcrumbs.attachment,
      let compressed = FileManager.default.contents(atPath: stored.attachmentPath(name))
    {
      trailBytes = (try? LZ4Frame.decompress(Array(compressed))) ?? []
    }
  }
  try? FileManager.default.removeItem(atPath: directory)
}
print(
  "  crash handler, signal → complete record:  \(milliseconds(median(handlerTimes)))  (goal ≤ 1 ms; frames \(framesSeen.min() ?? 0)…\(framesSeen.max() ?? 0))"
)
BenchSummary.record(
  "crash handler, signal → complete record", milliseconds(median(handlerTimes)), goal: "≤ 1 ms",
  met: median(handlerTimes) <= 1e6)
BenchSummary.record(
  "next launch: read, symbolicate, LZ4, store", milliseconds(median(processingTimes)), goal: "≤ 50 ms",
  met: median(processingTimes) <= 50e6)
print("  CrashHandler.install (thread CPU time):    \(milliseconds(median(installTimes)))  (goal ≤ 2 ms)")
print(
  "  next launch (read, symbolicate, LZ4, store): \(milliseconds(median(processingTimes)))  (goal ≤ 50 ms)")

// LZ4 on the trail.
if !trailBytes.isEmpty {
  let directory = temporaryDirectory("lz4")
  let file = directory + "/trail.jsonl"
  FileManager.default.createFile(atPath: file, contents: Data(trailBytes))
  var compressedSize = 0
  var times: [Double] = []
  for _ in 0..<30 {
    let started = monotonicNanoseconds()
    compressedSize = (try? LZ4Frame.compress(trailBytes))?.count ?? 0
    times.append(Double(monotonicNanoseconds() - started))
  }
  let ours = Double(trailBytes.count) / (median(times) / 1e9) / 1e6
  let cli = lz4CLIThroughput(file)
  print(
    String(
      format: "  LZ4 on the trail (%d bytes → %d, ratio %.2f): %.0f MB/s; lz4 -b1 on the same bytes: %@",
      trailBytes.count, compressedSize, Double(trailBytes.count) / Double(max(compressedSize, 1)), ours,
      cli.map { String(format: "%.0f MB/s", $0) } ?? "n/a"))
  try? FileManager.default.removeItem(atPath: directory)
}

struct FiguresError: Error {}
let directory = temporaryDirectory("nonfatal")
let client = try CrumbsClient.start(CrumbsConfiguration(directory: directory), shared: false)
client.waitForPreviousSessions()
fill(client.ring, count: 2 * client.ring.slotCount)
var sendTimes: [Double] = []
var sendCPUTimes: [Double] = []
let firstStarted = monotonicNanoseconds()
_ = client.send(error: FiguresError())  // the first parses the modules' symbol tables
let firstSend = Double(monotonicNanoseconds() - firstStarted)
for _ in 0..<max(rounds, 15) {
  let started = monotonicNanoseconds()
  let startedCPU = threadCPUNanoseconds()
  _ = client.send(error: FiguresError())
  sendCPUTimes.append(Double(threadCPUNanoseconds() - startedCPU))
  sendTimes.append(Double(monotonicNanoseconds() - started))
}
// Redaction on the trail: the default rules, and with an e-mail pattern (Swift Regex), against
// the trail's encoding and LZ4 alone; every tenth breadcrumb carries a secret.
for index in 0..<client.ring.slotCount where index % 10 == 0 {
  client.ring.append(
    "POST /login?token=t\(index)&next=/home/alice/app answered 302 for alice@example.com", level: .info,
    type: .http, attributes: ["password": "p\(index)", "user": "alice"])
}
let redactedRing = client.ring.snapshot().breadcrumbs
func trailMedian(_ rules: Redaction?) -> Double {
  var times: [Double] = []
  for _ in 0..<15 {
    let started = threadCPUNanoseconds()
    _ = try? TrailAttachment.make(rules.map { $0.redacting(redactedRing) } ?? redactedRing)
    times.append(Double(threadCPUNanoseconds() - started))
  }
  return median(times)
}
let trailAlone = trailMedian(nil)
let trailRedacted = trailMedian(Redaction())
let trailWithPattern = trailMedian(Redaction(valuePatterns: [Redaction.emailAddresses]))
print(
  "  redaction of a full 1 MiB ring's trail (\(redactedRing.count) breadcrumbs): default rules +\(milliseconds(trailRedacted - trailAlone)) CPU, "
    + "with an e-mail pattern +\(milliseconds(trailWithPattern - trailAlone)) (trail JSON + LZ4 alone: \(milliseconds(trailAlone)))"
)
BenchSummary.record(
  "redaction, full 1 MiB ring's trail (default rules)", "+\(milliseconds(trailRedacted - trailAlone)) CPU",
  goal: "", met: nil)
client.close()
try? FileManager.default.removeItem(atPath: directory)
// A non-fatal report with redaction off, same ring contents: the difference is redaction's.
let offDirectory = temporaryDirectory("nonfatal-off")
var offConfiguration = CrumbsConfiguration(directory: offDirectory)
offConfiguration.redaction = .off
let offClient = try CrumbsClient.start(offConfiguration, shared: false)
offClient.waitForPreviousSessions()
fill(offClient.ring, count: 2 * offClient.ring.slotCount)
_ = offClient.send(error: FiguresError())
var offCPUTimes: [Double] = []
for _ in 0..<max(rounds, 15) {
  let startedCPU = threadCPUNanoseconds()
  _ = offClient.send(error: FiguresError())
  offCPUTimes.append(Double(threadCPUNanoseconds() - startedCPU))
}
offClient.close()
try? FileManager.default.removeItem(atPath: offDirectory)
print(
  "  non-fatal report CPU, redaction on / off (same run): \(milliseconds(median(sendCPUTimes))) / \(milliseconds(median(offCPUTimes)))"
)
print(
  "  non-fatal report, call → stored (1 MiB ring): \(milliseconds(median(sendTimes))) wall, \(milliseconds(median(sendCPUTimes))) CPU  (goal ≤ 5 ms; the first, which parses symbol tables: \(milliseconds(firstSend)))"
)
BenchSummary.record(
  "non-fatal report, call → stored", "\(milliseconds(median(sendCPUTimes))) CPU", goal: "≤ 5 ms",
  met: median(sendCPUTimes) <= 5e6)
