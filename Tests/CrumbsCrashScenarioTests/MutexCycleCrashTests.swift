// MutexCycleCrashTests.swift — two `Synchronization.Mutex` taken in opposite order (issue 40):
// on Linux the second lock of the cycle is refused by the kernel (FUTEX_LOCK_PI → EDEADLK) and
// the runtime traps with "Recursive call to lock Mutex". A real child crashes so (debug and
// release, backtracer on and off); the next launch's report must name the deadlock between the
// crashing thread and the other one, with the locks (read from the lock words at crash time),
// both lock sites and the runtime's message kept but explained; each other thread's wait is in
// its thread entry. The same record written as version 3 (before the waits) still reads, and
// its report is what it was: the runtime's message, no verdict.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// One "role NAME TID 0xFIRST 0xSECOND" line of the mutex-cycle scenario.
struct MutexRole {
  var name: String
  var tid: Int
  var first: String
  var second: String
}

@Suite("Mutex cycle crash")
struct MutexCycleCrashTests {
  @Test("a refused Mutex lock-order cycle is reported as the deadlock it is", arguments: ChildVariant.all)
  func explained(variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario("mutex-cycle", variant: variant, directory: directory)
    let context = "[\(variant)] \(run.lines.joined(separator: " | "))"
    #expect(run.signal == swiftTrapSignal, "\(context)")
    let roles = run.lines.compactMap { line -> MutexRole? in
      let parts = line.split(separator: " ").map(String.init)
      guard parts.count == 5, parts[0] == "role", let tid = Int(parts[2]) else { return nil }
      return MutexRole(name: parts[1], tid: tid, first: parts[3], second: parts[4])
    }
    try #require(roles.count == 2, "\(context)")
    // Both files as the child left them: the next launch claims them.
    let recordBytes = try Syscall.readFile(try #require(run.recordPath))
    let ring = try #require(run.ringPath)
    let ringBytes = try Syscall.readFile(ring)

    let stored = try #require(try crashReport(leftIn: directory), "\(context)")
    let report = stored.report
    let threads = try #require(report.threads, "\(context)")
    let crashing = try #require(
      roles.first { $0.tid == report.threadID }, "\(report.threadID ?? -1): \(context)")
    let other = try #require(roles.first { $0.tid != crashing.tid })

    // The exception: the cycle, both locks and sites, and the runtime's message explained.
    let message = report.exceptionMessage
    #expect(
      message.hasPrefix(
        "deadlock: \(crashing.name) (tid \(crashing.tid)) → \(other.name) (tid \(other.tid)) → "
          + "\(crashing.name) (tid \(crashing.tid)): "), "\(message)")
    // Now and then both ends are refused at once (their lock calls race through the kernel's
    // chain walk) and the other thread crashes too: it asked for a lock, not known which.
    let waiting = try #require(threads.first { $0.id == other.tid })
    let refusedToo = waiting.state == .alsoCrashed
    if refusedToo {
      #expect(
        message.contains(
          "\(other.name) (tid \(other.tid)) asked for a lock held by \(crashing.name) (tid \(crashing.tid)) "
            + "and was refused too"), "\(message)")
    } else {
      #expect(message.contains("waits for mutex \(other.second) held by \(crashing.name)"), "\(message)")
    }
    #expect(message.contains("Recursive call to lock Mutex") && message.contains("EDEADLK"), "\(message)")
    #expect(message.contains("there is no recursion"), "\(message)")
    #expect(report.exceptionType == "SIGILL" || swiftTrapSignal != SIGILL)

    let attributes = report.attributes
    #expect(attributes["crumbs.crash.verdict"] == .string("deadlock"), "\(attributes)")
    #expect(attributes["crumbs.crash.verdict.threads"] == .string("\(crashing.tid),\(other.tid)"))
    // The lock the crashing thread asked for is found in its registers (then named) or not.
    let locks = attributes["crumbs.crash.verdict.locks"]
    let otherLock = refusedToo ? "?" : other.second
    #expect(
      locks == .string("\(crashing.second),\(otherLock)")
        || (!refusedToo && locks == .string("?,\(otherLock)")),
      "\(String(describing: locks))")
    if locks == .string("?,\(otherLock)") {
      #expect(message.contains("was not in its registers"), "\(message)")
    } else {
      #expect(message.contains("asked for mutex \(crashing.second) held by \(other.name)"), "\(message)")
    }
    #expect(
      attributes["crumbs.crash.verdict.runtime_message"].map { "\($0)" }?.contains(
        "Recursive call to lock Mutex")
        == true, "\(attributes)")
    // Each site is a frame of the app, not of the runtime, the Mutex or libc.
    guard case .string(let sites)? = attributes["crumbs.crash.verdict.sites"] else {
      Issue.record("no sites: \(attributes)")
      return
    }
    let parts = sites.split(separator: " | ")
    #expect(parts.count == 2, "\(sites)")
    for site in parts {
      #expect(
        site != "?" && !site.contains("_MutexHandle") && !site.contains("_assertionFailure"), "\(sites)")
    }

    // The other thread's wait, as its thread entry holds it: a futex on its second lock, whose
    // owner (read from the lock word) is the crashing thread.
    #expect(threads.first { $0.crashed }?.wait == nil)
    #expect(refusedToo || waiting.wait != nil, "\(waiting)")
    if !refusedToo, let wait = waiting.wait {
      #expect(wait.systemCallName == "futex" && wait.owner == UInt32(crashing.tid), "\(wait)")
      #expect(wait.lockKind == .priorityInheritance, "\(wait)")
      #expect(wait.lockAddress.map { "0x" + String($0, radix: 16) } == other.second, "\(wait)")
      #expect(wait.activity == "waiting for PI mutex \(other.second) held by tid \(crashing.tid)")
    }

    // The same record as a version 3 writer left it (no waits): still read, and reported as
    // before: the runtime's message, no verdict.
    let old = try MutexCycleCrashTests.versionThree(recordBytes)
    let record = try old.withUnsafeBytes { try CrashRecord.read(image: $0) }
    #expect(record.version == 3 && record.lockWords == nil && record.waitReadNanoseconds == nil)
    let oldThreads = try #require(record.threads?.threads)
    #expect(oldThreads.count == threads.count && oldThreads.allSatisfy { $0.wait == nil })
    let second = TestDirectory()
    try Syscall.makeDirectory(second.file("rings"), mode: 0o700)
    let name = String(ring.split(separator: "/").last!.dropLast(".ring".count))
    try Syscall.writeFileAtomically(second.file("rings/\(name).ring"), ringBytes)
    try Syscall.writeFileAtomically(second.file("rings/\(name).crash"), old)
    let before = try #require(try crashReport(leftIn: second)?.report)
    #expect(
      before.exceptionMessage.hasSuffix("Fatal error: Recursive call to lock Mutex"),
      "\(before.exceptionMessage)")
    #expect(before.attributes["crumbs.crash.verdict"] == nil)
    #expect(before.threads?.allSatisfy { $0.wait == nil } == true)
  }

  /// `bytes` of a version 4 record cut to a version 3 file (its struct before `waits`, rounded
  /// up to 4 KiB as the writer sized its files), with version and total size set so.
  static func versionThree(_ bytes: [UInt8]) throws -> [UInt8] {
    let size = Int(CRUMBS_CRASH_RECORD_V3_SIZE)
    try #require(bytes.count >= size)
    var old = Array(bytes.prefix((size + 4095) & ~4095))
    old.withUnsafeMutableBytes { raw in
      raw.storeBytes(
        of: 3, toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.version)!, as: UInt32.self)
      raw.storeBytes(
        of: UInt64(size), toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.total_size)!,
        as: UInt64.self)
    }
    return old
  }
}
