// RingDirectory+Watching.swift — for a process that watches rings/ from outside (`crumbs
// collect --watch`): whether one ring's writer is gone, asked when the kernel says the ring
// was closed, without claiming anything. Claiming stays RingDirectory+Leftovers' alone (its
// claim lock and rename make one report per session); this only says when a claim is worth
// trying.
//
// The inotify IN_CLOSE_WRITE of a ring comes from the kernel's last close of the writer's file
// (its descriptor and its mapping), which happens on process exit before the writer's flock is
// released and before the process stops looking alive in /proc: for a moment the writer still
// looks `running`. Hence `.running(pid:)`: the watcher waits for that pid to end (pidfd) and
// asks again. The close of another claimer's read-write probe also gives IN_CLOSE_WRITE; its
// writer is running, and the answer stays `.running` until it ends. Not signal-safe.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

extension RingDirectory {
  /// What a watcher can tell about one ring's writer now.
  package enum WriterStatus: Sendable, Equatable {
    /// Gone (its flock is free, or its header names a process that no longer runs), or the ring
    /// is no longer there (claimed, removed): a pass over the folder is due.
    case gone
    /// The process the header names runs, in this pid namespace: wait for `pid` to end.
    case running(pid: Int32)
    /// The flock is held and the header cannot say by whom (another pid namespace, an older
    /// header, an unreadable one): the lock alone decides; ask again a little later.
    case undecided
  }

  /// The status of the writer of the ring file at `path` (see `WriterStatus`). Takes the ring's
  /// flock for an instant when it is free (as every claimer's probe does), never its claim lock.
  /// Something other than a regular ring file of the folder's owner (a FIFO, a link, a device)
  /// is never read or waited on: `.gone`, so the pass that follows quarantines it.
  package static func writerStatus(ofRing path: String) -> WriterStatus {
    let descriptor: Int32
    do {
      descriptor = try Syscall.openUntrustedFile(path, O_RDONLY)
    } catch {
      return error.errno == .noSuchFileOrDirectory || error.refusal != nil ? .gone : .undecided
    }
    defer { Syscall.close(descriptor) }
    if (try? Syscall.tryLockExclusive(descriptor, path: path)) == true { return .gone }
    guard let info = headerInfo(descriptor, path: path) else { return .undecided }
    switch info.writer.liveness {
    case .gone: return .gone
    case .running: return .running(pid: info.writer.pid)
    case .unknown: return .undecided
    }
  }
}
