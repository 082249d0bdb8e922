// LockFile.swift — a small file in a Crumbs directory whose record lock serializes the
// processes that update one of its files (session counts, the crash-loop tally), with a mutex
// for this process's own threads: a record lock does not exclude them, and one thread's close
// of the file would drop the lock under another.
//
// Entry points: LockFile() once per file kind (a static), withLock(path:_:) around each update.
// A record lock (fcntl F_SETLKW, Syscall.lockForThisProcess): a child forked meanwhile never
// holds it. Not signal-safe.

import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

package final class LockFile: Sendable {
  private let threads = Mutex(())

  package init() {}

  /// Runs `body` with `path` open read-write (created 0600 if missing, never through a link: a
  /// link planted there would make a write land outside the directory) and exclusively locked
  /// against other processes and this process's other threads.
  package func withLock<Result>(
    path: String, _ body: (Int32) throws(SystemCallError) -> Result
  ) throws(SystemCallError) -> Result {
    try threads.withLock { _ throws(SystemCallError) -> Result in
      let fd = try Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
      defer { Syscall.close(fd) }
      try Syscall.lockForThisProcess(fd, path: path)
      return try body(fd)
    }
  }
}
