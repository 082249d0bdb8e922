// ReportFigures — the figures of the crash path and the next launch, measured in one run:
//
//   crash handler   signal delivery → complete record, as the handler measures itself, for a
//                   1 MiB ring and a 64-frame stack (goal ≤ 1 ms); CrashHandler.install (≤ 2 ms)
//   next launch     PostMortemProcessor.run on what such a crash left: read the ring and the
//                   record, symbolicate 64+ frames, LZ4 the trail, store (goal ≤ 10 ms)
//   LZ4             compressing the trail's JSON Lines, against `lz4 -b1` on the same bytes
//   non-fatal       a report from call to stored with a full 1 MiB ring (goal ≤ 5 ms)
//   redaction       the default rules (and with an e-mail pattern) on a full 1 MiB ring's trail,
//                   against the trail encoded without them, and a non-fatal report with
//                   redaction on and off (`Redaction.off`), in the same run
//   phases          where the next launch's and the non-fatal report's time goes: each step
//                   timed alone (wall and thread CPU), in the same run as the whole, so the
//                   split and the total can be compared (PhaseTimes)
// (CrumbsClient.start is measured by ProcessFigures, in a fresh process as an application
// starts it.)
//
// Each crash is a real child process (this executable, `crash-child DIR`). Medians of ROUNDS.
// Usage: ReportFigures [ROUNDS]   (default 9)

import BenchSummary
import Crumbs
// The report path's trail steps on a ring's contents as read (text as bytes), one at a time.
@_spi(Benchmarks) import CrumbsReports
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

func milliseconds(_ nanoseconds: Double) -> String { String(format: "%.3f ms", nanoseconds / 1e6) }

func fill(_ ring: BreadcrumbRing, count: Int) {
  for index in 0..<count {
    ring.append(
      "GET /api/v1/orders/\(index) answered 200 in 12 ms (cache miss)",
      level: index % 50 == 0 ? .warning : .info,
      type: .http, attributes: ["method": "GET", "status": "200", "n": String(index)])
  }
}

/// The steps of one path, each timed alone round after round (wall and thread CPU): medians,
/// printed in the order first timed, with their sum to set against the whole path's figure. A
/// step whose name starts with a space is a part of the step above or a comparison (the way it
/// was done before): printed indented, left out of the sum.
struct PhaseTimes {
  private var names: [String] = []
  private var wall: [String: [Double]] = [:]
  private var cpu: [String: [Double]] = [:]

  mutating func time<T>(_ name: String, _ body: () throws -> T) rethrows -> T {
    if wall[name] == nil { names.append(name) }
    let startedCPU = threadCPUNanoseconds()
    let started = monotonicNanoseconds()
    let result = try body()
    wall[name, default: []].append(Double(monotonicNanoseconds() - started))
    cpu[name, default: []].append(Double(threadCPUNanoseconds() - startedCPU))
    return result
  }

