// CrashLoop.swift — `CrumbsClient.crashLoop`: how many sessions of this app crashed (or ended
// abnormally) in a row right before this start, known as soon as `start` returns, so that an app
// can start in a safe mode.
//
// Two sources, because a session's files leave rings/ once it is processed, and processing is
// not in session order (the processor goes newest first; a launch of a crash loop usually dies
// before its background run; a long-lived launch or `crumbs collect` may process them first):
//   rings/                  sessions not processed yet: ring header + crash record
//                           (CrashLoopEvidence.waiting), read on the caller's thread of `start`
//   crash-loop.json         the tally of sessions already processed: the processor's
//                           `sessionEnded` adds each (CrashLoopTally.record), under the lock of
//                           `crash-loop.lock`, replaced atomically; it keeps only what a loop
//                           needs: the start of the newest clean session, the crashed or abnormal
//                           sessions after it (at most `maxEntries`, older ones folded into one
//                           summary), so it stays small however long the loop
// The rings are read before the tally: a session processed in between is then in the tally
// (its count comes before its files go), and one seen in both is counted once (by session id).
// The two are merged by ring creation time (session start), newest first, and counted until a
// clean session (CrashLoopStep: what counts, what resets, what passes).
//
// Cost at start: one listing of rings/ (its count of rings also tells `processBacklog` whether it
// has work: the only listing of a start), one small header read per waiting ring (the few fields
// of RingHeaderSummary), a crash record read per crashed one, and one read of crash-loop.json
// by its own small parser (CrashLoopTallyJSON.swift; written with JSONEncoder, off the caller's
// thread), measured in Benchmarks/README.md.
// A damaged tally is named in `problems` and taken as empty; the next processed session moves
// it to quarantine/ with its reason (CrumbsDirectory.quarantine(damaged:)) and starts a new
// one; nothing here traps. Not signal-safe.

import CrumbsPlatform
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// Consecutive sessions of this app (this Crumbs directory) that crashed or ended abnormally,
/// right before this start (see `CrumbsClient.crashLoop`).
public struct CrashLoop: Sendable, Equatable {
  /// How many, at least 1. Sessions stopped by an unhandled SIGTERM-like signal, ended by a
  /// machine restart, or forked children's are not counted, and do not end the loop either; a
  /// clean session ends it.
  public var count: Int
  /// Their shared signature when they all have the same (`CrashLoopStep.signature(of:)`: signal
  /// and the crashing frame's module and offset, e.g. `SIGSEGV MyApp+0x1c2f0`; "abnormal
  /// termination" for a session killed without a crash record); nil when they differ.
  public var signature: String?
  /// When the oldest of them started (its ring's creation), nanoseconds since the Unix epoch.
  public var firstStartedWallNanoseconds: UInt64
  /// When the newest of them (the session right before this one) started, likewise.
  public var lastStartedWallNanoseconds: UInt64

  public init(
    count: Int, signature: String?, firstStartedWallNanoseconds: UInt64, lastStartedWallNanoseconds: UInt64
  ) {
    self.count = count
    self.signature = signature
    self.firstStartedWallNanoseconds = firstStartedWallNanoseconds
    self.lastStartedWallNanoseconds = lastStartedWallNanoseconds
  }
}

extension CrashLoop {
  /// The count from which reports carry `crumbs.crash_loop.count`: one crash before a start is
  /// not yet a loop, and its report (like every report until then) stays as it was.
  package static let reportedFrom = 2

  /// What a start finds: the loop (nil when the last ended session was clean, or none ended),
  /// the place in it of each waiting session of the loop (its report's `crumbs.crash_loop.count`),
  /// and a problem to report (a damaged tally).
  package struct Found: Sendable {
    package var loop: CrashLoop?
    /// (An array: it is made and copied on the caller's thread of `start`, where a process's
    /// first `[SessionID: Int]` looks up SessionID's Hashable conformance through every loaded
    /// image; `bySession` makes the processor's dictionary on the background thread.)
    package var counts: [(session: SessionID, count: Int)] = []
    package var problem: String?
    /// The ring files waiting in rings/ (this session's excluded), ended or still written:
    /// what `PostMortemProcessor.processBacklog` compares with its `maxWaitingSessions`.
    package var waitingRings = 0
  }

  /// `counts` as PostMortemProcessor.crashLoopCounts takes them (each session once).
  package static func bySession(_ counts: [(session: SessionID, count: Int)]) -> [SessionID: Int] {
    Dictionary(counts.map { ($0.session, $0.count) }, uniquingKeysWith: { first, _ in first })
  }

