// HeartbeatTests.swift — the heartbeat (issue 23's first step) and the rule that turns what a
// watchdog sees into stalls, driven with explicit times: no threads, no clocks, no sleeps.

import CrumbsPlatform
import Testing

@testable import CrumbsRecorder

@Suite struct HeartbeatTests {
  private let second: UInt64 = 1_000_000_000

  @Test func aBeatStampsTheCoarseMonotonicClockAndEndIsFinal() {
    let heartbeat = Heartbeat(name: "loop", threshold: 2)
    #expect(heartbeat.lastBeatNanoseconds == 0)
    let before = SystemClock.coarseMonotonicNanoseconds()
    heartbeat.beat()
    let after = SystemClock.coarseMonotonicNanoseconds()
    #expect((before...after).contains(heartbeat.lastBeatNanoseconds))
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
    heartbeat.beat(at: start + 7 * second + second / 2)
    #expect(
      tracker.observe([heartbeat], now: start + 8 * second) == [
        .resumed(name: "event-loop-1", since: start, duration: 7 * second + second / 2)
      ])
    #expect(tracker.observe([heartbeat], now: start + 9 * second).isEmpty)
  }

  @Test func aStallStartsAtTheLastBeatAndEndsAtTheBeatThatEndedItNotAtTheLooks() {
    // Threshold 3 s, looks 3 s apart while all is well: a 4 s stall from 101.2 s to 105.2 s.
    let heartbeat = Heartbeat(name: "loop", threshold: 3)
    var tracker = StallTracker()
    heartbeat.beat(at: 100 * second)
    #expect(tracker.observe([heartbeat], now: 100 * second).isEmpty)
    let lastBeat = 101 * second + second / 5
    heartbeat.beat(at: lastBeat)
    // The next look is due when the loop could reach its threshold: 3 s after its last beat.
    let look = 102 * second
    #expect(tracker.observe([heartbeat], now: look).isEmpty)
    let resolution = second / 10
    #expect(
      tracker.wait(now: look, heartbeats: [heartbeat], resolution: resolution, longest: 3 * second)
        == lastBeat + 3 * second - look)
    #expect(
      tracker.observe([heartbeat], now: lastBeat + 3 * second) == [.stalled(name: "loop", since: lastBeat)])
    // While stalled, looks every `resolution` to see its end.
    #expect(
      tracker.wait(
        now: lastBeat + 3 * second, heartbeats: [heartbeat], resolution: resolution, longest: 3 * second)
        == resolution)
    #expect(tracker.observe([heartbeat], now: 105 * second).isEmpty)
    // The loop beats again at 105.2 s, and twice more before the watchdog looks: the hang ends
    // at the first of those beats.
    heartbeat.beat(at: lastBeat + 4 * second)
    heartbeat.beat(at: lastBeat + 4 * second + resolution)
    heartbeat.beat(at: lastBeat + 4 * second + 2 * resolution)
    #expect(
      tracker.observe([heartbeat], now: 105 * second + resolution * 3) == [
        .resumed(name: "loop", since: lastBeat, duration: 4 * second)
      ])
  }

  @Test func aBeatingHeartbeatNeverStalls() {
    let heartbeat = Heartbeat(name: "worker", threshold: 1)
    var tracker = StallTracker()
    for tick in 1..<20 {
      heartbeat.beat(at: UInt64(tick) * second)
      #expect(tracker.observe([heartbeat], now: UInt64(tick) * second).isEmpty)
    }
  }

  @Test func aWatchdogThatRanLateDoesNotBlameALoopThatBeatMeanwhile() {
    // Every CPU busy, or the process stopped: the watchdog looks again only after 10 s; the loop
    // beat 5 s before that look. The silence the watchdog did not see is not counted.
    let heartbeat = Heartbeat(name: "worker", threshold: 3)
    var tracker = StallTracker()
    _ = tracker.observe([heartbeat], now: 100 * second)
    heartbeat.beat(at: 105 * second)
    #expect(tracker.observe([heartbeat], now: 110 * second).isEmpty)
    #expect(tracker.observe([heartbeat], now: 112 * second).isEmpty)
    // Silent for the threshold while the watchdog looked: a stall, from the loop's last beat.
    #expect(
      tracker.observe([heartbeat], now: 113 * second) == [.stalled(name: "worker", since: 105 * second)])
  }

  @Test func aLoopThatBeatsJustUnderItsThresholdDoesNotMakeTheWatchdogSpin() {
    let heartbeat = Heartbeat(name: "worker", threshold: 1)
    var tracker = StallTracker()
    _ = tracker.observe([heartbeat], now: 9 * second + second / 2)
    heartbeat.beat(at: 10 * second)
    let look = 10 * second + second / 100 * 99
    #expect(tracker.observe([heartbeat], now: look).isEmpty)
    // Due in 10 ms: the wait is the resolution all the same.
    #expect(
      tracker.wait(now: look, heartbeats: [heartbeat], resolution: second / 20, longest: second) == second
        / 20)
  }

  @Test func anEndedLoopIsNotAHang() {
    let heartbeat = Heartbeat(name: "batch", threshold: 1)
    var tracker = StallTracker()
    _ = tracker.observe([heartbeat], now: 0)
    #expect(tracker.observe([heartbeat], now: second) == [.stalled(name: "batch", since: 0)])
    heartbeat.end()
    #expect(
      tracker.observe([heartbeat], now: 2 * second) == [
        .resumed(name: "batch", since: 0, duration: 2 * second)
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
    for look in 0...5 {
      let events = tracker.observe([fast, slow], now: UInt64(look) * second)
      switch look {
      case 1: #expect(events == [.stalled(name: "fast", since: 0)])
      case 5: #expect(events == [.stalled(name: "slow", since: 0)])
      default: #expect(events.isEmpty)
      }
    }
  }
}
