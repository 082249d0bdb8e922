import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import CrumbsTestSupportC
import SystemPackage
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// Bad input: foreign, truncated, corrupt and newer files get a clear error, and in a Crumbs
/// directory are quarantined with their reason, never deleted.
@Suite struct RingFileTests {
  @Test func aRingWhoseCreatorDiedBeforeNamingItIsRemovedOnceAbandoned() throws {
    // A creator killed between its O_EXCL open and its rename leaves `<session>.ring.creating`.
    let directory = try RingDirectory(path: TestDirectory().path)
    let abandoned = directory.ringsPath + "/\(SessionID()).ring.creating"
    let fresh = directory.ringsPath + "/\(SessionID()).ring.creating"
    let held = directory.ringsPath + "/\(SessionID()).ring.creating"
    for file in [abandoned, fresh, held] {
      try Syscall.writeFileAtomically(file, [UInt8](repeating: 0, count: 64))
    }
    let twoMinutesAgo = timespec(tv_sec: time(nil) - 120, tv_nsec: 0)
    for file in [abandoned, held] {
      #expect(utimensat(AT_FDCWD, file, [twoMinutesAgo, twoMinutesAgo], 0) == 0)
    }
    let holder = try Syscall.open(held, O_RDWR)
    defer { Syscall.close(holder) }
    #expect(try Syscall.tryLockExclusive(holder, path: held))

    let (claimed, problems) = directory.claimLeftovers()
    #expect(claimed.isEmpty)
    #expect(problems.isEmpty)
    #expect(!Syscall.fileExists(abandoned))
    #expect(Syscall.fileExists(fresh), "a creation in progress (young) is left alone")
    #expect(Syscall.fileExists(held), "a locked creation is left alone")
  }

  @Test func aRingBeingCreatedIsNeverClaimedByAnotherStarter() throws {
    // Issue 11 item 6: processes starting together into one directory. A starter's claim of
    // leftover rings used to take another's ring between its O_EXCL create and its flock: that
    // start failed ("flock(…): Resource temporarily unavailable") and its empty ring was
    // quarantined as "only 0 bytes".
    let directory = TestDirectory()
    let gate = try StartGate(in: directory)
    let rings = directory.path + "/crumbs"
    var children: [ChildProcess] = []
    for _ in 0..<4 {
      children.append(try ChildProcess(ChildProcess.testChild, ["ring-start-loop", rings, gate.path, "400"]))
    }
    #expect(gate.release(children).isEmpty)
    var (created, claimed) = (0, 0)
    for child in children {
      let output = child.readRemaining(seconds: 300)
      child.wait(seconds: 60)
      #expect(child.exitCode == 0)
      let fields = output.split(separator: " ")
      #expect(fields.count == 3 && fields[0] == "done", "\(output.split(separator: "\n").prefix(3))")
      if fields.count == 3 {
        created += Int(fields[1]) ?? 0
        claimed += Int(fields[2].dropLast()) ?? 0
      }
    }
    #expect(created == 4 * 400)
    // Every ring was claimed once, or is still there for the next start: a ring claimed by two
    // processes (one took the lock its finished or quarantined claim had just let go) counts twice.
    let left = try Syscall.directoryEntries(rings + "/rings").filter { $0.hasSuffix(".ring") }
    #expect(claimed + left.count == created)
    let quarantined = (try? Syscall.directoryEntries(rings + "/quarantine")) ?? []
    #expect(quarantined.isEmpty, "\(quarantined.prefix(4))")
  }

  func ringBytes(_ directory: TestDirectory, messages: [String] = ["one", "two", "three"]) throws -> [UInt8] {
    let ring = try BreadcrumbRing.create(at: directory.file("source.ring"))
    for message in messages { ring.append(message) }
    ring.close(clean: false)
    return try Syscall.readFile(directory.file("source.ring"))
  }

  func read(_ bytes: [UInt8]) -> Result<RingContents, PersistedFileError> {
    bytes.withUnsafeBytes { image in
      Result { () throws(PersistedFileError) in try RingReader.read(image: image) }
    }
  }

