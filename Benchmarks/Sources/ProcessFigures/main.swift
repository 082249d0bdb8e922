// ProcessFigures — what Crumbs costs a process outside the append, measured on real child
// processes in one run (the `make bench` block "Process figures"):
//
//   start      exec → main of a plain Swift program, a recorder-only one (CrumbsRecorder: no
//              Foundation) and a client (the whole SDK); CrumbsClient.start on the caller's
//              thread (wall and thread CPU) and the recorder's set-up (ring + crash handler), in
//              a directory earlier runs used (a later launch, the usual case), and the client's
//              start in a new directory (a first launch: it makes its folders); and, apart, the
//              time to make the CrumbsConfiguration the start is given (also the caller's)
//   memory     RSS once set up: recorder-only against plain (goal: within the ring's size + 1 MiB);
//              the client's after a clean exit and once it has reported a crash
//   death      fault → the parent's waitpid returns: the client against a program that links
//              Foundation (what every Swift server links; issue 26 retired the old goal of ≤ 2×
//              a recorder-only process: the rest is the kernel unmapping FoundationEssentials),
//              and against a recorder-only one, for reference
//   exit       exit(0) → the parent's waitpid returns, likewise; and for reference a
//              program without Crumbs that links FoundationNetworking, as every client did
//              before CrumbsDelivery loaded libcurl with dlopen (most of a client's end was that
//              library tree's), one that links Foundation only; and the client
//              without its memory monitor, whose thread (the client's only long-lived one) the
//              kernel must wake and let exit before the parent is told: on a busy machine that
//              waits for a CPU
//
// The children are PlainProcess, RecorderProcess, ClientProcess, NetworkingProcess and FoundationProcess (Foundation
// without FoundationNetworking), built next to this program
// (see ProcessChildSupport for what they do and print). Each kind keeps one directory from run
// to run (a client's start then processes the previous run's session, in the background), and
// the Swift runtime's backtracer is off in them (SWIFT_BACKTRACE=enable=no) so a crash times
// Crumbs' handler and the kernel, not the backtracer's symbolication. Kinds are interleaved
// round by round, so each ratio compares measurements taken through the same noise; medians.
//
// Usage: ProcessFigures [ROUNDS]   (default 15)

import BenchSummary
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

func ms(_ nanoseconds: Double) -> String { String(format: "%.2f ms", nanoseconds / 1e6) }

let rounds = max(3, CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 15)
let binDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
let scratch =
  (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/crumbs-process-figures-\(getpid())"
try? FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: scratch) }

/// What one child run reported.
struct ChildRun {
  var spawnToMain: Double = .nan
  var residentKiB: Double = .nan
  var setUp: Double = .nan
  var setUpCPU: Double = .nan
  var configuration: Double = .nan
  var endToReaped: Double = .nan
  var status: Int32 = -1
}

nonisolated(unsafe) var serial = 0

/// Kinds that run another kind's program with something set in its environment.
let variants: [String: (program: String, environment: [String: String])] = [
  "ClientNoMonitor": ("ClientProcess", ["CRUMBS_BENCH_NO_MEMORY_MONITOR": "1"])
]

/// Runs `program ACTION DIR` and collects its lines (see ProcessChildSupport). DIR is the
/// program's own directory, kept from run to run as an application's is (a later launch), or
/// with `fresh` a new one (a first launch: the client then makes its folders).
func run(_ kind: String, _ action: String, fresh: Bool = false) -> ChildRun {
  serial += 1
  // A kind is a program, or a program with an environment (see `variants`).
  let (program, extra) = variants[kind] ?? (kind, [:])
  let directory = fresh ? "\(scratch)/\(kind)-\(serial)" : "\(scratch)/\(kind)"
  try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  defer { if fresh { try? FileManager.default.removeItem(atPath: directory) } }
  var output: [Int32] = [0, 0]
  var input: [Int32] = [0, 0]
  guard pipe(&output) == 0, pipe(&input) == 0 else { return ChildRun() }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_adddup2(&actions, output[1], 1)
  posix_spawn_file_actions_adddup2(&actions, input[0], 0)
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
  for descriptor in output + input { posix_spawn_file_actions_addclose(&actions, descriptor) }
  let path = binDirectory + "/" + program
  let arguments = [path, action, directory]
  var environment = ProcessInfo.processInfo.environment
  environment["SWIFT_BACKTRACE"] = "enable=no"
  environment.merge(extra) { $1 }
  let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
  defer { (argv + envp).forEach { free($0) } }
  var pid = pid_t()
  let spawned = monotonicNanoseconds()
  guard posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 else {
    print("ProcessFigures: cannot start \(path)")
    exit(1)
  }
  close(output[1])
  close(input[0])
  var result = ChildRun()
  var pending = [UInt8]()
  var buffer = [UInt8](repeating: 0, count: 512)
  var endAt: UInt64?
  reading: while true {
    let count = read(output[0], &buffer, buffer.count)
    if count <= 0 { break }
    pending += buffer[0..<count]
    while let newline = pending.firstIndex(of: 10) {
      let line = String(decoding: pending[..<newline], as: UTF8.self)
      pending.removeSubrange(...newline)
      let fields = line.split(separator: " ")
      switch fields.first {
      case "main": result.spawnToMain = Double((UInt64(fields[1]) ?? spawned) &- spawned)
      case "ready":
        result.residentKiB = Double(fields[1]) ?? .nan
        result.setUp = Double(fields[2]) ?? .nan
        result.setUpCPU = Double(fields[3]) ?? .nan
        if fields.count > 4 { result.configuration = Double(fields[4]) ?? .nan }
        if action == "wait" {
          var byte: UInt8 = 1
          _ = write(input[1], &byte, 1)
        }
      case "end": endAt = UInt64(fields[1])
      case "error": print("ProcessFigures: \(program): \(line)")
      default: break
      }
      if endAt != nil { break reading }
    }
  }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  let reaped = monotonicNanoseconds()
  close(output[0])
  close(input[1])
  result.status = status
  if let endAt { result.endToReaped = Double(reaped &- endAt) }
  return result
}

