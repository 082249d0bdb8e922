// DeliveryLock.swift — one deliverer per report store at a time: across processes (a record
// lock on reports/.delivery.lock) and within this one (the set of stores held here).
//
// Why not flock: a child process that any thread of the app spawns holds a copy of every open
// descriptor from its clone until its exec, and with it the flock, so a lock check in that
// instant fails and a pass does nothing. A record lock (Syscall.tryLockForThisProcess) belongs
// to this process alone; since it does not exclude this process's own threads, and closing any
// descriptor of the file would drop it, the stores held here are tracked, and each has one
// descriptor. They are tracked by the lock file's identity (device and inode), not by the path
// that names the store: two uploaders of one process whose paths differ ("dir" and "dir/", a
// link) are one store, and the second finds it busy — keyed by path, both passes ran over the
// same reports and outbox and sent each event twice. The second never opens the file
// held here (closing that descriptor would drop the first one's record lock). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

enum DeliveryLock {
  /// Store path → the descriptor and identity of its lock file, for the stores this process
  /// delivers now.
  private static let held = Mutex<[String: (fd: Int32, file: Syscall.EntryStatus.FileID)]>([:])

  /// Takes the lock of the store at `storePath`; false when a deliverer (here or in another
  /// process) has it, or the lock file cannot be opened.
  static func take(store storePath: String) -> Bool {
    held.withLock { held in
      guard held[storePath] == nil else { return false }
      let path = storePath + "/.delivery.lock"
      func heldHere(_ status: Syscall.EntryStatus?) -> Bool {
        guard let status, status.kind == .regular else { return false }
        return held.values.contains { $0.file == status.fileID }
      }
      // Held here under another path: busy, and left unopened.
      if heldHere(Syscall.status(ofPath: path)) { return false }
      // Never through a link (the store is untrusted): one planted here is replaced, which
      // touches nothing it points to.
      var opened = try? Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW)
      if opened == nil, Syscall.status(ofPath: path)?.kind == .symbolicLink {
        _ = try? Syscall.unlink(path)
        opened = try? Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW)
      }
      guard let fd = opened else { return false }
      guard let status = Syscall.status(ofPath: path), status.kind == .regular, !heldHere(status),
        (try? Syscall.tryLockForThisProcess(fd, path: path)) == true
      else {
        Syscall.close(fd)
        return false
      }
      held[storePath] = (fd, status.fileID)
      return true
    }
  }

  /// Lets the next deliverer in (closing the descriptor drops the record lock).
  static func release(store storePath: String) {
    held.withLock { held in
      if let lock = held.removeValue(forKey: storePath) { Syscall.close(lock.fd) }
    }
  }
}
