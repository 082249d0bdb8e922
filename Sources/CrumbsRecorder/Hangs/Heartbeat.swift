// Heartbeat.swift — a named sign of life that a loop gives (the first step of hang detection),
// and the pure rule that turns what a watchdog sees of heartbeats into stalls.
//
// Entry points, in call order:
//   Heartbeat(name:threshold:)      made once per loop (an event loop, a worker, a request loop)
//   heartbeat.beat()                on the hot path, as often as the loop turns: a read of the
//                                   coarse monotonic clock (the vDSO's last tick, no hardware
//                                   counter, no system call), one relaxed store of it and one
//                                   relaxed load (is the watchdog waiting for the end of a
//                                   stall?); no read-modify-write, no lock, no allocation
//   heartbeat.end()                 the loop finished: from now on its silence is not a hang
//   StallTracker.observe(_:now:)    the watchdog, at each look: reads each heartbeat's last beat,
//                                   and says when one stalled (silent for `threshold` since that
//                                   beat) and when a stalled one resumed (its next beat)
//   StallTracker.wait(now:…)        when the watchdog should look next: when the first watch
//                                   could reach its threshold, soon while one is stalled
//
// The beat stamps its time, so a stall's start is its last beat, to the clock's tick, whenever
// the watchdog looks; once the watchdog found it stalled, the first beat after also stamps when
// the stall ended: a flag ("beat since the last look") would leave both ends to the looks, a
// threshold apart when the watchdog wakes once a threshold. The stamp is all a beat writes (a
// counter's load-add-store makes each beat wait for the last). A watchdog that itself ran late (every CPU busy, the process stopped) does not
// count the silence it did not see: a look that comes late starts the watchdog's count anew,
// and a loop that is merely slow to be scheduled is not reported for the time the watchdog did
// not look. Not signal-safe (nothing here runs in a handler).

import CrumbsPlatform
import Synchronization

/// A loop's sign of life: `beat()` each turn, `end()` when the loop finishes.
public final class Heartbeat: Sendable {
  /// Names the loop in reports ("event-loop-1").
  public let name: String
  /// Seconds without a beat after which the loop counts as stalled.
  public let threshold: Double
  /// When it last beat: CLOCK_MONOTONIC_COARSE in nanoseconds, 0 before its first beat. Stored
  /// by each beat, read by the watchdog.
  @usableFromInline let lastBeat = Atomic<UInt64>(0)
  /// Raised by the watchdog when it finds the loop stalled; the first beat after lowers it and
  /// stamps `resumedAt`, so that the hang ends at that beat, not at a later one the watchdog sees.
  @usableFromInline let awaitingResume = Atomic<Bool>(false)
  @usableFromInline let resumedAt = Atomic<UInt64>(0)
  /// The kernel id of the thread that made it: the thread a hang report of this heartbeat leads
  /// with. Made on the loop's own thread (an event loop, a worker), it names the loop's thread.
  package let threadID: UInt32
  let ended = Atomic<Bool>(false)

  public init(name: String, threshold: Double = 3) {
    self.name = name
    self.threshold = threshold.isFinite && threshold > 0 ? threshold : 3
    threadID = CurrentThread.id
  }

  /// The loop is alive. Costs a read of the coarse monotonic clock, one relaxed store and one
  /// relaxed load: no read-modify-write (but on the first beat after a stall), no lock, no
  /// allocation, no system call.
  @inlinable @inline(__always)
  public func beat() { stamp(Self.now()) }

  @inlinable @inline(__always)
  func stamp(_ now: UInt64) {
    lastBeat.store(now, ordering: .relaxed)
    if awaitingResume.load(ordering: .relaxed) { firstBeatAfterStall(now) }
  }

  /// The first beat after the watchdog found the loop stalled (out of line: once per hang).
  @usableFromInline func firstBeatAfterStall(_ now: UInt64) {
    if awaitingResume.exchange(false, ordering: .relaxed) { resumedAt.store(now, ordering: .relaxed) }
  }

  /// The loop finished: its silence from now on is not a hang. A later `beat()` does not undo it.
  public func end() { ended.store(true, ordering: .releasing) }

  /// Whether `end()` was called.
  public var hasEnded: Bool { ended.load(ordering: .acquiring) }

  /// When it last beat (CLOCK_MONOTONIC_COARSE, ns), 0 before its first beat.
  package var lastBeatNanoseconds: UInt64 { lastBeat.load(ordering: .relaxed) }

  /// The clock a beat stamps, and the one the watchdog compares it with.
  @usableFromInline static func now() -> UInt64 { SystemClock.coarseMonotonicNanoseconds() }

  /// A beat at `nanoseconds` (tests drive the tracker with explicit times).
  package func beat(at nanoseconds: UInt64) { stamp(nanoseconds) }

  /// The watchdog found it stalled: the next beat says when the stall ended.
  func awaitResume() {
    resumedAt.store(0, ordering: .relaxed)
    awaitingResume.store(true, ordering: .relaxed)
  }

  /// The first beat since `awaitResume()`, nil when none was seen (ended, or a beat raced the
  /// watchdog's finding).
  func takeResume() -> UInt64? {
    awaitingResume.store(false, ordering: .relaxed)
    let first = resumedAt.exchange(0, ordering: .relaxed)
    return first == 0 ? nil : first
  }
}

