// ForkedSessionReaper.swift — a forking process removes what its ended children left on disk.
//
// Every fork() gives the child a ring file and a crash record of its own (crumbs_fork.h), over
// a megabyte reserved on disk. A child that execs, exits or is killed without crashing leaves
// them behind, and only the next launch's PostMortemProcessor would remove them (it never
// reports such a session); a pre-fork server, a daemon or a parent that forks and execs helpers
// all day would fill the disk first (200 fork+exec of /bin/true: 401 files, 309 MB).
//
// So the parent reaps them itself, while it runs: in each open ring's folder, the ended,
// uncrashed sessions forked from that ring (RingDirectory.removeEndedChildSessions). A crashed
// child's files stay for the next launch to report; a child still running (a worker) holds its
// ring's lock and is left alone.
//
// Where: fork() may be called from a signal handler (some reporters fork a dumper that way),
// interrupting a thread that holds any lock or the allocator, so the parent's fork handler
// (crumbs_fork.c) only counts: one atomic add, and on every `interval`-th fork a futex wake.
// The reaping (allocation, a mutex, a directory listing, unlinks) runs on a thread of its own,
// "crumbs.reaper", that waits on that count: at most about `interval` ended children's files
// wait once it runs, however many forks. The thread exists only in a process that forked: it
// is started by `startIfForked()`, one atomic load when nothing forked, from ordinary code that
// runs anyway: every ring created, the client's background passes (hang watchdog, delivery).
// A process that forks before any of them runs leaves its children's files to the next launch
// until then. A forked child gets no thread (threads do not survive fork()); it starts its own
// the same way if it forks in turn.
//
// Entry points, in call order:
//   ForkedSessionReaper.track(_:)          BreadcrumbRing.create: the ring's children will be
//                                          reaped; startIfForked()
//   [fork]                                 the parent's handler counts (crumbs_fork.c)
//   ForkedSessionReaper.startIfForked()    the background passes: the thread starts once the
//                                          process has forked
//   [crumbs.reaper] reapNow()              every `interval` forks
//   ForkedSessionReaper.reapNow()          the same at once (tests, or an app that wants it)
//
// Rejected: creating the child's files only when first needed (every handle, the installed ring
// and the crash handler write the mapping without a check, and a crash must find them made);
// reaping in the fork handler (Swift code, malloc and a mutex in a handler that a signal
// handler's fork() runs); a thread in every process (one more thread in every crash report and
// live capture, for processes that never fork). Not signal-safe; nothing here runs in the fork.

import CrumbsPlatform
import CrumbsSignalPath
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

package enum ForkedSessionReaper {
  /// Forks between two reaping rounds: the most ended children whose files wait.
  package static let interval = UInt32(CRUMBS_FORK_REAP_INTERVAL)

  private struct Entry: @unchecked Sendable {
    weak var ring: BreadcrumbRing?
  }
  /// Every ring created in this process and still referenced (closed ones too: their children
  /// may still have ended sessions to remove).
  private static let rings = Mutex<[Entry]>([])
  /// The process whose reaper thread runs (0: none yet). A forked child has the parent's value
  /// but not its thread: it compares with its own pid.
  private static let threadProcess = Atomic<Int32>(0)
  /// The fork count the reaper thread's last finished round was started at.
  private static let reaped = Atomic<UInt32>(0)

  /// Reaps the ended children of `ring` from now on. Not signal-safe.
  static func track(_ ring: BreadcrumbRing) {
    rings.withLock { entries in
      entries.removeAll { $0.ring == nil }
      entries.append(Entry(ring: ring))
    }
    startIfForked()
  }

  /// Starts the reaper thread once this process has forked (see the design comment); one atomic
  /// load otherwise. Not signal-safe.
  package static func startIfForked() {
    guard crumbs_fork_count() != 0 else { return }
    let pid = Syscall.processID()
    let running = threadProcess.load(ordering: .acquiring)
    guard running != pid,
      threadProcess.compareExchange(expected: running, desired: pid, ordering: .acquiringAndReleasing)
        .exchanged
    else { return }
    do {
      try BackgroundThread.start(name: "crumbs.reaper") { ForkedSessionReaper.run() }
    } catch {
      threadProcess.store(0, ordering: .releasing)  // tried again by the next pass
    }
  }

  /// The reaper thread: a round each time `interval` more forks were counted. A round counts
  /// from the multiple of `interval` at or below the count it saw: the fork handler wakes this
  /// thread only on multiples of `interval`, so a round counted from, say, 193 would wait for
  /// 201 and sleep through the wake at 200 — and forever, if the forks stopped at 202.
  private static func run() {
    var last: UInt32 = 0
    while true {
      let seen = crumbs_fork_count()
      if seen &- last >= interval {
        last = seen - seen % interval
        reapNow()
        reaped.store(last, ordering: .releasing)
        continue
      }
      crumbs_fork_wait(seen)
    }
  }

  /// Forks counted since the reaper thread's last round began: below `interval` once it has
  /// caught up (tests wait for that).
  package static var forksSinceRound: UInt32 { crumbs_fork_count() &- reaped.load(ordering: .acquiring) }

  /// Removes the files of the ended, uncrashed sessions forked from this process's rings now.
  /// Returns the ring paths removed (with each, its crash record and session file).
  @discardableResult
  package static func reapNow() -> [String] {
    let open = rings.withLock { $0.compactMap(\.ring) }
    var folders: [(folder: String, parents: [SessionID])] = []
    for ring in open {
      let folder = Syscall.directoryName(of: ring.path)
      if let index = folders.firstIndex(where: { $0.folder == folder }) {
        folders[index].parents.append(ring.sessionID)
      } else {
        folders.append((folder, [ring.sessionID]))
      }
    }
    var removed: [String] = []
    for (folder, parents) in folders {
      removed += RingDirectory.removeEndedChildSessions(inRingsFolder: folder, parents: parents)
    }
    return removed
  }
}
