// HeartbeatTests.swift — the heartbeat (issue 23's first step) and the rule that turns what a
// watchdog sees into stalls, driven with explicit times: no threads, no clocks, no sleeps.

import Testing

@testable import CrumbsRecorder

@Suite struct HeartbeatTests {
  private let second: UInt64 = 1_000_000_000

  @Test func aBeatIsTakenOnceAndEndIsFinal() {
    let heartbeat = Heartbeat(name: "loop", threshold: 2)
    #expect(!heartbeat.takeBeat())
    for _ in 0..<5 { heartbeat.beat() }
    #expect(heartbeat.takeBeat())
    #expect(!heartbeat.takeBeat())
    #expect(heartbeat.threadID == CurrentThread.id)  // the thread that made it
    #expect(!heartbeat.hasEnded)
    heartbeat.end()
    heartbeat.beat()
    #expect(heartbeat.hasEnded)
  }

  @Test(arguments: [0, -1, Double.nan, Double.infinity])
  func aThresholdThatIsNotAPositiveNumberIsTheDefault(_ threshold: Double) {
    #expect(Heartbeat(name: "loop", threshold: threshold).threshold == 3)
  }

  @Test func aSilentHeartbeatStallsOnceAtItsThresholdAndResumesWithItsDuration() {
    let heartbeat = Heartbeat(name: "event-loop-1", threshold: 2)
    var tracker = StallTracker()
    let start = 100 * second
    #expect(tracker.observe([heartbeat], now: start).isEmpty)  // first sight starts its clock
    #expect(tracker.observe([heartbeat], now: start + second).isEmpty)
    #expect(
      tracker.observe([heartbeat], now: start + 2 * second) == [.stalled(name: "event-loop-1", since: start)])
    #expect(tracker.observe([heartbeat], now: start + 3 * second).isEmpty)  // one report per stall
    heartbeat.beat()
    #expect(
      tracker.observe([heartbeat], now: start + 7 * second + second / 2) == [
        .resumed(name: "event-loop-1", since: start, duration: 7 * second + second / 2)
      ])
    #expect(tracker.observe([heartbeat], now: start + 8 * second).isEmpty)
  }

  @Test func aBeatingHeartbeatNeverStalls() {
    let heartbeat = Heartbeat(name: "worker", threshold: 1)
    var tracker = StallTracker()
    for tick in 0..<20 {
      heartbeat.beat()
      #expect(tracker.observe([heartbeat], now: UInt64(tick) * second).isEmpty)
    }
  }

  @Test func aWatchdogThatRanLateDoesNotBlameALoopThatBeatMeanwhile() {
    // Every CPU busy: the watchdog looks again only after 10 s, but the loop beat in between.
    let heartbeat = Heartbeat(name: "worker", threshold: 3)
    var tracker = StallTracker()
    _ = tracker.observe([heartbeat], now: 0)
    heartbeat.beat()
    #expect(tracker.observe([heartbeat], now: 10 * second).isEmpty)
  }

  @Test func anEndedLoopIsNotAHang() {
    let heartbeat = Heartbeat(name: "batch", threshold: 1)
    var tracker = StallTracker()
    _ = tracker.observe([heartbeat], now: 0)
    #expect(tracker.observe([heartbeat], now: 2 * second) == [.stalled(name: "batch", since: 0)])
    heartbeat.end()
    #expect(
      tracker.observe([heartbeat], now: 3 * second) == [
        .resumed(name: "batch", since: 0, duration: 3 * second)
      ])
    #expect(tracker.observe([heartbeat], now: 30 * second).isEmpty)

    let finished = Heartbeat(name: "done", threshold: 1)
    finished.end()
    var other = StallTracker()
    #expect(other.observe([finished], now: 0).isEmpty)
    #expect(other.observe([finished], now: 60 * second).isEmpty)
  }

  @Test func eachHeartbeatIsJudgedByItsOwnThreshold() {
    let fast = Heartbeat(name: "fast", threshold: 1)
    let slow = Heartbeat(name: "slow", threshold: 5)
    var tracker = StallTracker()
    _ = tracker.observe([fast, slow], now: 0)
    #expect(tracker.observe([fast, slow], now: 2 * second) == [.stalled(name: "fast", since: 0)])
    #expect(tracker.observe([fast, slow], now: 5 * second) == [.stalled(name: "slow", since: 0)])
  }
}