/// What a watchdog concludes from the heartbeats it watches: the pure rule, given the times
/// (CLOCK_MONOTONIC_COARSE nanoseconds, the clock of the beats), so that it is tested without
/// threads or clocks.
package struct StallTracker {
  /// A change in one heartbeat's state.
  package enum Event: Equatable, Sendable {
    /// Silent since its last beat at `since`, for `threshold` or more.
    case stalled(name: String, since: UInt64)
    /// Beating again after a stall that began at `since`, `duration` nanoseconds later: at the
    /// first beat after the watchdog found it stalled, or when it ended.
    case resumed(name: String, since: UInt64, duration: UInt64)
  }

  private struct Seen {
    /// Its last beat that the watchdog saw; its first sight when it had not beaten yet.
    var lastBeat: UInt64
    var stalled = false
  }

  private var seen: [ObjectIdentifier: Seen] = [:]
  /// The previous look, and when the watchdog's present run of looks on time began: silence
  /// before that is not counted (the watchdog did not see it).
  private var previousLook: UInt64?
  private var lookingSince: UInt64 = 0

  package init() {}

  /// Looks at each heartbeat once, at `now`, and says what changed. A heartbeat that has not
  /// beaten yet starts its clock at its first sight; an ended one is forgotten (and, if it was
  /// stalled, says it resumed: the loop finished, which is not a hang going on).
  ///
  /// A look that comes more than one and a half of the smallest threshold (or of 50 ms) after
  /// the previous one is late (the watchdog never waits longer than that: it was not scheduled, or
  /// the process was stopped by a debugger, SIGSTOP or a frozen container): silence counts for
  /// the decision only from then, though a stall's reported start stays the loop's last beat.
  package mutating func observe(_ heartbeats: [Heartbeat], now: UInt64) -> [Event] {
    // The watchdog waits at most the smallest threshold between looks, or 50 ms.
    let smallest = max(heartbeats.lazy.map { Self.nanoseconds($0.threshold) }.min() ?? .max, 50_000_000)
    let (latest, overflow) = smallest.addingReportingOverflow(smallest / 2)
    let onTime = previousLook.map { now >= $0 && (overflow || now - $0 <= latest) } ?? false
    if !onTime { lookingSince = now }
    previousLook = now
    var events: [Event] = []
    var present = Set<ObjectIdentifier>()
    for heartbeat in heartbeats {
      let key = ObjectIdentifier(heartbeat)
      present.insert(key)
      let beat = heartbeat.lastBeatNanoseconds
      guard var entry = seen[key] else {
        if !heartbeat.hasEnded { seen[key] = Seen(lastBeat: beat == 0 ? now : beat) }
        continue
      }
      let moved = beat > entry.lastBeat
      if heartbeat.hasEnded || moved {
        if entry.stalled {
          let first = heartbeat.takeResume().map { min($0, beat) }
          let end = max(first ?? (moved ? beat : now), entry.lastBeat)
          events.append(.resumed(name: heartbeat.name, since: entry.lastBeat, duration: end - entry.lastBeat))
        }
        if heartbeat.hasEnded {
          seen[key] = nil
          continue
        }
        entry = Seen(lastBeat: beat)
      } else if !entry.stalled,
        Self.silence(since: max(entry.lastBeat, lookingSince), now: now)
          >= Self.nanoseconds(heartbeat.threshold)
      {
        entry.stalled = true
        heartbeat.awaitResume()
        events.append(.stalled(name: heartbeat.name, since: entry.lastBeat))
      }
      seen[key] = entry
    }
    for key in seen.keys where !present.contains(key) { seen[key] = nil }
    return events
  }

  /// Nanoseconds from `now` to the next look: when the first watch still beating could reach
  /// its threshold (`thresholds` by heartbeat, as last observed), so a stall is seen as it
  /// reaches it; `resolution` while one is stalled, so that its end is seen within that. Never
  /// less than `resolution` (a loop that beats just under its threshold does not make the
  /// watchdog spin), never more than `longest`.
  package func wait(
    now: UInt64, heartbeats: [Heartbeat], resolution: UInt64, longest: UInt64
  ) -> UInt64 {
    var wait = longest
    for heartbeat in heartbeats {
      guard let entry = seen[ObjectIdentifier(heartbeat)] else { continue }
      if entry.stalled {
        wait = min(wait, resolution)
        continue
      }
      let due = max(entry.lastBeat, lookingSince) &+ Self.nanoseconds(heartbeat.threshold)
      wait = min(wait, due > now ? due - now : 0)
    }
    return max(wait, resolution)
  }

  /// `now - since`, 0 when `since` is later (a beat stamped after the look read its clock).
  private static func silence(since: UInt64, now: UInt64) -> UInt64 { now > since ? now - since : 0 }

  /// `seconds` as nanoseconds, saturating (a threshold is finite and positive: Heartbeat.init).
  package static func nanoseconds(_ seconds: Double) -> UInt64 {
    let value = seconds * 1e9
    return value >= Double(UInt64.max) ? UInt64.max : UInt64(max(0, value))
  }
}
