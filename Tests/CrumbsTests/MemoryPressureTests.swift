import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

// Memory-pressure monitor: the kernel's file formats parsed, fixture trees driven sample by sample
// (levels, crossings, events, rate limit, the session flag), the thread started and stopped, and a
// real child OOM-killed in a small memory cgroup on this machine.
#if canImport(Glibc)
  import Glibc
#endif

/// A fake / with /proc and /sys files in the kernel's formats.
final class KernelFixture {
  let directory = TestDirectory()
  var root: String { directory.path }

  func write(_ path: String, _ text: String) throws {
    try Syscall.makeDirectories(Syscall.directoryName(of: root + path))
    try Syscall.writeFileAtomically(root + path, Array(text.utf8))
  }

  static func psi(someAvg10: Double = 0, fullAvg10: Double = 0, someTotal: UInt64 = 0, fullTotal: UInt64 = 0)
    -> String
  {
    """
    some avg10=\(someAvg10) avg60=0.00 avg300=0.00 total=\(someTotal)
    full avg10=\(fullAvg10) avg60=0.00 avg300=0.00 total=\(fullTotal)

    """
  }

  static func events(high: UInt64 = 0, max: UInt64 = 0, oom: UInt64 = 0, oomKill: UInt64 = 0) -> String {
    "low 0\nhigh \(high)\nmax \(max)\noom \(oom)\noom_kill \(oomKill)\noom_group_kill 0\n"
  }

  static func meminfo(totalKB: UInt64, availableKB: UInt64) -> String {
    """
    MemTotal:       \(totalKB) kB
    MemFree:         1000000 kB
    MemAvailable:   \(availableKB) kB
    Buffers:          123456 kB

    """
  }

  /// A cgroup v2 process in /app.slice/web.service with memory.max `limit`.
  func cgroupV2(limit: String = "104857600", current: UInt64 = 10 << 20) throws -> String {
    let directory = "/sys/fs/cgroup/app.slice/web.service"
    try write("/proc/self/cgroup", "0::/app.slice/web.service\n")
    try write(directory + "/memory.current", "\(current)\n")
    try write(directory + "/memory.max", limit + "\n")
    try write(directory + "/memory.high", "max\n")
    try write(directory + "/memory.events", Self.events())
    // The root has no limit file in reality; "max" is the same.
    try write("/sys/fs/cgroup/memory.max", "max\n")
    return directory
  }
}

private func monitor(
  _ fixture: KernelFixture, ring: BreadcrumbRing,
  configure: (inout MemoryPressureConfiguration) -> Void = { _ in }
)
  -> MemoryPressureMonitor
{
  var configuration = MemoryPressureConfiguration()
  configuration.root = fixture.root
  configuration.pressureTrigger = nil
  configure(&configuration)
  return MemoryPressureMonitor(configuration: configuration, target: .ring(ring))
}

private func memoryCrumbs(_ ring: BreadcrumbRing) -> [Breadcrumb] {
  ring.snapshot().breadcrumbs.filter { $0.type == .system }
}

private func attribute(_ crumb: Breadcrumb?, _ key: String) -> String? {
  crumb?.attributes.first { $0.key == key }?.value
}

private let second: UInt64 = 1_000_000_000

@Suite struct KernelTextTests {
  @Test func pressureStallLinesParse() throws {
    let text =
      "some avg10=12.50 avg60=3.10 avg300=0.80 total=1234567\nfull avg10=4.00 avg60=1.00 avg300=0.20 total=7654\n"
    let stall = try #require(KernelText.pressureStall(ArraySlice(text.utf8)))
    #expect(stall.someAverage10 == 12.5)
    #expect(stall.fullAverage10 == 4.0)
    #expect(stall.someTotalMicroseconds == 1_234_567)
    #expect(stall.fullTotalMicroseconds == 7654)
    #expect(KernelText.pressureStall(ArraySlice("full avg10=1.00 avg60=0 avg300=0 total=1\n".utf8)) == nil)
    #expect(KernelText.pressureStall(ArraySlice("garbage\n".utf8)) == nil)
  }

