// Syscalls+Signals.swift — asking another process for something with a signal and waiting for
// its answer without polling on a timer: a queued signal with a value (sigqueue), a descriptor
// that becomes readable when the process ends (pidfd_open), a directory watched for a file
// appearing (inotify); and, on the answering side, a thread that takes the signal. See
// Syscalls+Linux.swift for the conventions.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// Sends `signal` to process `pid` with `value` (sigqueue): the receiver's handler sees
  /// `si_code` SI_QUEUE and the value. The kernel's kill rule decides who may (EPERM otherwise).
  package static func queueSignal(_ signal: Int32, value: Int32, to pid: Int32) throws(SystemCallError) {
    try retrying("sigqueue") { sigqueue(pid, signal, sigval(sival_int: value)) }
  }

  /// Unblocks `signal` on the calling thread, so that a process-directed signal always finds this
  /// thread to run its handler on, whatever the other threads block.
  package static func unblockSignalOnThisThread(_ signal: Int32) {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, signal)
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
  }

  /// A close-on-exec descriptor for process `pid` that polls readable once the process has ended
  /// (pidfd_open: Linux 5.3, glibc 2.36), so waiting for an answer also waits for the death of
  /// the one asked; nil where the C library or the kernel has none (look with `processExists`).
  package static func processDescriptor(_ pid: Int32) -> Int32? {
    // Looked up, not linked: Swift cannot call the variadic syscall(), and an older glibc (or a
    // static executable, where dlsym finds nothing) has no wrapper.
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open") else { return nil }
    let pidfdOpen = unsafeBitCast(symbol, to: (@convention(c) (Int32, UInt32) -> Int32).self)
    guard let fd = try? retrying("pidfd_open", { pidfdOpen(pid, 0) }) else { return nil }
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    return fd
  }

  /// A non-blocking inotify descriptor watching `directory` for files created or renamed into it
  /// (`IN_MOVED_TO`, `IN_CLOSE_WRITE`): poll it, then `watchedNames` says which.
  package static func watchDirectory(_ directory: String) throws(SystemCallError) -> Int32 {
    let fd = try inotifyDescriptor()
    do throws(SystemCallError) {
      _ = try addWatch(fd, directory, mask: UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR))
    } catch {
      close(fd)
      throw error
    }
    return fd
  }

  /// The names of the files the inotify descriptor `fd` reported since the last call (none when
  /// it has nothing to say: it is non-blocking). An overflowed queue reports `""`: look again.
  package static func watchedNames(_ fd: Int32) -> [String] {
    inotifyEvents(fd).map { $0.overflowed ? "" : $0.name }
  }
}