  func print(_ title: String) {
    Swift.print("  \(title) (medians, wall / thread CPU):")
    let width = names.map(\.count).max() ?? 0
    for name in names {
      let padded = name + String(repeating: " ", count: width - name.count)
      Swift.print("    \(padded)  \(milliseconds(median(wall[name]!))) / \(milliseconds(median(cpu[name]!)))")
    }
    let padded = "sum" + String(repeating: " ", count: max(0, width - 3))
    let steps = names.filter { !$0.hasPrefix(" ") }
    Swift.print(
      "    \(padded)  \(milliseconds(steps.map { median(wall[$0]!) }.reduce(0, +))) / \(milliseconds(steps.map { median(cpu[$0]!) }.reduce(0, +)))"
    )
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

/// Times the next launch's steps one by one on what a crash left in `directory`, changing
/// nothing there (no ring claimed, no file removed): PostMortemProcessor.run then does them all,
/// timed as a whole. Returns the compressed trail, for the store step (timed after the run).
func timeNextLaunchPhases(_ directory: String, into phases: inout PhaseTimes) -> [UInt8]? {
  let rings = directory + "/rings"
  guard let names = try? FileManager.default.contentsOfDirectory(atPath: rings),
    let ringName = names.first(where: { $0.hasSuffix(".ring") })
  else { return nil }
  let ringPath = rings + "/" + ringName
  let recordPath = String(ringPath.dropLast(".ring".count)) + ".crash"
  guard
    let ring = try? phases.time(
      "ring read (file, every slot decoded)", { try RingReader.read(file: ringPath) }),
    let record = try? phases.time("crash record read", { try CrashRecord.read(file: recordPath) })
  else { return nil }
  // A next launch is a new process: nothing parsed yet (this one parsed the same files before).
  Symbolicator.forgetParsedModules()
  _ = phases.time("symbolicate the crashing thread (symbol tables parsed)") {
    Symbolicator(modules: record.modules, options: PostMortemProcessor.defaultSymbolication)
      .symbolicate(record.frames)
  }
  // What that step cost before SymbolScan (issue 26), in the same run: each module holding a
  // frame read whole, its table sorted.
  let framed = Symbolicator(modules: record.modules)
  let paths = Set(record.frames.compactMap { framed.module(containing: $0)?.path })
  _ = phases.time("  (the same modules' tables read whole and sorted, as before SymbolScan)") {
    paths.map { try? ELFImage.read(path: $0) }
  }
  let redacted = phases.time("redaction (default rules)") { Redaction().redacting(ring) }
  let json = phases.time("trail JSON Lines") { TrailAttachment.jsonLines(redacted) }
  return phases.time("LZ4") { try? LZ4Frame.compress(json) }
}

/// Times storing `report` (a copy under a new id) with `trail` into `store`: report.json
/// encoded, the index and the trail written, each with fsync, the folder renamed into pending/.
func timeStore(_ report: CrashReport, trail: [UInt8], into store: ReportStore, phases: inout PhaseTimes) {
  var copy = report
  copy.id = SessionID().description
  _ = phases.time("store (report.json encoded, files written with fsync, renamed)") {
    try? store.store(copy, attachments: [(TrailAttachment.name, trail)])
  }
}

/// report.json's encodings by `JSONEncoder`, compared in the non-fatal steps: the store's before
/// issue 26, then until ReportStore.encode wrote it by hand through JSONWriter
/// (CrashReport+JSON.swift: a quarter to a sixth of the compact one's CPU; internal, so not timed
/// here), and without sorted keys.
let reportJSONLayouts: [(String, JSONEncoder.OutputFormatting)] = [
  (
    "  of the store: report.json pretty-printed, sorted (before)",
    [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
  ),
  (
    "  of the store: report.json compact, sorted (JSONEncoder, before JSONWriter)",
    [.sortedKeys, .withoutEscapingSlashes]
  ),
  ("  of the store: report.json compact, unsorted", [.withoutEscapingSlashes]),
]

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
var nextLaunchPhases = PhaseTimes()
let phaseDirectory = temporaryDirectory("phase-store")
let phaseStore = try ReportStore(directory: phaseDirectory)
for round in 0..<rounds {
  let directory = temporaryDirectory("crash-\(round)")
  let (status, install) = runChild(directory)
  guard status & 0x7f == SIGSEGV else {
    print("round \(round): the child did not die by SIGSEGV (status \(status))")
    continue
  }
  if let install { installTimes.append(install) }
  let compressedTrail = timeNextLaunchPhases(directory, into: &nextLaunchPhases)
  Symbolicator.forgetParsedModules()  // a new process's: see timeNextLaunchPhases
  let started = monotonicNanoseconds()
  let outcome = PostMortemProcessor(
    directory: try RingDirectory(path: directory), store: try ReportStore(directory: directory)
  ).run()
  processingTimes.append(Double(monotonicNanoseconds() - started))
  if let compressedTrail, let stored = outcome.reports.first {
    timeStore(stored.report, trail: compressedTrail, into: phaseStore, phases: &nextLaunchPhases)
  }
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
  "next launch: read, symbolicate, LZ4, store", milliseconds(median(processingTimes)), goal: "≤ 10 ms",
  met: median(processingTimes) <= 10e6)
print("  CrashHandler.install (thread CPU time):    \(milliseconds(median(installTimes)))  (goal ≤ 2 ms)")
print(
  "  next launch (read, symbolicate, LZ4, store): \(milliseconds(median(processingTimes)))  (goal ≤ 10 ms, issue 26)"
)
nextLaunchPhases.print("next launch, step by step, on the same crashes")

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
// Where a non-fatal report's time goes: its steps one by one, with the same full ring.
var nonFatalPhases = PhaseTimes()
if let sample = client.send(error: FiguresError()) {
  let addresses = sample.report.frames.compactMap { frame in
    frame.address.hasPrefix("0x") ? UInt64(frame.address.dropFirst(2), radix: 16) : nil
  }
  let symbolicator = Symbolicator(
    modules: CurrentProcessModules.list(), options: PostMortemProcessor.defaultSymbolication)
  // Its tables parsed once, as the client keeps them.
  _ = symbolicator.symbolicate(addresses, firstIsExactPC: false)
  for _ in 0..<max(rounds, 15) {
    _ = nonFatalPhases.time("module list (dl_iterate_phdr)") { CurrentProcessModules.list() }
    _ = nonFatalPhases.time("symbolicate \(addresses.count) frames (tables already parsed)") {
      symbolicator.symbolicate(addresses, firstIsExactPC: false)
    }
    let snapshot = nonFatalPhases.time("ring snapshot (every slot decoded)") { client.ring.snapshot() }
    let redacted = nonFatalPhases.time("redaction (default rules)") { Redaction().redacting(snapshot) }
    let json = nonFatalPhases.time("trail JSON Lines") { TrailAttachment.jsonLines(redacted) }
    let compressed = nonFatalPhases.time("LZ4") { (try? LZ4Frame.compress(json)) ?? [] }
    timeStore(sample.report, trail: compressed, into: phaseStore, phases: &nonFatalPhases)
    // Inside the store: report.json's encoding as stored before issue 26 and now, and the
    // limits pass on its own (it looks at every stored report: this store keeps the run's).
    for (name, formatting) in reportJSONLayouts {
      let encoder = JSONEncoder()
      encoder.outputFormatting = formatting
      _ = nonFatalPhases.time(name) { try? encoder.encode(sample.report) }
    }
    _ = nonFatalPhases.time("  of the store: enforceLimits (every stored report looked at)") {
      phaseStore.enforceLimits()
    }
  }
}
try? FileManager.default.removeItem(atPath: phaseDirectory)

// Redaction on the trail: the default rules, and with an e-mail pattern (Swift Regex), against
// the trail's encoding and LZ4 alone; every tenth breadcrumb carries a secret.
for index in 0..<client.ring.slotCount where index % 10 == 0 {
  client.ring.append(
    "POST /login?token=t\(index)&next=/home/alice/app answered 302 for alice@example.com", level: .info,
    type: .http, attributes: ["password": "p\(index)", "user": "alice"])
}
let redactedRing = client.ring.snapshot()
func trailMedian(_ rules: Redaction?) -> Double {
  var times: [Double] = []
  for _ in 0..<15 {
    let started = threadCPUNanoseconds()
    // What TrailAttachment.make does, on the contents as read (as the report path does).
    _ = try? LZ4Frame.compress(
      TrailAttachment.jsonLines(rules.map { $0.redacting(redactedRing) } ?? redactedRing))
    times.append(Double(threadCPUNanoseconds() - started))
  }
  return median(times)
}
let trailAlone = trailMedian(nil)
let trailRedacted = trailMedian(Redaction())
let trailWithPattern = trailMedian(Redaction(valuePatterns: [Redaction.emailAddresses]))
print(
  "  redaction of a full 1 MiB ring's trail (\(redactedRing.counts.valid) breadcrumbs): default rules +\(milliseconds(trailRedacted - trailAlone)) CPU, "
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
nonFatalPhases.print("non-fatal report, step by step, same ring")
BenchSummary.record(
  "non-fatal report, call → stored", "\(milliseconds(median(sendCPUTimes))) CPU", goal: "≤ 5 ms",
  met: median(sendCPUTimes) <= 5e6)