  @Test func flatKeyedFilesParse() {
    let pairs = KernelText.keyedNumbers(
      ArraySlice(KernelFixture.events(high: 3, max: 2, oom: 1, oomKill: 1).utf8))
    #expect(
      pairs.map { "\($0.0)=\($0.1)" } == [
        "low=0", "high=3", "max=2", "oom=1", "oom_kill=1", "oom_group_kill=0",
      ])
  }

  @Test func limitsReadMaxAndV1UnlimitedAsNone() {
    #expect(KernelText.limit(ArraySlice("max\n".utf8)) == nil)
    #expect(KernelText.limit(ArraySlice("9223372036854771712\n".utf8)) == nil)
    #expect(KernelText.limit(ArraySlice("268435456\n".utf8)) == 268_435_456)
  }

  @Test func meminfoGivesBytes() throws {
    let memory = try #require(
      KernelText.systemMemory(ArraySlice(KernelFixture.meminfo(totalKB: 1000, availableKB: 250).utf8)))
    #expect(memory == SystemMemory(totalBytes: 1_024_000, availableBytes: 256_000))
  }

  @Test func meminfoThatDoesNotParseGivesNothingAndNeverTraps() {
    let huge = "MemTotal:       99999999999999999999 kB\nMemAvailable:   18446744073709551615 kB\n"
    #expect(KernelText.systemMemory(ArraySlice(huge.utf8)) == nil)
    #expect(KernelText.systemMemory(ArraySlice("MemTotal: kB\nMemAvailable: 5 kB\n".utf8)) == nil)
    #expect(KernelText.systemMemory(ArraySlice("".utf8)) == nil)
    // The real file's shape, the two lines apart, and a unit-less value.
    let real = "MemTotal:       16318500 kB\nMemFree:         1000 kB\nMemAvailable:   2048\n"
    #expect(
      KernelText.systemMemory(ArraySlice(real.utf8))
        == SystemMemory(totalBytes: 16_318_500 * 1024, availableBytes: 2048))
  }
}

@Suite struct MemoryPressureFixtureTests {
  @Test func cgroupV2CrossingsEscalateOnceEachThenRelieve() throws {
    let fixture = KernelFixture()
    let directory = try fixture.cgroupV2(limit: "104857600", current: 50 << 20)
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring)
    #expect(watcher.sources.cgroup?.directory == fixture.root + directory)

    watcher.sampleNow(at: 1 * second)  // 50%: quiet
    #expect(memoryCrumbs(ring).isEmpty)
    #expect(!ring.snapshot().header.receivedMemoryWarning)

    try fixture.write(directory + "/memory.current", "\(85 << 20)\n")
    watcher.sampleNow(at: 2 * second)  // 85%: warning
    try fixture.write(directory + "/memory.current", "\(86 << 20)\n")
    watcher.sampleNow(at: 3 * second)  // still warning: nothing new
    try fixture.write(directory + "/memory.current", "\(93 << 20)\n")
    watcher.sampleNow(at: 4 * second)  // 93%: error
    try fixture.write(directory + "/memory.events", KernelFixture.events(max: 4))
    watcher.sampleNow(at: 5 * second)  // limit hit 4 times: an event, same level
    try fixture.write(directory + "/memory.events", KernelFixture.events(max: 4, oom: 1, oomKill: 1))
    watcher.sampleNow(at: 6 * second)  // OOM kill: fatal
    try fixture.write(directory + "/memory.current", "\(40 << 20)\n")
    watcher.sampleNow(at: 7 * second)  // back to 40%: relieved