  func expectError(
    _ bytes: [UInt8], _ kind: PersistedFileError.Kind, containing text: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    switch read(bytes) {
    case .success: Issue.record("read succeeded; expected \(kind)", sourceLocation: sourceLocation)
    case .failure(let error):
      #expect(error.kind == kind, sourceLocation: sourceLocation)
      #expect(
        error.format == .ring && error.path == nil && error.errno == nil, sourceLocation: sourceLocation)
      #expect(error.description == error.reason, sourceLocation: sourceLocation)
      #expect(error.reason.contains(text), "\(error.reason)", sourceLocation: sourceLocation)
      #expect(!error.reason.contains("\n"), sourceLocation: sourceLocation)
    }
  }

  @Test func foreignFilesAreNotRings() {
    expectError([], .unrecognized, containing: "0 bytes")
    expectError(Array("hello, I am a text file\n".utf8), .unrecognized, containing: "magic")
    expectError([UInt8](repeating: 0, count: 8192), .unrecognized, containing: "no magic")
    expectError(
      [0x7f, 0x45, 0x4c, 0x46] + [UInt8](repeating: 1, count: 5000), .unrecognized, containing: "magic")
  }

  @Test func truncatedRingsSaySo() throws {
    let directory = TestDirectory()
    let bytes = try ringBytes(directory)
    expectError(Array(bytes[0..<100]), .truncated, containing: "header")
    expectError(Array(bytes[0..<(bytes.count / 2)]), .truncated, containing: "header says")
  }

  @Test func newerFormatVersionIsRefusedNotMisread() throws {
    let directory = TestDirectory()
    var bytes = try ringBytes(directory)
    bytes[8] = UInt8(CRUMBS_RING_VERSION + 1)
    expectError(bytes, .unsupported, containing: "newer")
  }

  @Test func inconsistentHeaderFieldsAreCorrupt() throws {
    let directory = TestDirectory()
    let good = try ringBytes(directory)
    var badSlotSize = good
    badSlotSize[16] = 100
    expectError(badSlotSize, .corrupt, containing: "slot size")
    var badLaneCount = good
    badLaneCount[24] = 200
    expectError(badLaneCount, .corrupt, containing: "lane")
    var badLane = good
    badLane[4096 + 8] = 1  // first lane's first_slot
    expectError(badLane, .corrupt, containing: "lane 0")
  }

  @Test func readingAFileNamesItInTheError() throws {
    let directory = TestDirectory()
    let foreign = directory.file("notes.ring")
    try Syscall.writeFileAtomically(foreign, Array("hello, I am a text file\n".utf8))
    #expect(
      performing: { try RingReader.read(file: foreign) },
      throws: {
        ($0 as? PersistedFileError).map {
          $0.kind == .unrecognized && $0.format == .ring && $0.path == foreign && $0.errno == nil
            && $0.description == foreign + ": " + $0.reason && $0.reason.hasPrefix("not a Crumbs ring")
        } ?? false
      })
    let missing = directory.file("absent.ring")
    #expect(
      performing: { try RingReader.read(file: missing) },
      throws: {
        ($0 as? PersistedFileError).map {
          $0.kind == .unreadable && $0.path == missing && $0.errno == .noSuchFileOrDirectory
            && $0.description.hasPrefix(missing + ": cannot open: ")
        } ?? false
      })
  }

  @Test func aDamagedSlotIsTornAndTheOthersSurvive() throws {
    let directory = TestDirectory()
    var bytes = try ringBytes(directory)
    let original = try read(bytes).get()
    let damagedID = original.breadcrumbs[1].id
    // Flip one byte in the middle of that slot's message.
    let slotsOffset = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 32, as: UInt64.self) })
    let laneIndex = Int(damagedID >> 48)
    let firstSlot = Int(
      bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4096 + laneIndex * 64 + 8, as: UInt32.self) })
    let laneSlots = Int(
      bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4096 + laneIndex * 64 + 12, as: UInt32.self) })
    let slot = firstSlot + Int(damagedID & 0xFFFF_FFFF_FFFF) % laneSlots
    bytes[slotsOffset + slot * 256 + 37] ^= 0x20
    let damaged = try read(bytes).get()
    #expect(damaged.breadcrumbs.map(\.message) == ["one", "three"])
    #expect(damaged.counts.torn == 1)
    #expect(damaged.counts.valid == 2)
  }

  @Test func garbageInSlotsNeverTrapsTheReader() throws {
    let directory = TestDirectory()
    var bytes = try ringBytes(directory)
    var generator = SystemRandomNumberGenerator()
    let slotsOffset = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 32, as: UInt64.self) })
    for index in slotsOffset..<bytes.count { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
    let contents = try read(bytes).get()
    #expect(contents.counts.valid == 0)
    #expect(contents.counts.valid + contents.counts.torn + contents.counts.empty == contents.header.slotCount)
  }

  @Test func filesAndDirectoryArePrivate() throws {
    let directory = TestDirectory()
    let crumbsDirectory = try RingDirectory(path: directory.file("state/app"))
    let ring = try crumbsDirectory.createRing()
    defer { ring.close() }
    #expect(fileMode(of: crumbsDirectory.path) == 0o700)
    #expect(fileMode(of: crumbsDirectory.ringsPath) == 0o700)
    #expect(fileMode(of: ring.path) == 0o600)
    #expect(ring.path == crumbsDirectory.ringsPath + "/\(ring.sessionID).ring")
    // Two writers never share a file: it is created exclusively and locked.
    #expect(throws: RingCreationError.self) { try BreadcrumbRing.create(at: ring.path) }
    let other = open(ring.path, O_RDONLY)
    defer { close(other) }
    #expect(try Syscall.tryLockExclusive(other, path: ring.path) == false)
  }

  @Test func aRingClosedHereIsClaimableWhileAChildHoldsACopyOfItsLock() throws {
    // Any child the app starts holds copies of every descriptor until it execs (a forked worker
    // that never execs: for good), and with the ring's one its flock. Once this process closed
    // the ring, its writer is gone all the same.
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append("before the fork")
    let ringDescriptor = try #require(
      ((try? Syscall.directoryEntries("/proc/self/fd")) ?? []).compactMap(Int32.init)
        .first { Syscall.readLink("/proc/self/fd/\($0)") == ring.path })
    var ends: [Int32] = [-1, -1]
    #expect(pipe(&ends) == 0)
    let child = crumbs_test_fork_blocked_child(ends[0], ringDescriptor)
    close(ends[0])
    defer {
      close(ends[1])
      var status: Int32 = 0
      while waitpid(child, &status, 0) < 0 && errno == EINTR {}
    }
    #expect(child > 0)
    // Open here: never claimed, though this process is its writer.
    #expect(rings.claimLeftovers().claimed.isEmpty)
    let path = ring.path
    ring.close(clean: false)
    let claimed = rings.claimLeftovers().claimed
    #expect(claimed.map(\.path) == [path + ".claimed"])
    #expect(kill(child, 0) == 0, "the child still holds its copy of the lock")
  }

  @Test func directoryScanQuarantinesBadFilesWithTheirReasonAndSkipsLiveRings() throws {
    let directory = TestDirectory()
    let crumbsDirectory = try RingDirectory(path: directory.path)
    let live = try crumbsDirectory.createRing()
    defer { live.close() }
    let dead = try crumbsDirectory.createRing()
    dead.append("last words")
    dead.close(clean: false)
    let foreign = crumbsDirectory.ringsPath + "/foreign.ring"
    try Syscall.writeFileAtomically(foreign, Array("not a ring at all".utf8))
    let newer = crumbsDirectory.ringsPath + "/newer.ring"
    var newerBytes = try ringBytes(directory)
    newerBytes[8] = 99
    try Syscall.writeFileAtomically(newer, newerBytes)

    var scan = crumbsDirectory.leftoverRings()
    // A child spawned by a parallel test may hold the dead ring's lock until it execs.
    let deadline = ChildProcess.now() + 10
    while scan.leftovers.isEmpty, ChildProcess.now() < deadline {
      let again = crumbsDirectory.leftoverRings()
      scan.leftovers = again.leftovers
      scan.quarantined += again.quarantined
    }
    #expect(scan.leftovers.map(\.path) == [dead.path])
    #expect(scan.leftovers.first?.contents.breadcrumbs.map(\.message) == ["last words"])
    #expect(Set(scan.quarantined.map(\.originalPath)) == [foreign, newer])
    #expect(scan.problems.isEmpty)
    for file in scan.quarantined {
      #expect(!Syscall.fileExists(file.originalPath))
      #expect(Syscall.fileExists(file.quarantinedPath))
      let reason = String(decoding: try Syscall.readFile(file.quarantinedPath + ".reason"), as: UTF8.self)
      #expect(reason == file.reason + "\n")
    }
    #expect(scan.quarantined.first { $0.originalPath == newer }?.reason.contains("newer") == true)
    // The quarantined bytes are exactly what was there.
    let moved = try #require(scan.quarantined.first { $0.originalPath == foreign })
    #expect(try Syscall.readFile(moved.quarantinedPath) == Array("not a ring at all".utf8))
  }

  @Test func theHeaderNamesItsWriterSoLivenessIsDecidedPerProcess() throws {
    let directory = TestDirectory()
    let ring = try RingDirectory(path: directory.path).createRing()
    let header = try RingReader.read(file: ring.path).header
    #expect(header.pid == getpid())
    #expect(header.writerStartTicks != 0 && header.writerStartTicks == ProcessIdentity.startTicks(of: 0))
    #expect(header.writerPIDNamespace != 0)
    #expect(header.writer.liveness == .running)
    #expect(header.parentPID == nil && header.parentSessionID == nil)
    ring.close(clean: false)
    // The same writer with another start time is another process: gone (pid reuse).
    var reused = header.writer
    reused.startTicks += 1
    #expect(reused.liveness == .gone)
    reused.startTicks = 0
    #expect(reused.liveness == .unknown, "an older header says nothing: the lock decides")
  }

}
