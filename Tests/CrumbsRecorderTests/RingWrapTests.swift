import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

/// White-box: every head position of a lane, every number of appends after it.
@Suite struct RingWrapTests {
  /// The smallest ring: one general lane of 64 slots (the planner collapses lanes under 32
  /// slots), one important lane of 8.
  func smallRing(_ directory: TestDirectory, _ name: String) throws -> BreadcrumbRing {
    var options = RingOptions()
    options.slotSize = 64
    options.slotCount = 64
    return try BreadcrumbRing.create(at: directory.file(name), options: options)
  }

  @Test func smallestRingHasOneLanePerClass() throws {
    let directory = TestDirectory()
    let ring = try smallRing(directory, "r.ring")
    let lanes = ring.lanesForTesting
    #expect(lanes.count == 2)
    #expect(lanes[0].important == false)
    #expect(lanes[1].important == true)
    #expect(ring.slotCount == lanes[0].slotCount + lanes[1].slotCount)
  }

  @Test(arguments: [0, 1, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 127, 128, 129, 1000, 1 << 40])
  func everyAppendCountAfterAHeadPositionReadsBackTheNewest(start: Int) throws {
    let directory = TestDirectory()
    let laneSlots = try smallRing(directory, "probe.ring").lanesForTesting[0].slotCount
    for appends in [0, 1, 2, laneSlots - 1, laneSlots, laneSlots + 1, 2 * laneSlots + 3] {
      let name = "r-\(start)-\(appends).ring"
      let ring = try smallRing(directory, name)
      ring.setLaneHeadsForTesting(UInt64(start))
      for index in 0..<appends { ring.append("m\(index)", level: .info) }
      for contents in [ring.snapshot(), try offline(ring)] {
        let kept = min(appends, laneSlots)
        let expected = (appends - kept..<appends).map { "m\($0)" }
        #expect(contents.breadcrumbs.map(\.message) == expected, "start \(start), \(appends) appends")
        #expect(contents.counts.valid == kept)
        #expect(contents.counts.torn == 0)
        let head = start + appends
        // Positions claimed before `start` count as appended-then-overwritten too.
        #expect(contents.counts.overwritten == head - kept, "start \(start), \(appends)")
        #expect(contents.counts.valid + contents.counts.empty == ring.slotCount)
        // Ids are lane position: consecutive.
        let positions = contents.breadcrumbs.map { $0.id & 0xFFFF_FFFF_FFFF }
        #expect(positions == (head - kept..<head).map { UInt64($0) & 0xFFFF_FFFF_FFFF })
      }
      ring.close()
    }
  }

  /// A slot holding a record from an older lap at the position a newer one should be (a writer
  /// stalled for a whole lap) is never returned as the newer one.
  @Test func slotFromAnOlderLapIsNotTakenForANewerOne() throws {
    let directory = TestDirectory()
    let ring = try smallRing(directory, "r.ring")
    let laneSlots = ring.lanesForTesting[0].slotCount
    for index in 0..<laneSlots { ring.append("lap0 \(index)") }
    // Claim a whole lap of positions without writing them: the slots still hold lap 0.
    ring.setLaneHeadsForTesting(UInt64(2 * laneSlots))
    let contents = try offline(ring)
    // Lap-0 records (positions 0..<L) are older than the window [L, 2L): they are returned as
    // what they are (old records with their own ids), never relabelled as positions L..<2L.
    #expect(contents.breadcrumbs.count == laneSlots)
    #expect(contents.breadcrumbs.allSatisfy { ($0.id & 0xFFFF_FFFF_FFFF) < UInt64(laneSlots) })
    #expect(contents.counts.overwritten == laneSlots)
  }

  func offline(_ ring: BreadcrumbRing) throws -> RingContents {
    try RingReader.read(file: ring.path)
  }
}