    let crumbs = memoryCrumbs(ring)
    #expect(crumbs.map(\.level) == [.warning, .error, .error, .fatal, .info])
    #expect(crumbs.map { attribute($0, "memory.pressure") } == ["warning", "error", "error", "fatal", nil])
    #expect(
      crumbs[0].message == "memory pressure warning: cgroup (v2) at 85% of its limit (85 MiB of 100 MiB)")
    #expect(attribute(crumbs[0], "memory.source") == "cgroup")
    #expect(attribute(crumbs[0], "cgroup.usage") == String(85 << 20))
    #expect(attribute(crumbs[0], "cgroup.limit") == "104857600")
    #expect(attribute(crumbs[2], "cgroup.max") == "+4")
    #expect(crumbs[3].message.contains("OOM killer killed 1"))
    #expect(attribute(crumbs[3], "cgroup.oom_kill") == "+1")
    #expect(crumbs[4].message == "memory pressure relieved")
    #expect(crumbs.allSatisfy { !$0.truncated })
    #expect(ring.snapshot().header.receivedMemoryWarning)
    // What the next launch makes of it: the OOM evidence names the last pressure breadcrumb.
    let evidence = OOMEvidence.gather(ring.snapshot())
    #expect(evidence.contains("the session recorded memory-pressure warnings"))
    #expect(evidence.contains { $0.hasPrefix("last memory-pressure breadcrumb: memory pressure fatal") })
  }

  @Test func aUsageFarOverItsLimitIsReportedNotTrapped() throws {
    // Kernel files are bytes we did not write: a usage 2^61 times its limit is a percentage no
    // Int holds.
    let fixture = KernelFixture()
    _ = try fixture.cgroupV2(limit: "1", current: 1 << 61)
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    monitor(fixture, ring: ring).sampleNow(at: 1 * second)
    let crumb = try #require(memoryCrumbs(ring).first)
    #expect(crumb.level == .fatal)
    #expect(
      crumb.message.hasPrefix("memory pressure fatal: cgroup (v2) at 2.305843009213694e+20% of its limit"))
  }

  @Test func countersBeforeTheFirstSampleDoNotCount() throws {
    let fixture = KernelFixture()
    let directory = try fixture.cgroupV2()
    try fixture.write(directory + "/memory.events", KernelFixture.events(high: 9, max: 9, oom: 2, oomKill: 2))
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring)
    watcher.sampleNow(at: 1 * second)
    watcher.sampleNow(at: 2 * second)
    #expect(memoryCrumbs(ring).isEmpty)
    try fixture.write(
      directory + "/memory.events", KernelFixture.events(high: 10, max: 9, oom: 2, oomKill: 2))
    watcher.sampleNow(at: 3 * second)
    #expect(memoryCrumbs(ring).map(\.level) == [.warning])
    #expect(attribute(memoryCrumbs(ring).first, "cgroup.high") == "+1")
  }

  @Test func aStormIsRateLimitedAndTheSkippedAreCounted() throws {
    let fixture = KernelFixture()
    let directory = try fixture.cgroupV2()
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring) {
      $0.rateLimit.burst = 3
      $0.rateLimit.refillSeconds = 10
    }
    // 200 limit hits, one per 100 ms sample: 20 s of storm.
    var now = second
    watcher.sampleNow(at: now)
    for hits in 1...200 {
      now += second / 10
      try fixture.write(directory + "/memory.events", KernelFixture.events(max: UInt64(hits)))
      watcher.sampleNow(at: now)
    }
    // The burst of 3 at once, then one more when a token has refilled (10 s later).
    let during = memoryCrumbs(ring)
    #expect(during.count == 4)
    #expect(during.allSatisfy { $0.level == .error })
    #expect(during.prefix(3).allSatisfy { attribute($0, "memory.suppressed") == nil })
    #expect(attribute(during.last, "memory.suppressed").flatMap(Int.init) ?? 0 > 90)
    // After a quiet spell, the next one goes out and says how many were skipped since the last.
    now += 60 * second
    try fixture.write(directory + "/memory.events", KernelFixture.events(max: 201))
    watcher.sampleNow(at: now)
    let after = memoryCrumbs(ring)
    #expect(after.count == 5)
    let skipped = after.compactMap { attribute($0, "memory.suppressed") }.compactMap(Int.init).reduce(0, +)
    #expect(skipped == 200 - 4)
  }

  @Test func aLastingLevelIsRemindedAtTheRepeatInterval() throws {
    let fixture = KernelFixture()
    _ = try fixture.cgroupV2(current: 85 << 20)
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring) { $0.rateLimit.repeatSeconds = 30 }
    for tick in 0...60 { watcher.sampleNow(at: UInt64(tick + 1) * second) }
    // At 1 s, then 31 s, then 61 s.
    #expect(memoryCrumbs(ring).map(\.level) == [.warning, .warning, .warning])
  }

  @Test func psiSamplingUsesTheStallSinceTheLastSample() throws {
    let fixture = KernelFixture()
    try fixture.write("/proc/self/cgroup", "0::/\n")
    try fixture.write("/proc/pressure/memory", KernelFixture.psi(someTotal: 1_000_000, fullTotal: 0))
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring)
    #expect(watcher.sources.pressureFile == fixture.root + "/proc/pressure/memory")
    watcher.sampleNow(at: 10 * second)
    // 250 ms of "some" stall in 1 s: 25%, a warning although avg10 still says 0.
    try fixture.write("/proc/pressure/memory", KernelFixture.psi(someTotal: 1_250_000, fullTotal: 0))
    watcher.sampleNow(at: 11 * second)
    // Then 600 ms of "full" stall in the next second: fatal.
    try fixture.write("/proc/pressure/memory", KernelFixture.psi(someTotal: 1_900_000, fullTotal: 600_000))
    watcher.sampleNow(at: 12 * second)
    let crumbs = memoryCrumbs(ring)
    #expect(crumbs.map(\.level) == [.warning, .fatal])
    #expect(attribute(crumbs[0], "memory.source") == "psi")
    #expect(attribute(crumbs[0], "psi.some") == "25%")
    #expect(attribute(crumbs[1], "psi.full") == "60%")
    #expect(crumbs[0].message == "memory pressure warning: tasks stalled on memory 25% of the time")
  }

  @Test func psiAverageAloneCrossesToo() throws {
    let fixture = KernelFixture()
    try fixture.write("/proc/self/cgroup", "0::/\n")
    try fixture.write("/proc/pressure/memory", KernelFixture.psi(someAvg10: 45.5, fullAvg10: 2))
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    monitor(fixture, ring: ring).sampleNow(at: second)
    #expect(memoryCrumbs(ring).map(\.level) == [.error])
  }

  @Test func meminfoIsTheFallback() throws {
    let fixture = KernelFixture()
    try fixture.write("/proc/meminfo", KernelFixture.meminfo(totalKB: 16_000_000, availableKB: 1_200_000))
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring)
    #expect(watcher.sources.cgroup == nil && watcher.sources.pressureFile == nil)
    watcher.sampleNow(at: second)  // 7.5% available: warning
    try fixture.write("/proc/meminfo", KernelFixture.meminfo(totalKB: 16_000_000, availableKB: 240_000))
    watcher.sampleNow(at: 2 * second)  // 1.5%: fatal
    let crumbs = memoryCrumbs(ring)
    #expect(crumbs.map(\.level) == [.warning, .fatal])
    #expect(attribute(crumbs[0], "memory.source") == "meminfo")
    #expect(attribute(crumbs[0], "meminfo.available") == String(1_200_000 * 1024))
    #expect(ring.snapshot().header.receivedMemoryWarning)
  }

  @Test func cgroupV1UsesTheTightestAncestorLimitAndFailcnt() throws {
    let fixture = KernelFixture()
    let parent = "/sys/fs/cgroup/memory/batch"
    let directory = parent + "/job-7"
    try fixture.write("/proc/self/cgroup", "5:memory:/batch/job-7\n1:cpu:/\n0::/\n")
    try fixture.write(parent + "/memory.limit_in_bytes", "209715200\n")  // 200 MiB on the parent
    try fixture.write(parent + "/memory.usage_in_bytes", "0\n")
    try fixture.write(directory + "/memory.limit_in_bytes", "9223372036854771712\n")  // unlimited
    try fixture.write(directory + "/memory.usage_in_bytes", "\(100 << 20)\n")
    try fixture.write(directory + "/memory.failcnt", "0\n")
    try fixture.write(directory + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring)
    #expect(watcher.sources.cgroup?.version == .v1)
    #expect(watcher.sources.limitDirectory == fixture.root + parent)
    watcher.sampleNow(at: second)  // 50% of the parent's limit: quiet
    try fixture.write(directory + "/memory.usage_in_bytes", "\(190 << 20)\n")
    try fixture.write(directory + "/memory.failcnt", "12\n")
    watcher.sampleNow(at: 2 * second)  // 95% and the limit hit: error, as an event
    try fixture.write(directory + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    watcher.sampleNow(at: 3 * second)
    let crumbs = memoryCrumbs(ring)
    #expect(crumbs.map(\.level) == [.error, .fatal])
    #expect(attribute(crumbs[0], "cgroup.failcnt") == "+12")
    #expect(attribute(crumbs[0], "cgroup.limit") == "209715200")
    #expect(attribute(crumbs[1], "cgroup.oom_kill") == "+1")
  }

  @Test func theThreadSamplesUntilStoppedAndStopsCleanly() throws {
    let fixture = KernelFixture()
    let directory = try fixture.cgroupV2(current: 10 << 20)
    let ring = try BreadcrumbRing.create(at: fixture.directory.file("r.ring"))
    defer { ring.close() }
    let watcher = monitor(fixture, ring: ring) { $0.samplingIntervalMilliseconds = 100 }
    let mode = try watcher.start()
    #expect(mode == .sampling(reason: "no PSI file"))
    #expect(throws: MemoryPressureMonitor.StartError.alreadyRunning) { try watcher.start() }
    try fixture.write(directory + "/memory.current", "\(99 << 20)\n")
    var seen = false
    for _ in 0..<1000 where !seen {  // bounded: up to ~10 s
      seen = memoryCrumbs(ring).contains { $0.level == .fatal }
      if !seen { usleep(10_000) }
    }
    #expect(seen)
    watcher.stop()
    #expect(watcher.mode == .stopped)
    let taken = watcher.samplesTaken
    // Stopped means stopped: the thread is joined, nothing samples any more.
    try fixture.write(directory + "/memory.current", "\(10 << 20)\n")
    watcher.sampleNow(at: SystemClock.monotonicNanoseconds())
    #expect(watcher.samplesTaken == taken + 1)
    watcher.stop()  // idempotent
  }

  @Test func byDefaultTheMonitorArmsNoTriggerAndHoldsNoPressureFile() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let watcher = MemoryPressureMonitor(target: .ring(ring))
    let mode = try watcher.start()
    defer { watcher.stop() }
    if access("/proc/pressure/memory", R_OK) == 0 {
      #expect(mode == .sampling(reason: "PSI trigger not requested"))
    }
    #expect(openPressureFiles().isEmpty)
  }

  @Test func onThisMachineTheMonitorStartsInTheBestModeTheKernelAllows() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    var configuration = MemoryPressureConfiguration()
    configuration.pressureTrigger = PressureTrigger()
    let watcher = MemoryPressureMonitor(configuration: configuration, target: .ring(ring))
    let mode = try watcher.start()
    defer { watcher.stop() }
    let psiWritable = access("/proc/pressure/memory", W_OK) == 0
    switch mode {
    case .pressureTrigger(let file, _, let window):
      #expect(psiWritable)
      #expect(file.hasSuffix("pressure/memory") || file.hasSuffix("memory.pressure"))
      #expect(window % 1_000_000 == 0)
    case .sampling(let reason):
      #expect(!reason.isEmpty)
    case .stopped:
      Issue.record("a started monitor reports .stopped")
    }
    print("memory monitor here: \(mode); \(watcher.sourceDescription)")
  }
}