print("")
print(
  "== Process figures: medians of \(rounds) child processes per kind, interleaved (SWIFT_BACKTRACE=enable=no) =="
)

var waits: [String: [ChildRun]] = [:]
var crashes: [String: [ChildRun]] = [:]
var exits: [String: [ChildRun]] = [:]
var firstLaunches: [ChildRun] = []
let kinds = [
  "PlainProcess", "RecorderProcess", "ClientProcess", "NetworkingProcess", "FoundationProcess",
  "ClientNoMonitor",
]
for kind in kinds { _ = run(kind, "exit") }  // each kind's directory, as a first launch left it
for _ in 0..<rounds {
  firstLaunches.append(run("ClientProcess", "wait", fresh: true))
  for kind in kinds {
    waits[kind, default: []].append(run(kind, "wait"))
    let crash = run(kind, "crash")
    if crash.status & 0x7f != SIGSEGV {
      print("ProcessFigures: \(kind) crash ended with status \(crash.status), not SIGSEGV")
    }
    crashes[kind, default: []].append(crash)
    exits[kind, default: []].append(run(kind, "exit"))
  }
}

func figure(_ runs: [String: [ChildRun]], _ kind: String, _ value: (ChildRun) -> Double) -> Double {
  median((runs[kind] ?? []).map(value).filter { !$0.isNaN })
}

let names = [
  "PlainProcess": "plain Swift", "RecorderProcess": "recorder only", "ClientProcess": "client",
  "NetworkingProcess": "FoundationNetworking, no Crumbs", "FoundationProcess": "Foundation only, no Crumbs",
  "ClientNoMonitor": "client, no memory monitor",
]
for kind in kinds {
  let startup = figure(waits, kind, \.spawnToMain)
  let rss = figure(waits, kind, \.residentKiB)
  print(
    "  \(names[kind]!.padding(toLength: 32, withPad: " ", startingAt: 0)) exec → main \(ms(startup)), RSS \(Int(rss)) KiB, "
      + "fault → death \(ms(figure(crashes, kind, \.endToReaped))), exit(0) → reaped \(ms(figure(exits, kind, \.endToReaped)))"
  )
}
let plainStart = figure(waits, "PlainProcess", \.spawnToMain)
let recorderStart = figure(waits, "RecorderProcess", \.spawnToMain)
let plainRSS = figure(waits, "PlainProcess", \.residentKiB)
let recorderRSS = figure(waits, "RecorderProcess", \.residentKiB)
let ringKiB = (8192.0 + 4096.0 * 256.0) / 1024.0  // the default ring: header, lane page, 4096 × 256 B
let clientStart = figure(waits, "ClientProcess", \.setUp)
let clientStartCPU = figure(waits, "ClientProcess", \.setUpCPU)
let clientConfiguration = figure(waits, "ClientProcess", \.configuration)
let recorderSetUp = figure(waits, "RecorderProcess", \.setUp)
let deathRatio =
  figure(crashes, "ClientProcess", \.endToReaped) / figure(crashes, "RecorderProcess", \.endToReaped)
let exitRatio =
  figure(exits, "ClientProcess", \.endToReaped) / figure(exits, "RecorderProcess", \.endToReaped)
let firstLaunchStart = median(firstLaunches.map(\.setUp).filter { !$0.isNaN })
print(
  "CrumbsClient.start on the caller's thread: \(ms(clientStart)) wall, \(ms(clientStartCPU)) CPU "
    + "(goal ≤ 1 ms: \(verdict(clientStart <= 1e6))); making its CrumbsConfiguration before: "
    + "\(ms(clientConfiguration)); first launch in a new directory (its folders made): "
    + "\(ms(firstLaunchStart)); recorder set-up (ring + crash handler): \(ms(recorderSetUp))")
