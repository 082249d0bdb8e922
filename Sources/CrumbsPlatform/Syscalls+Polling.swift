// Syscalls+Polling.swift — a poll loop's calls: wake-up pipes, poll, commands written to a
// kernel file, and small kernel files read again and again into one buffer (no allocation per
// read). See Syscalls+Linux.swift.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// A pipe whose ends are close-on-exec and non-blocking: the wake-up channel of a poll loop.
  package static func wakePipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    try retrying("pipe") { pipe(&ends) }
    for end in ends {
      _ = fcntl(end, F_SETFD, FD_CLOEXEC)
      _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
    }
    return (ends[0], ends[1])
  }

  /// Writes one byte (a wake-up) to a non-blocking pipe; a full pipe already wakes its reader.
  package static func signalWakePipe(_ fd: Int32) {
    var byte: UInt8 = 1
    while Glibc.write(fd, &byte, 1) < 0 && Glibc.errno == EINTR {}
  }

  /// What a non-blocking descriptor holds now, at most `limit` bytes in one read; empty when it
  /// holds nothing (EAGAIN), at end of file, or on an error.
  package static func readAvailable(_ fd: Int32, limit: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: max(limit, 1))
    var count = -1
    repeat {
      count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
    } while count < 0 && Glibc.errno == EINTR
    return count > 0 ? Array(bytes[0..<count]) : []
  }

  /// Waits for `descriptors`' events for at most `timeoutMilliseconds` (-1: no limit) and
  /// fills in their `revents`. EINTR counts as a timeout (the caller loops anyway).
  package static func poll(_ descriptors: inout [pollfd], timeoutMilliseconds: Int32) throws(SystemCallError)
  {
    let result = descriptors.withUnsafeMutableBufferPointer {
      Glibc.poll($0.baseAddress, nfds_t($0.count), timeoutMilliseconds)
    }
    if result < 0 {
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted {
        for index in descriptors.indices { descriptors[index].revents = 0 }
        return
      }
      throw SystemCallError(call: "poll", errno: error)
    }
  }

  /// Writes all of `bytes` to `fd` (one write: kernel control files take a command per write).
  package static func writeCommand(_ fd: Int32, _ bytes: [UInt8], path: String) throws(SystemCallError) {
    try retrying("write", path: path) { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
  }

  /// Reads the whole of a small file (a /proc or /sys text file) into `buffer`, reusing its
  /// storage, and returns the byte count; a file that fills the buffer is refused as too large.
  /// Re-opened on every call: a cgroup file replaced or removed is seen as it is now.
  package static func readSmallFile(_ path: String, into buffer: inout [UInt8]) throws(SystemCallError) -> Int
  {
    let fd = try open(path, O_RDONLY)
    defer { close(fd) }
    var total = 0
    while true {
      let count = try retrying("read", path: path) {
        buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, $0.count - total) }
      }
      if count == 0 { return total }
      total += count
      if total == buffer.count {
        throw SystemCallError(call: "read", path: path, refusal: .tooLarge(limit: buffer.count - 1))
      }
    }
  }
}
