import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// `CrumbsClient.start` lists rings/ once (issue 26): the crash-loop check's listing also says
/// whether `processBacklog` has work, so it must count exactly what
/// `RingDirectory.waitingRingCount` counts (the test child's crash loop in StoreBoundsTests shows
/// the backlog still processed at start).
@Suite struct StartListingTests {
  @Test func theCrashLoopListingCountsTheWaitingRingsAsTheBacklogDoes() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    // Ended sessions (clean and not), one still written (open in this process), one claimed by
    // another reader, this session's own, and files that are not rings.
    var made: [BreadcrumbRing] = []
    for clean in [true, false, true, false, true] {
      let ring = try rings.createRing()
      ring.close(clean: clean)
      made.append(ring)
    }
    let running = try rings.createRing()
    defer { running.close(clean: true) }
    let claimed = made[4].path
    try #require(rename(claimed, claimed + ".claimed") == 0)
    let own = try rings.createRing()
    defer { own.close(clean: true) }
    for name in ["notes.txt", "x.ring.creating", "y.session.json"] {
      try Syscall.writeFileAtomically(rings.ringsPath + "/" + name, [1], durable: false)
    }

    let found = CrashLoop.find(directory: rings, excluding: own.sessionID)
    #expect(found.waitingRings == 6)
    #expect(found.waitingRings == rings.waitingRingCount(excluding: own.sessionID))
    #expect(CrashLoop.find(directory: rings, excluding: nil).waitingRings == rings.waitingRingCount())
  }

  @Test func theStartTicksReadOnceAreThisProcesssOwn() {
    #expect(ProcessIdentity.ownStartTicks() == ProcessIdentity.startTicks(of: 0))
    #expect(ProcessIdentity.ownStartTicks() == ProcessIdentity.current.startTicks)
    #expect(ProcessIdentity.ownStartTicks() != 0)
  }
}
