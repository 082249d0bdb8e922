// Heartbeat.swift — a named sign of life that a loop gives (the first step of hang detection),
// and the pure rule that turns what a watchdog sees of heartbeats into stalls.
//
// Entry points, in call order:
//   Heartbeat(name:threshold:)      made once per loop (an event loop, a worker, a request loop)
//   heartbeat.beat()                on the hot path, as often as the loop turns: one relaxed
//                                   store of a flag ("alive since the watchdog last looked");
//                                   no load, no read-modify-write, no lock, no allocation, no
//                                   clock read
//   heartbeat.end()                 the loop finished: from now on its silence is not a hang
//   StallTracker.observe(_:now:)    the watchdog, every interval: takes each heartbeat's flag
//                                   (an exchange with false: did it beat since the last look?),
//                                   and says when one stalled (silent for `threshold`) and when
//                                   a stalled one resumed
//
// The beat reads no clock and no counter (a counter's load-add-store makes each beat wait for
// the last), so it costs what a store costs; the watchdog measures age itself: a heartbeat that
// has not beaten since the watchdog last saw it beat, `threshold` ago, is a stall. A watchdog
// that itself ran late (every CPU busy) finds the flag set as soon as it runs again, so a loop
// that is merely slow to be scheduled is not reported for the time the watchdog did not look.
// A beat racing the watchdog's exchange is seen now or at the next look. Not signal-safe
// (nothing here runs in a handler).

import Synchronization

/// A loop's sign of life: `beat()` each turn, `end()` when the loop finishes.
public final class Heartbeat: Sendable {
  /// Names the loop in reports ("event-loop-1").
  public let name: String
  /// Seconds without a beat after which the loop counts as stalled.
  public let threshold: Double
  /// Set by each beat, taken (exchanged with false) by the watchdog.
  @usableFromInline let alive = Atomic<Bool>(false)
  /// The kernel id of the thread that made it: the thread a hang report of this heartbeat leads
  /// with. Made on the loop's own thread (an event loop, a worker), it names the loop's thread.
  package let threadID: UInt32
  let ended = Atomic<Bool>(false)

  public init(name: String, threshold: Double = 3) {
    self.name = name
    self.threshold = threshold.isFinite && threshold > 0 ? threshold : 3
    threadID = CurrentThread.id
  }

  /// The loop is alive. Costs one relaxed store: no load, no read-modify-write, no lock, no
  /// allocation, no clock read.
  @inlinable @inline(__always)
  public func beat() { alive.store(true, ordering: .relaxed) }

  /// The loop finished: its silence from now on is not a hang. A later `beat()` does not undo it.
  public func end() { ended.store(true, ordering: .releasing) }

  /// Whether `end()` was called.
  public var hasEnded: Bool { ended.load(ordering: .acquiring) }

  /// Whether it beat since the last call (the watchdog's look: takes the beat).
  package func takeBeat() -> Bool { alive.exchange(false, ordering: .relaxed) }
}

/// What a watchdog concludes from the heartbeats it watches: the pure rule, given the times
/// (monotonic nanoseconds), so that it is tested without threads or clocks.
package struct StallTracker {
  /// A change in one heartbeat's state.
  package enum Event: Equatable, Sendable {
    /// Silent since `since` (the last time its counter was seen to move), for `threshold` or more.
    case stalled(name: String, since: UInt64)
    /// Beating again after a stall that began at `since`, `duration` nanoseconds later.
    case resumed(name: String, since: UInt64, duration: UInt64)
  }

  private struct Seen {
    var movedAt: UInt64
    var stalled = false
  }

  private var seen: [ObjectIdentifier: Seen] = [:]

  package init() {}

  /// Looks at each heartbeat once, at `now` (taking its beat), and says what changed. A heartbeat seen for the
  /// first time starts its clock now; an ended one is forgotten (and, if it was stalled, says
  /// it resumed: the loop finished, which is not a hang going on).
  package mutating func observe(_ heartbeats: [Heartbeat], now: UInt64) -> [Event] {
    var events: [Event] = []
    var present = Set<ObjectIdentifier>()
    for heartbeat in heartbeats {
      let key = ObjectIdentifier(heartbeat)
      present.insert(key)
      let beat = heartbeat.takeBeat()
      guard var entry = seen[key] else {
        if !heartbeat.hasEnded { seen[key] = Seen(movedAt: now) }
        continue
      }
      if heartbeat.hasEnded || beat {
        if entry.stalled {
          events.append(
            .resumed(name: heartbeat.name, since: entry.movedAt, duration: now &- entry.movedAt))
        }
        if heartbeat.hasEnded {
          seen[key] = nil
          continue
        }
        entry = Seen(movedAt: now)
      } else if !entry.stalled, now &- entry.movedAt >= Self.nanoseconds(heartbeat.threshold) {
        entry.stalled = true
        events.append(.stalled(name: heartbeat.name, since: entry.movedAt))
      }
      seen[key] = entry
    }
    for key in seen.keys where !present.contains(key) { seen[key] = nil }
    return events
  }

  /// `seconds` as nanoseconds, saturating (a threshold is finite and positive: Heartbeat.init).
  package static func nanoseconds(_ seconds: Double) -> UInt64 {
    let value = seconds * 1e9
    return value >= Double(UInt64.max) ? UInt64.max : UInt64(max(0, value))
  }
}
