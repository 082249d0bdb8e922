// OngoingHang.swift — the hang a ring's header says was going on (a kill during it is explained).
//
// Entry point: OngoingHang.read(header) → (hang, damage): the header's hang fields through the
// seqlock read of crumbs_ring_hang.c, then checked like every other field of a file a dead
// process left: a name without its NUL or not valid UTF-8, or a `seen` before `since`, is damage,
// named in one line, never a trap and never a hang. Called by RingHeaderValidation on a header
// copy (the next launch, `crumbs ring dump`) and by RingReader.readLive on the live mapping.
// What the watchdog writes: BreadcrumbRing+Hang.swift. Not signal-safe.
//
// A copy of a live ring taken by read(2) (`crumbs ring dump` on a running process) is one read
// of the page, not a seqlock read: a hang recorded at that very moment may come out as a mix of
// the old and the new one (still checked). The next launch reads a writer that is gone.

import CrumbsSignalPath

/// A hang going on when the ring's header was last written: the watch that stalled, since when,
/// when the watchdog last saw it still stalled, and the stalled thread's top frames.
public struct OngoingHang: Sendable, Equatable {
  /// The stalled watch's name ("" when it had none).
  public var watch: String
  /// When the watch last showed life, wall-clock nanoseconds since the Unix epoch (never 0).
  public var sinceWallNanoseconds: UInt64
  /// The watchdog's latest look with the hang still going on (at or after `since`).
  public var seenWallNanoseconds: UInt64
  /// The stalled thread's top frames as the watchdog named them ("f ← g ← h"); "" when unknown.
  public var frames: String

  public init(watch: String, sinceWallNanoseconds: UInt64, seenWallNanoseconds: UInt64, frames: String) {
    self.watch = watch
    self.sinceWallNanoseconds = sinceWallNanoseconds
    self.seenWallNanoseconds = seenWallNanoseconds
    self.frames = frames
  }

  /// How long the hang had lasted at least: seen − since (0 if a caller built one the other way
  /// round; a read one never is).
  public var durationNanoseconds: UInt64 {
    seenWallNanoseconds >= sinceWallNanoseconds ? seenWallNanoseconds - sinceWallNanoseconds : 0
  }

  /// "a hang of 31 s of event-loop-1 in f ← g ← h": what the next launch's reports say after
  /// "killed during" or "crashed during".
  public var summary: String {
    var text = "a hang of \(Self.durationText(durationNanoseconds)) of "
    text += watch.isEmpty ? "an unnamed watch" : watch
    if !frames.isEmpty { text += " in " + frames }
    return text
  }

  /// A duration as a person reads it: tenths of a second below 10 s ("7.3 s"), whole seconds
  /// up to two minutes ("31 s"), then minutes and seconds ("12 min 5 s"). Rounded to nearest.
  public static func durationText(_ nanoseconds: UInt64) -> String {
    let tenths = nanoseconds / 100_000_000 + (nanoseconds % 100_000_000 >= 50_000_000 ? 1 : 0)
    if tenths < 100 { return "\(tenths / 10).\(tenths % 10) s" }
    let seconds = nanoseconds / 1_000_000_000 + (nanoseconds % 1_000_000_000 >= 500_000_000 ? 1 : 0)
    if seconds < 120 { return "\(seconds) s" }
    return "\(seconds / 60) min \(seconds % 60) s"
  }

  /// The hang recorded in `header` (a live mapping or a copy; 8-byte aligned), or nil: when none
  /// is going on (`since` 0, as in every file from before the fields), when the fields were
  /// being written (a torn copy: the sequence odd, or changed during the copy), or when they are
  /// damaged, and then `damage` says how.
  package static func read(_ header: UnsafePointer<crumbs_ring_header>) -> (
    hang: OngoingHang?, damage: String?
  ) {
    var copy = crumbs_ring_hang()
    guard crumbs_ring_read_hang(header, &copy), copy.since_wall_ns != 0 else { return (nil, nil) }
    guard copy.seen_wall_ns >= copy.since_wall_ns else {
      return (nil, "its last look (\(copy.seen_wall_ns) ns) is before its start (\(copy.since_wall_ns) ns)")
    }
    let watch = text(of: copy.watch, field: "watch name")
    let frames = text(of: copy.frames, field: "frame list")
    switch (watch, frames) {
    case (.success(let watch), .success(let frames)):
      return (
        OngoingHang(
          watch: watch, sinceWallNanoseconds: copy.since_wall_ns, seenWallNanoseconds: copy.seen_wall_ns,
          frames: frames),
        nil
      )
    case (.failure(let problem), _), (_, .failure(let problem)):
      return (nil, problem.reason)
    }
  }

  private struct Problem: Error {
    var reason: String
  }

  /// The NUL-terminated UTF-8 text of a fixed field, or what is wrong with it.
  private static func text<Field>(of field: Field, field name: String) -> Result<String, Problem> {
    withUnsafeBytes(of: field) { raw in
      guard let end = raw.firstIndex(of: 0) else {
        return .failure(Problem(reason: "its \(name) has no terminating NUL in \(raw.count) bytes"))
      }
      guard let text = String(validating: raw[..<end], as: UTF8.self) else {
        return .failure(Problem(reason: "its \(name) is not valid UTF-8"))
      }
      return .success(text)
    }
  }
}
