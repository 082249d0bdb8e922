// Syscalls+SignalDescriptor.swift — signals taken as data: blocked, then read from a signalfd
// in a poll loop, so that no work runs in a signal handler (a long-running command's SIGTERM
// and SIGINT). See Syscalls+Linux.swift for the conventions.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// Blocks `signals` on the calling thread (threads it starts later inherit the mask: call it
  /// before starting any) and returns a non-blocking, close-on-exec signalfd that polls readable
  /// while one of them is pending.
  package static func signalDescriptor(_ signals: [Int32]) throws(SystemCallError) -> Int32 {
    var set = sigset_t()
    sigemptyset(&set)
    for signal in signals { sigaddset(&set, signal) }
    let blocked = pthread_sigmask(SIG_BLOCK, &set, nil)
    guard blocked == 0 else {
      throw SystemCallError(call: "pthread_sigmask", errno: Errno(rawValue: blocked))
    }
    // Looked up, not linked: Glibc's module map leaves out <sys/signalfd.h> (glibc has had the
    // function since 2.8; a static executable, where dlsym finds nothing, gets an error).
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "signalfd") else {
      throw SystemCallError(call: "signalfd", refusal: .other("not found by dlsym (a static executable?)"))
    }
    let signalfd = unsafeBitCast(
      symbol, to: (@convention(c) (Int32, UnsafePointer<sigset_t>, Int32) -> Int32).self)
    // SFD_NONBLOCK and SFD_CLOEXEC are O_NONBLOCK and O_CLOEXEC (<sys/signalfd.h>).
    return try retrying("signalfd") { signalfd(-1, &set, O_NONBLOCK | O_CLOEXEC) }
  }

  /// The size of one `struct signalfd_siginfo`, whose first field is the signal number (uint32).
  static let signalInfoSize = 128

  /// The signal numbers pending on the signalfd `fd`, taken (none when nothing is pending).
  package static func takeSignals(_ fd: Int32) -> [Int32] {
    let size = signalInfoSize
    var taken: [Int32] = []
    while true {
      let bytes = readAvailable(fd, limit: size * 8)
      if bytes.count < size { return taken }
      for offset in stride(from: 0, to: bytes.count - size + 1, by: size) {
        let number = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        taken.append(Int32(bitPattern: number))
      }
    }
  }
}
