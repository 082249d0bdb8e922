// AlternateStackMappingTests.swift — what alternate stacks cost in mappings, with real children
// holding thousands of threads at once (issue 35, case 13: with a stack mapped per thread once
// the pool was used up, a thread cost about 1.9 mappings more, and pthread_create failed at
// half the threads vm.max_map_count allows without Crumbs).
//
// Each child counts /proc/self/maps lines before and after starting 2000 threads that stay
// alive, twice (the second group after the first was joined); one child without Crumbs is the
// baseline. A thread's own cost is 2 mappings (its stack and the guard below it).

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// One group of held threads, as the child printed it.
private struct HeldGroup {
  var started: Int
  var error: Int
  var withStack: Int
  var distinct: Int
  var reused: Int
  var mappingsAdded: Int

  init?(_ line: String) {
    let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
    guard fields.count == 6 else { return nil }
    (started, error, withStack, distinct, reused, mappingsAdded) =
      (fields[0], fields[1], fields[2], fields[3], fields[4], fields[5])
  }
}

@Suite("Alternate stacks: mappings per thread")
struct AlternateStackMappingTests {
  static let threads = 2000

  /// Runs the altstack-mappings scenario; returns its two groups.
  private func held(_ environment: [String: String]) throws -> (HeldGroup, HeldGroup) {
    let directory = TestDirectory()
    var environment = environment
    environment["SWIFT_BACKTRACE"] = "enable=no"
    environment["CRUMBS_TEST_THREADS"] = String(Self.threads)
    let child = try Subprocess(
      ChildProcess.testChild, ["altstack-mappings", directory.path], environment: environment,
      standardError: .file(directory.file("stderr.txt")))
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait(seconds: 60)
    #expect(child.exitCode == 0, "\(lines)")
    let first = try #require(lines.first { $0.hasPrefix("group1 ") }.flatMap(HeldGroup.init), "\(lines)")
    let second = try #require(lines.first { $0.hasPrefix("group2 ") }.flatMap(HeldGroup.init), "\(lines)")
    return (first, second)
  }

  @Test("threads holding alternate stacks cost at most 1.1 times the mappings of threads without")
  func mappingsPerThread() throws {
    let (baseline, _) = try held(["CRUMBS_TEST_NO_CRUMBS": "1"])
    let (first, second) = try held([:])
    try #require(baseline.started == Self.threads && baseline.error == 0, "\(baseline)")
    try #require(first.started == Self.threads && second.started == Self.threads, "\(first) \(second)")
    // Every thread runs on an alternate stack of its own: the pool's 64, then grown chunks.
    #expect(first.withStack == Self.threads && first.distinct == Self.threads, "\(first)")
    #expect(second.withStack == Self.threads && second.distinct == Self.threads, "\(second)")

    let perThread = Double(baseline.mappingsAdded) / Double(Self.threads)
    let perThreadWithStacks = Double(first.mappingsAdded) / Double(Self.threads)
    print(
      "mappings per thread: \(perThread) without Crumbs, \(perThreadWithStacks) with alternate stacks "
        + "(\(first.mappingsAdded) and \(second.mappingsAdded) for \(Self.threads) threads)")
    #expect(
      Double(first.mappingsAdded) <= 1.1 * Double(baseline.mappingsAdded),
      "\(first.mappingsAdded) mappings for \(Self.threads) threads, \(baseline.mappingsAdded) without Crumbs")
    // The second group runs on the stacks the first one gave back: the pool grew no further.
    #expect(second.reused == Self.threads, "\(second)")
    #expect(
      Double(second.mappingsAdded) <= 1.1 * Double(baseline.mappingsAdded),
      "\(second.mappingsAdded) mappings for the second group")
  }

  /// In a forked child every stack but the forking thread's is free again, chunks included:
  /// the child's threads each get one of their own, never one given twice, never the forking
  /// thread's.
  @Test("a forked child hands out the grown pool's stacks once each")
  func forkedChildStacks() throws {
    let directory = TestDirectory()
    let child = try Subprocess(
      ChildProcess.testChild, ["altstack-fork", directory.path],
      environment: ["SWIFT_BACKTRACE": "enable=no", "CRUMBS_TEST_POOL": "1"],
      standardError: .file(directory.file("stderr.txt")))
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait(seconds: 60)
    #expect(child.exitCode == 0, "\(lines)")
    #expect(lines.contains("parent 100 100 100"), "\(lines)")
    #expect(lines.contains("child 200 200 200 0"), "\(lines)")
    #expect(lines.contains("child-exit 0"), "\(lines)")
  }

  /// On a kernel without guard regions (made to answer as one: a seccomp filter fails
  /// MADV_GUARD_INSTALL with EINVAL) the guards are PROT_NONE pages, which split the chunks: the
  /// documented cost, 2 mappings a stack, so twice a thread's own. Every thread still has its
  /// stack.
  @Test("without guard regions, each stack costs 2 mappings, as documented")
  func mappingsWithoutGuardRegions() throws {
    let (baseline, _) = try held(["CRUMBS_TEST_NO_CRUMBS": "1"])
    let (first, _) = try held(["CRUMBS_TEST_NO_GUARD_REGIONS": "1"])
    try #require(first.started == Self.threads, "\(first)")
    #expect(first.withStack == Self.threads && first.distinct == Self.threads, "\(first)")
    print(
      "without guard regions: \(Double(first.mappingsAdded) / Double(Self.threads)) mappings per thread, "
        + "\(Double(baseline.mappingsAdded) / Double(Self.threads)) without Crumbs")
    #expect(Double(first.mappingsAdded) <= 2.1 * Double(baseline.mappingsAdded), "\(first)")
  }

  /// A stack of a chunk the pool grew by has its guard below it (a guard region does not show
  /// in /proc/self/maps, so only a fault tells; without guard regions, a PROT_NONE page): a
  /// store there faults and is recorded.
  @Test("the guard below an alternate stack of a grown chunk faults", arguments: [true, false])
  func grownStackGuard(guardRegions: Bool) throws {
    let directory = TestDirectory()
    var environment = ["CRUMBS_TEST_POOL": "1"]
    if !guardRegions { environment["CRUMBS_TEST_NO_GUARD_REGIONS"] = "1" }
    let run = try runCrashScenario(
      "altstack-guard-grown", variant: ChildVariant(release: false, backtracer: false),
      directory: directory, environment: environment)
    let guardAddress = try #require(run.facts["guard"].flatMap { UInt64($0) }, "\(run.lines)")
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.signal.faultAddress == guardAddress)
  }
}