  /// Reads the waiting sessions, then the tally (see the design comment), and counts.
  package static func find(directory: RingDirectory, excluding: SessionID?) -> Found {
    let (waiting, rings) = CrashLoopEvidence.waiting(in: directory, excluding: excluding)
    let (tally, problem) = CrashLoopTally.read(directory: directory.path)
    var found = count(waiting: waiting, tally: tally)
    found.problem = problem
    found.waitingRings = rings
    return found
  }

  /// The loop that `waiting` and `tally` make together.
  static func count(waiting: [CrashLoopEvidence.Waiting], tally: CrashLoopTally.Stored) -> Found {
    enum Kind {
      case counts(signature: String?, sessions: Int, first: UInt64, waiting: SessionID?)
      case resets
    }
    var steps: [(started: UInt64, kind: Kind)] = []
    // A few names: a linear search (a Set would cost `start` its first String hashing lookups).
    let seen = waiting.map(\.sessionID.description)
    for session in waiting {
      switch session.step {
      case .counts(let signature):
        steps.append(
          (
            session.startedWallNanoseconds,
            .counts(
              signature: signature, sessions: 1, first: session.startedWallNanoseconds,
              waiting: session.sessionID)
          ))
      case .resets: steps.append((session.startedWallNanoseconds, .resets))
      case .passes: break
      }
    }
    for entry in tally.loop where !seen.contains(entry.session) {
      steps.append(
        (entry.started, .counts(signature: entry.signature, sessions: 1, first: entry.started, waiting: nil)))
    }
    if let earlier = tally.earlier {
      steps.append(
        (
          earlier.last,
          .counts(signature: earlier.signature, sessions: earlier.count, first: earlier.first, waiting: nil)
        ))
    }
    if let reset = tally.resetStarted { steps.append((reset, .resets)) }
    // Newest first; at equal times a reset is taken as the older (a session cannot start at the
    // same nanosecond as another of the same app, except in a forged file).
    steps.sort { left, right in
      if left.started != right.started { return left.started > right.started }
      if case .resets = left.kind { return false }
      if case .resets = right.kind { return true }
      return false
    }
    var total = 0
    var signature: String?
    var mixed = false
    var first: UInt64 = 0
    var last: UInt64 = 0
    for step in steps {
      guard case .counts(let stepSignature, let sessions, let stepFirst, _) = step.kind else { break }
      if total == 0 {
        last = step.started
        signature = stepSignature
      } else if stepSignature != signature {
        mixed = true
      }
      if stepSignature == nil { mixed = true }
      let (sum, overflow) = total.addingReportingOverflow(max(0, sessions))
      total = overflow ? Int.max : sum
      first = stepFirst
    }
    guard total > 0 else { return Found() }
    var found = Found(
      loop: CrashLoop(
        count: total, signature: mixed ? nil : signature, firstStartedWallNanoseconds: first,
        lastStartedWallNanoseconds: last))
    // The place of each waiting member: the count of the loop up to and including it (from the
    // second on: a lone crash is not a loop).
    var below = total
    for step in steps {
      guard case .counts(_, let sessions, _, let waitingID) = step.kind else { break }
      if let waitingID, below >= reportedFrom { found.counts.append((waitingID, below)) }
      below = max(0, below - max(0, sessions))
    }
    return found
  }
}

