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
    try? openProcessDescriptor(pid)
  }

  /// A close-on-exec descriptor naming process `pid` for good (pidfd_open: Linux 5.3): it polls
  /// readable once the process has ended, and `signalProcess` through it reaches that process or
  /// fails with ESRCH, never a later process given the same pid. ENOSYS where the kernel has
  /// none (or the C library no wrapper and no `syscall`: a static executable).
  package static func openProcessDescriptor(_ pid: Int32) throws(SystemCallError) -> Int32 {
    // Looked up, not linked: Swift cannot call the variadic syscall(), and an older glibc (or a
    // static executable, where dlsym finds nothing) has no wrapper.
    let fd: Int32
    if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open") {
      let pidfdOpen = unsafeBitCast(symbol, to: (@convention(c) (Int32, UInt32) -> Int32).self)
      fd = try retrying("pidfd_open") { pidfdOpen(pid, 0) }
    } else {
      fd = try retrying("pidfd_open") { Int32(truncatingIfNeeded: rawSystemCall(434, Int(pid), 0, 0, 0)) }
    }
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    return fd
  }

  /// Sends `signal` to the process the pidfd `process` names (pidfd_send_signal: Linux 5.1),
  /// with `value` as sigqueue sends it (si_code SI_QUEUE, our pid and uid) when given; signal 0
  /// only asks whether it may be signalled. A process that ended fails with ESRCH: the signal
  /// never reaches a later process that was given the same pid. The kernel's kill rule decides
  /// who may (EPERM otherwise).
  package static func signalProcess(_ process: Int32, _ signal: Int32, value: Int32? = nil)
    throws(SystemCallError)
  {
    var info = siginfo_t()
    info.si_signo = signal
    info.si_code = Int32(SI_QUEUE)
    info._sifields._rt.si_pid = getpid()
    info._sifields._rt.si_uid = getuid()
    info._sifields._rt.si_sigval.sival_int = value ?? 0
    let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_send_signal")
    try withUnsafeMutablePointer(to: &info) { pointer throws(SystemCallError) in
      let argument = value == nil ? nil : UnsafeMutableRawPointer(pointer)
      if let symbol {
        let send = unsafeBitCast(
          symbol, to: (@convention(c) (Int32, Int32, UnsafeMutableRawPointer?, UInt32) -> Int32).self)
        _ = try retrying("pidfd_send_signal") { send(process, signal, argument, 0) }
      } else {
        let address = Int(bitPattern: argument)
        _ = try retrying("pidfd_send_signal") {
          Int32(truncatingIfNeeded: rawSystemCall(424, Int(process), Int(signal), address, 0))
        }
      }
    }
  }

  /// syscall(2) with four arguments, for the calls an older C library has no wrapper for; -1 and
  /// ENOSYS where even `syscall` cannot be found (a static executable). The numbers used here
  /// (424, 434) are the same on x86_64 and aarch64 (the common table since Linux 5.1). Calling
  /// the variadic `syscall` through a fixed prototype is how both ABIs pass its integer
  /// arguments (in registers, the vector count in %al ignored by it).
  private static func rawSystemCall(_ number: Int, _ a: Int, _ b: Int, _ c: Int, _ d: Int) -> Int {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syscall") else {
      Glibc.errno = ENOSYS
      return -1
    }
    let call = unsafeBitCast(symbol, to: (@convention(c) (Int, Int, Int, Int, Int) -> Int).self)
    return call(number, a, b, c, d)
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

  /// `watchDirectory` for the open directory `directory`: the watch is on that directory
  /// itself (reached through /proc/self/fd), whatever its path names by now.
  package static func watchDirectory(descriptor directory: Int32) throws(SystemCallError) -> Int32 {
    try watchDirectory("/proc/self/fd/\(directory)")
  }

  /// The names of the files the inotify descriptor `fd` reported since the last call (none when
  /// it has nothing to say: it is non-blocking). An overflowed queue reports `""`: look again.
  package static func watchedNames(_ fd: Int32) -> [String] {
    inotifyEvents(fd).map { $0.overflowed ? "" : $0.name }
  }
}
