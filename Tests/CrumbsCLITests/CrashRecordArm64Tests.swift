// CrashRecordArm64Tests.swift — an aarch64 crash record read on this (x86_64) machine (issue 39):
// the record says its machine, `crumbs crash-record dump --json` and the next launch's report
// builder name aarch64's registers, and frames are symbolicated from the aarch64 ELF.
//
// Tests/Fixtures/arm64-unwind.crash is the record the aarch64 driver's `unwind` case left
// (Scripts/check-arm64.sh, Tests/Arm64Driver): a SIGSEGV in a leaf under a callback from libc's
// qsort, built with pointer authentication and run under qemu-aarch64 -cpu max. Its ELF is not
// committed (a megabyte): the symbolication test builds and runs the driver again when Debian's
// cross compiler and qemu-user-static are installed (`make check-arm64` installs them).

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

private let fixture = ConsumerPackage.packageRoot + "/Tests/Fixtures/arm64-unwind.crash"
private let aarch64Names = (0...30).map { "x\($0)" } + ["sp", "pc", "pstate", "fault_address", "esr"]
private let crossToolsPresent =
  access("/usr/bin/aarch64-linux-gnu-gcc", X_OK) == 0 && access("/usr/bin/qemu-aarch64-static", X_OK) == 0

@Suite("An aarch64 crash record read on x86_64")
struct CrashRecordArm64Tests {
  @Test("crash-record dump --json names aarch64's registers, and the frames in the aarch64 driver")
  func dumpNamesAarch64Registers() throws {
    let result = try CLIProcess.run(["crash-record", "dump", "--json", fixture])
    #expect(result.status == 0, "\(result.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    #expect(object["architecture"] as? String == "aarch64")
    #expect(object["signal_name"] as? String == "SIGSEGV")
    #expect(object["fault_address"] as? String == "0x7e57dead0000")
    let registers = try #require(object["registers"] as? [String: String])
    #expect(Set(registers.keys) == Set(aarch64Names), "\(registers.keys.sorted())")
    #expect(registers["pc"] == (object["frames"] as? [String])?.first)
    let frames = try #require(object["frames"] as? [String])
    #expect(frames.count >= 12, "\(frames)")
    let modules = try #require(object["modules"] as? [[String: Any]])
    #expect(modules.contains { ($0["path"] as? String)?.hasSuffix("/arm64-driver") == true }, "\(modules)")
  }

  @Test("the report builder keeps the record's machine: aarch64 registers, host.arch arm64")
  func reportKeepsTheRecordsMachine() throws {
    let record = try CrashRecord.read(file: fixture)
    #expect(record.architecture == "aarch64")
    #expect(record.registers.map(\.name) == aarch64Names)
    var options = Symbolicator.Options()
    options.useLLVMSymbolizer = false
    var builder = CrashReportBuilder(attributes: [:], appVersion: nil, reportingSession: nil)
    builder.symbolicatorOptions = options
    let report = builder.crash(record: record, ring: nil, trailSize: nil, damage: [])
    #expect(report.resource["host.arch"] == "arm64")
    #expect(report.registers.map(\.name) == aarch64Names)
    // The driver's ELF (in a folder deleted after the fixture was made) and the aarch64 libc
    // (named as the emulated process saw it) are not here: each frame keeps its module and
    // offset, and no name is made up from an x86_64 file.
    #expect(report.frames.count == record.frames.count)
    let driver = try #require(record.modules.first { $0.path.hasSuffix("/arm64-driver") }).path
    if access(driver, F_OK) != 0 {
      #expect(report.frames.allSatisfy { $0.function == nil && $0.module != nil }, "\(report.frames)")
    }
  }

  @Test(
    "frames are symbolicated from the aarch64 driver's ELF, in order, through libc",
    .enabled(if: crossToolsPresent, "aarch64-linux-gnu-gcc or qemu-aarch64-static missing (make check-arm64)")
  )
  func symbolicatedFromTheAarch64ELF() throws {
    let directory = TestDirectory()
    let run = try Subprocess.run(
      ConsumerPackage.packageRoot + "/Scripts/check-arm64.sh", [],
      environment: ["ARM64_OUT": directory.path, "ARM64_CASES": "unwind"], timeoutMilliseconds: 600_000)
    let output = String(decoding: run.standardOutput + run.standardError, as: UTF8.self)
    #expect(run.exitStatus == 0, "\(output)")
    let record = try CrashRecord.read(file: directory.file("run/unwind.crash"))
    var builder = CrashReportBuilder(attributes: [:], appVersion: nil, reportingSession: nil)
    builder.symbolicatorOptions.useLLVMSymbolizer = false
    let report = builder.crash(record: record, ring: nil, trailSize: nil, damage: [])
    let names = report.frames.map { $0.function ?? "?" }
    let expected = [
      "driver_leaf", "driver_unwind_c", "driver_compare", "driver_unwind_b", "driver_unwind_a",
      "driver_unwind_child", "driver_run_child", "driver_case_unwind", "main",
    ]
    #expect(names.filter { $0.hasPrefix("driver_") || $0 == "main" } == expected, "\(names)")
    // Between the callback and its caller, libc's qsort frames, in libc's own module.
    let compare = try #require(names.firstIndex(of: "driver_compare"))
    let caller = try #require(names.firstIndex(of: "driver_unwind_b"))
    #expect(caller > compare + 1, "\(names)")
    #expect(
      report.frames[(compare + 1)..<caller].allSatisfy {
        $0.module.map { $0.hasSuffix("/libc.so.6") } ?? false
      },
      "\(report.frames)")
    #expect(report.frames[0].foundBy == nil && report.frames[1].foundBy == .cfi, "\(report.frames)")

    // The next launch (what `crumbs collect` runs) over the pair the driver left, named by its
    // session as a Crumbs directory names them: the same frames, aarch64's registers.
    let crumbs = TestDirectory()
    let rings = try RingDirectory(path: crumbs.path).ringsPath
    for suffix in ["ring", "crash"] {
      let bytes = try Syscall.readFile(directory.file("run/unwind.\(suffix)"))
      try Syscall.writeFileAtomically(rings + "/\(record.sessionID).\(suffix)", bytes, durable: false)
    }
    let stored = try #require(try crashReport(leftIn: crumbs), "no report from the aarch64 pair")
    #expect(stored.report.registers.map(\.name) == aarch64Names)
    #expect(stored.report.resource["host.arch"] == "arm64")
    let launchNames = stored.report.frames.map { $0.function ?? "?" }
    #expect(launchNames.filter { $0.hasPrefix("driver_") || $0 == "main" } == expected, "\(launchNames)")
  }
}