/// `crash-loop.json`: what the processed sessions say about a crash loop (see the design comment).
package enum CrashLoopTally {
  /// Crashed sessions kept one by one; older ones are folded into `Stored.earlier`.
  static let maxEntries = 64
  /// A larger file is not ours (or damaged): taken as empty.
  static let maxFileSize = 1 << 18

  /// What `crash-loop.json` holds.
  package struct Stored: Codable, Sendable, Equatable {
    /// One crashed or abnormal session after the newest clean one.
    package struct Entry: Codable, Sendable, Equatable {
      package var session: String
      package var started: UInt64
      package var signature: String
    }
    /// Sessions folded out of `loop` (all older than its entries).
    package struct Earlier: Codable, Sendable, Equatable {
      package var count: Int
      package var first: UInt64
      package var last: UInt64
      /// nil: they differ.
      package var signature: String?
    }
    package var version = 1
    /// When the newest clean session known started.
    package var resetStarted: UInt64?
    /// Oldest first.
    package var loop: [Entry] = []
    package var earlier: Earlier?

    package init() {}

    /// Why it cannot be used, when it cannot.
    package var damage: String? {
      if version != 1 { return "version \(version), not 1" }
      if loop.count > CrashLoopTally.maxEntries {
        return "\(loop.count) entries, more than \(CrashLoopTally.maxEntries)"
      }
      if let earlier, earlier.count < 1 || earlier.first > earlier.last {
        return "a folded count of \(earlier.count) from \(earlier.first) to \(earlier.last)"
      }
      return nil
    }
  }

  /// The tally, and a problem when the file is damaged (then the tally is empty; the next
  /// processed session quarantines it: `record`). A missing file is an empty tally. No lock: the
  /// file is only ever replaced whole.
  package static func read(directory: String) -> (Stored, String?) {
    let (stored, damage) = readChecked(directory: directory)
    let file = CrumbsDirectory(directory).path(.crashLoopTally)
    return (stored, damage.map { "crash-loop tally \(file) damaged (\($0)); taken as empty" })
  }

  /// The tally, and what is wrong with the file when it is damaged (then the tally is empty).
  private static func readChecked(directory: String) -> (Stored, damage: String?) {
    let file = CrumbsDirectory(directory).path(.crashLoopTally)
    guard Syscall.fileExists(file) else { return (Stored(), nil) }
    do {
      let bytes = try Syscall.readFile(file, limit: maxFileSize)
      guard bytes.count < maxFileSize else { return (Stored(), "larger than \(maxFileSize) bytes") }
      // Not JSONDecoder: its first use would cost `start` more than the rest of this file's work
      // (CrashLoopTallyJSON.swift).
      let stored = try decode(bytes)
      if let damage = stored.damage { return (Stored(), damage) }
      return (stored, nil)
    } catch {
      return (Stored(), "\(error)")
    }
  }

  /// Adds one processed session (PostMortemProcessor.sessionEnded), once: a session already
  /// there is left as it is. Returns a problem when the old tally was damaged: it is moved to
  /// `quarantine/` with its reason (CrumbsDirectory.quarantine(damaged:)) and the tally starts
  /// again from this session.
  @discardableResult
  package static func record(_ session: PreviousSession, directory: String) throws(SystemCallError) -> String?
  {
    if case .passes = session.crashLoopStep { return nil }
    let crumbs = CrumbsDirectory(directory)
    let file = crumbs.path(.crashLoopTally)
    return try locked(crumbs) { () throws(SystemCallError) -> String? in
      var (stored, damage) = readChecked(directory: directory)
      let problem = damage.map { crumbs.quarantine(damaged: file, what: "crash-loop tally", damage: $0) }
      guard add(session, to: &stored) else { return problem }
      let bytes = (try? JSONEncoder().encode(stored)).map(Array.init) ?? []
      try Syscall.writeFileAtomically(file, bytes, durable: false)
      return problem
    }
  }

  /// Adds `session` to `stored`; false when nothing changed.
  static func add(_ session: PreviousSession, to stored: inout Stored) -> Bool {
    let started = session.startedWallNanoseconds
    let id = session.sessionID.description
    switch session.crashLoopStep {
    case .passes: return false
    case .resets:
      if let reset = stored.resetStarted, reset >= started { return false }
      stored.resetStarted = started
      stored.loop.removeAll { $0.started < started }
      if let earlier = stored.earlier, earlier.first < started { stored.earlier = nil }
      return true
    case .counts(let signature):
      if let reset = stored.resetStarted, started < reset { return false }
      guard !stored.loop.contains(where: { $0.session == id }) else { return false }
      stored.loop.append(.init(session: id, started: started, signature: signature))
      stored.loop.sort { $0.started < $1.started }
      let extra = stored.loop.count - maxEntries
      if extra > 0 {
        for entry in stored.loop.prefix(extra) {
          if var earlier = stored.earlier {
            let (sum, overflow) = earlier.count.addingReportingOverflow(1)
            earlier.count = overflow ? Int.max : sum
            earlier.first = min(earlier.first, entry.started)
            earlier.last = max(earlier.last, entry.started)
            if earlier.signature != entry.signature { earlier.signature = nil }
            stored.earlier = earlier
          } else {
            stored.earlier = .init(
              count: 1, first: entry.started, last: entry.started, signature: entry.signature)
          }
        }
        stored.loop.removeFirst(extra)
      }
      return true
    }
  }

  private static let lock = LockFile()

  /// Runs `body` holding `crash-loop.lock` against other processes and this process's other
  /// threads (LockFile).
  private static func locked<Result>(
    _ directory: CrumbsDirectory, _ body: () throws(SystemCallError) -> Result
  ) throws(SystemCallError) -> Result {
    try lock.withLock(path: directory.path(.crashLoopLock)) { _ throws(SystemCallError) -> Result in
      try body()
    }
  }
}
