import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// A child appends from several threads and is SIGKILLed at a random point; the file it leaves
/// must read back with every record intact and every thread's order kept.
@Suite struct RingKillTests {
  @Test(arguments: 0..<8)
  func sigkillAtARandomPointLeavesAReadableTrail(round: Int) throws {
    let directory = TestDirectory()
    let threads = 3
    let child = try ChildProcess(
      ChildProcess.testChild, ["append-forever", directory.path, String(threads), "1024"])
    let ringPath = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")

    // Let it wrap the ring a few times and every thread get its turn — thread 0 (the one that
    // appends warnings) and the others (infos): on a busy machine one kind can make 5,000 appends
    // before the other first runs — (bounded waits for conditions, not timing assertions), then
    // kill it at a random moment.
    let deadline = ChildProcess.now() + 30
    var claimed: UInt64 = 0
    var warned = false
    var informed = false
    while claimed < 5_000 || !warned || !informed, ChildProcess.now() < deadline {
      let snapshot = try? RingReader.read(file: ringPath)
      claimed = snapshot?.header.appendsClaimed ?? 0
      warned =
        snapshot?.breadcrumbs.contains { $0.level == .warning && $0.message.hasPrefix("t=0 ") } ?? false
      informed = snapshot?.breadcrumbs.contains { $0.level == .info } ?? false
    }
    #expect(claimed >= 5_000)
    #expect(warned)
    #expect(informed)
    usleep(UInt32.random(in: 0...20_000))
    child.signal(SIGKILL)
    child.wait()
    #expect(child.terminatingSignal == SIGKILL)

    let contents = try RingReader.read(file: ringPath)
    #expect(contents.header.state == .running)
    #expect(contents.header.pid == child.pid)
    checkStressInvariants(contents.breadcrumbs)
    // At most one slot per thread can have been mid-write when the process died.
    #expect(contents.counts.torn <= threads)
    #expect(contents.counts.valid + contents.counts.torn + contents.counts.empty == contents.header.slotCount)
    #expect(
      UInt64(contents.counts.valid + contents.counts.torn + contents.counts.overwritten)
        <= contents.header.appendsClaimed)
    // Thread 0 appends warnings: the important lanes hold its newest ones.
    #expect(contents.breadcrumbs.contains { $0.level == .warning && $0.message.hasPrefix("t=0 ") })
    #expect(contents.breadcrumbs.contains { $0.level == .info })
    #expect(contents.timesAreCalibrated)

    // The dead writer's lock is gone: the directory scan sees the ring as a leftover.
    let scan = try RingDirectory(path: directory.path).leftoverRings()
    #expect(scan.leftovers.map(\.path) == [ringPath])
    #expect(scan.quarantined.isEmpty)
  }
}
