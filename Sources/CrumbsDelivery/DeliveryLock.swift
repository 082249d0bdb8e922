// DeliveryLock.swift — one deliverer per report store at a time: across processes (a record
// lock on reports/.delivery.lock) and within this one (the set of stores held here).
//
// Why not flock: a child process that any thread of the app spawns holds a copy of every open
// descriptor from its clone until its exec, and with it the flock, so a lock check in that
// instant fails and a pass does nothing. A record lock (Syscall.tryLockForThisProcess) belongs
// to this process alone; since it does not exclude this process's own threads, and closing any
// descriptor of the file would drop it, the stores held here are tracked, and each has one
// descriptor. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

enum DeliveryLock {
  /// Store path → the descriptor of its lock file, for the stores this process delivers now.
  private static let held = Mutex<[String: Int32]>([:])

  /// Takes the lock of the store at `storePath`; false when a deliverer (here or in another
  /// process) has it, or the lock file cannot be opened.
  static func take(store storePath: String) -> Bool {
    held.withLock { held in
      guard held[storePath] == nil else { return false }
      let path = storePath + "/.delivery.lock"
      // Never through a link (the store is untrusted): one planted here is replaced, which
      // touches nothing it points to.
      var opened = try? Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW)
      if opened == nil, Syscall.status(ofPath: path)?.kind == .symbolicLink {
        _ = try? Syscall.unlink(path)
        opened = try? Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW)
      }
      guard let fd = opened else { return false }
      guard (try? Syscall.tryLockForThisProcess(fd, path: path)) == true else {
        Syscall.close(fd)
        return false
      }
      held[storePath] = fd
      return true
    }
  }

  /// Lets the next deliverer in (closing the descriptor drops the record lock).
  static func release(store storePath: String) {
    held.withLock { held in
      if let fd = held.removeValue(forKey: storePath) { Syscall.close(fd) }
    }
  }
}