print(
  "recorder-only start: \(ms(recorderStart - plainStart)) after a plain program's (goal ≤ 1 ms: \(verdict(recorderStart - plainStart <= 1e6))), "
    + "RSS +\(Int(recorderRSS - plainRSS)) KiB (goal ≤ the ring's \(Int(ringKiB)) KiB + 1024: \(verdict(recorderRSS - plainRSS <= ringKiB + 1024)))"
)
// Each round's exit run follows its crash run, so a client's exit run first reported that crash
// (symbolicated it, wrote the report) before it said `ready`; its wait run followed a clean exit.
let clientRSSAfterClean = figure(waits, "ClientProcess", \.residentKiB)
let clientRSSAfterCrash = figure(exits, "ClientProcess", \.residentKiB)
print(
  "client RSS once started: \(Int(clientRSSAfterClean)) KiB after a clean exit, "
    + "\(Int(clientRSSAfterCrash)) KiB once it has reported the previous session's crash")
print(
  "fault → death, client / recorder only: \(String(format: "%.2f", deathRatio))×; "
    + "exit(0) → reaped: \(String(format: "%.2f", exitRatio))× (no goal since issue 26: see the Foundation figures)"
)
let networkingDeath = figure(crashes, "NetworkingProcess", \.endToReaped)
let networkingExit = figure(exits, "NetworkingProcess", \.endToReaped)
print(
  "for reference, a program that only links FoundationNetworking (as every client did before "
    + "the curl transport): fault → death \(ms(networkingDeath)), exit(0) → reaped \(ms(networkingExit)); "
    + "client / that: \(String(format: "%.2f", figure(crashes, "ClientProcess", \.endToReaped) / networkingDeath))× "
    + "and \(String(format: "%.2f", figure(exits, "ClientProcess", \.endToReaped) / networkingExit))×")
let foundationDeath = figure(crashes, "FoundationProcess", \.endToReaped)
let foundationExit = figure(exits, "FoundationProcess", \.endToReaped)
let foundationDeathRatio = figure(crashes, "ClientProcess", \.endToReaped) / foundationDeath
let foundationExitRatio = figure(exits, "ClientProcess", \.endToReaped) / foundationExit
print(
  "and one that links Foundation but not FoundationNetworking: fault → death \(ms(foundationDeath)), "
    + "exit(0) → reaped \(ms(foundationExit)), RSS \(Int(figure(waits, "FoundationProcess", \.residentKiB))) KiB; "
    + "client / that: \(String(format: "%.2f", foundationDeathRatio))× and \(String(format: "%.2f", foundationExitRatio))×"
)
let quietDeath = figure(crashes, "ClientNoMonitor", \.endToReaped)
let quietExit = figure(exits, "ClientNoMonitor", \.endToReaped)
print(
  "and the client without its memory monitor (no thread left for the kernel to wake and end): "
    + "fault → death \(ms(quietDeath)), exit(0) → reaped \(ms(quietExit)); / recorder only: "
    + "\(String(format: "%.2f", quietDeath / figure(crashes, "RecorderProcess", \.endToReaped)))× and "
    + "\(String(format: "%.2f", quietExit / figure(exits, "RecorderProcess", \.endToReaped)))×")

BenchSummary.record(
  "CrumbsClient.start on the caller's thread",
  "\(ms(clientStart)) (first launch, new directory: \(ms(firstLaunchStart)))",
  goal: "≤ 1 ms", met: clientStart <= 1e6)
BenchSummary.record(
  "recorder-only program vs plain Swift",
  "start \(ms(recorderStart - plainStart)), RSS +\(Int(recorderRSS - plainRSS)) KiB",
  goal: "≤ 1 ms, ≤ ring + 1 MiB",
  met: recorderStart - plainStart <= 1e6 && recorderRSS - plainRSS <= ringKiB + 1024)
BenchSummary.record(
  "client RSS, after a clean exit / a crash",
  "\(Int(clientRSSAfterClean)) KiB / \(Int(clientRSSAfterCrash)) KiB (the crash reported)")
BenchSummary.record(
  "fault → death / exit(0) → reaped, client / a Foundation-linked program",
  "\(String(format: "%.2f", foundationDeathRatio))× / \(String(format: "%.2f", foundationExitRatio))× "
    + "(\(ms(figure(crashes, "ClientProcess", \.endToReaped))) / \(ms(figure(exits, "ClientProcess", \.endToReaped))))"
)
BenchSummary.record(
  "  for reference: client / recorder only",
  "\(String(format: "%.2f", deathRatio))× / \(String(format: "%.2f", exitRatio))× (recorder only: "
    + "\(ms(figure(crashes, "RecorderProcess", \.endToReaped))) / \(ms(figure(exits, "RecorderProcess", \.endToReaped))))"
)
BenchSummary.record(
  "  for reference: FoundationNetworking, no Crumbs",
  "fault to death \(ms(networkingDeath)), exit(0) to reaped \(ms(networkingExit))")
BenchSummary.record(
  "  for reference: Foundation only, no Crumbs",
  "fault to death \(ms(foundationDeath)), exit(0) to reaped \(ms(foundationExit))")
BenchSummary.record(
  "  for reference: client, no memory monitor",
  "fault to death \(ms(quietDeath)), exit(0) to reaped \(ms(quietExit))")