/// Why a test cgroup could not be made: what failed and the errno.
struct CgroupUnavailable: Error {
  var step: String
  var errno: Int32
  init(_ step: String, _ errno: Int32) {
    self.step = step
    self.errno = errno
  }
}

/// A child memory cgroup under this process's own, with a small limit; nil when this machine
/// does not let us make one (no root, no memory controller, read-only cgroupfs).
struct SmallMemoryCgroup {
  let directory: String

  static let available: Bool = {
    guard let cgroup = try? SmallMemoryCgroup(limit: 32 << 20) else { return false }
    cgroup.remove()
    return true
  }()

  init(limit: Int) throws {
    guard let named = SystemFacts.memoryCgroup() else { throw CgroupUnavailable("no memory cgroup", 0) }
    let isV1 = named.hasPrefix("v1:")
    let own = String(named.dropFirst(3))
    let mount = isV1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup"
    let base = own == "/" ? mount : mount + own
    directory = base + "/crumbs-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    guard mkdir(directory, 0o755) == 0 else { throw CgroupUnavailable("mkdir \(directory)", errno) }
    let file = directory + (isV1 ? "/memory.limit_in_bytes" : "/memory.max")
    let value = Array("\(limit)\n".utf8)
    let fd = open(file, O_WRONLY)
    let written = fd >= 0 ? value.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } : -1
    if fd >= 0 { close(fd) }
    guard written == value.count else {
      rmdir(directory)
      throw CgroupUnavailable("write \(file)", errno)
    }
  }

  /// Removes the cgroup (its processes must be gone; retries briefly while the kernel lets go).
  func remove() {
    for _ in 0..<200 {
      if rmdir(directory) == 0 || errno == ENOENT { return }
      usleep(10_000)
    }
  }
}

