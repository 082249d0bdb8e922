// ForkedSessionReaper.swift — a forking process removes what its ended children left on disk.
//
// Every fork() gives the child a ring file and a crash record of its own (crumbs_fork.h), over
// a megabyte reserved on disk. A child that execs, exits or is killed without crashing leaves
// them behind, and only the next launch's PostMortemProcessor would remove them (it never
// reports such a session); a pre-fork server, a daemon or a parent that forks and execs helpers
// all day would fill the disk first (200 fork+exec of /bin/true: 401 files, 309 MB).
//
// So the parent reaps them itself, while it runs. The first ring created registers a
// pthread_atfork parent handler; it counts forks and, on every `interval`-th, removes in each
// open ring's folder the ended, uncrashed sessions forked from that ring
// (RingDirectory.removeEndedChildSessions): at most about `interval` ended children's files wait
// at any time, however many forks. A crashed child's files stay for the next launch to report;
// a child still running (a worker) holds its ring's lock and is left alone. A forked child that
// forks in turn reaps its own children the same way (its rings name the child's sessions).
//
// Entry points, in call order:
//   ForkedSessionReaper.track(_:)   BreadcrumbRing.create: the ring's children will be reaped
//   [fork]                          in the parent, every `interval`-th: reapNow()
//   ForkedSessionReaper.reapNow()   the same at once (tests, or an app that wants it)
//
// Rejected: creating the child's files only when first needed (every handle, the installed ring
// and the crash handler write the mapping without a check, and a crash must find them made);
// reaping on every fork (a directory listing and a header read per live child on each fork of a
// pre-fork server); a thread of its own waiting for forks (one more thread in every process).
// The reaping runs on the forking thread, in ordinary context, after fork() returned in the
// parent: a few file operations per ended child, once every `interval` forks. It skips a round
// when another thread holds the table's lock, rather than wait in the app's fork. Not
// signal-safe.

import CrumbsPlatform
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

package enum ForkedSessionReaper {
  /// Forks between two reaping rounds: the most ended children whose files wait.
  package static let interval: UInt32 = 8

  private struct Entry: @unchecked Sendable {
    weak var ring: BreadcrumbRing?
  }
  /// Every ring created in this process and still referenced (closed ones too: their children
  /// may still have ended sessions to remove).
  private static let rings = Mutex<[Entry]>([])
  private static let registered = Atomic<Bool>(false)
  private static let forks = Atomic<UInt32>(0)

  /// Reaps the ended children of `ring` from now on. Not signal-safe.
  static func track(_ ring: BreadcrumbRing) {
    rings.withLock { entries in
      entries.removeAll { $0.ring == nil }
      entries.append(Entry(ring: ring))
    }
    if !registered.exchange(true, ordering: .acquiringAndReleasing) {
      _ = pthread_atfork(nil, { ForkedSessionReaper.afterFork() }, nil)
    }
  }

  /// The parent's fork handler: a round every `interval` forks.
  private static func afterFork() {
    guard forks.add(1, ordering: .relaxed).newValue % interval == 0 else { return }
    reapNow()
  }

  /// Removes the files of the ended, uncrashed sessions forked from this process's rings now.
  /// Returns the ring paths removed (with each, its crash record and session file).
  @discardableResult
  package static func reapNow() -> [String] {
    guard let open = rings.withLockIfAvailable({ $0.compactMap(\.ring) }) else { return [] }
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