@Suite struct MemoryPressureRealCgroupTests {
  @Test(
    .enabled(
      if: SmallMemoryCgroup.available,
      "needs to create a child memory cgroup with a limit (root and a writable memory controller)"))
  func aChildOOMKilledInASmallCgroupLeavesWarningsAndOOMEvidence() throws {
    let limit = 96 << 20
    let cgroup = try SmallMemoryCgroup(limit: limit)
    defer { cgroup.remove() }
    let directory = TestDirectory()
    let rings = directory.path + "/rings"
    let child = try ChildProcess(
      ChildProcess.testChild, ["memory-hog", rings, cgroup.directory, String(limit)],
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let mode = try #require(child.value(after: "mode "))
    print("memory-hog child: mode \(mode); \(child.value(after: "sources ") ?? "")")
    _ = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")
    #expect(child.readLine() == "warned")
    child.wait(seconds: 60)
    #expect(child.terminatingSignal == SIGKILL)  // the OOM killer

    // The next launch: an out-of-memory report, the memory-warning flag, no crash record.
    let store = try ReportStore(directory: directory.path + "/reports")
    let outcome = PostMortemProcessor(directory: try RingDirectory(path: rings), store: store).run()
    let session = try #require(outcome.lastSession)
    #expect(session.end == .abnormalTermination)
    #expect(outcome.hasReceivedMemoryWarningInLastSession)
    let report = try #require(outcome.lastSessionCrashReport)
    #expect(report.exceptionType == "OutOfMemory")
    #expect(report.evidence.contains { $0.hasPrefix("the cgroup's oom_kill count rose") })
    #expect(report.evidence.contains { $0.hasPrefix("last memory-pressure breadcrumb:") })
  }
}

/// The descriptors of this process open on a PSI file (/proc/pressure/* or a cgroup's
/// *.pressure): what a trigger holds, and what makes the kernel wait at exit.
func openPressureFiles() -> [String] {
  guard let entries = try? Syscall.directoryEntries("/proc/self/fd") else { return [] }
  return entries.compactMap { name in
    var target = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
    guard length > 0 else { return nil }
    let path = String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return path.hasPrefix("/proc/pressure/") || path.hasSuffix(".pressure") ? path : nil
  }
}
