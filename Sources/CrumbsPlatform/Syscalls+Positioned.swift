// Syscalls+Positioned.swift — files read (or written) in parts: a regular file opened for
// reading without blocking, reads and writes at an offset, links, inodes and whether a path
// still names an open file. See Syscalls+Linux.swift.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// Opens `path` for reading without blocking on FIFOs or devices, and returns the descriptor
  /// and size only when it is a regular file (refused as `.notARegularFile` otherwise).
  package static func openRegularFileForReading(_ path: String) throws(SystemCallError)
    -> (fd: Int32, size: UInt64)
  {
    let fd = try open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY)
    var info = stat()
    do {
      try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
    } catch {
      close(fd)
      throw error
    }
    guard (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= 0 else {
      close(fd)
      throw SystemCallError(call: "open", path: path, refusal: .notARegularFile)
    }
    return (fd, UInt64(info.st_size))
  }

  /// Reads up to `count` bytes at `offset` with pread; fewer only at end of file.
  package static func read(_ fd: Int32, at offset: UInt64, count: Int, path: String) throws(SystemCallError)
    -> [UInt8]
  {
    guard count > 0 else { return [] }
    var bytes = [UInt8](repeating: 0, count: count)
    let done = try bytes.withUnsafeMutableBytes { buffer in
      Result { () throws(SystemCallError) in try read(fd, at: offset, into: buffer, path: path) }
    }.get()
    if done < count { bytes.removeLast(count - done) }
    return bytes
  }

  /// Fills `buffer` from `offset` with pread; returns how many bytes it read, fewer than the
  /// buffer's size only at end of file.
  package static func read(
    _ fd: Int32, at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer, path: String
  ) throws(SystemCallError) -> Int {
    guard let base = buffer.baseAddress, offset <= UInt64(Int64.max) else { return 0 }
    var done = 0
    while done < buffer.count {
      let (position, overflow) = Int64(offset).addingReportingOverflow(Int64(done))
      if overflow { break }
      let got = try retrying("pread", path: path) {
        pread(fd, base + done, buffer.count - done, off_t(position))
      }
      if got == 0 { break }
      done += got
    }
    return done
  }

  /// Writes all of `bytes` at `offset` with pwrite, retrying EINTR and short writes.
  package static func write(_ fd: Int32, _ bytes: [UInt8], at offset: UInt64, path: String)
    throws(SystemCallError)
  {
    var done = 0
    while done < bytes.count {
      done += try retrying("pwrite", path: path) {
        bytes.withUnsafeBytes {
          pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done))
        }
      }
    }
  }

  /// The target of the symbolic link at `path`, or nil.
  package static func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4097)
    let count = Glibc.readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// The inode number of what `path` names (following symbolic links), or nil.
  package static func inode(ofPath path: String) -> UInt64? {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 ? UInt64(info.st_ino) : nil
  }

  /// Whether `path` still names the file open at `fd` (same device and inode, not symlinked):
  /// false once the file was renamed away or deleted after it was opened.
  package static func pathStillNames(_ fd: Int32, _ path: String) -> Bool {
    var open = stat()
    var named = stat()
    guard Glibc.fstat(fd, &open) == 0, open.st_nlink > 0,
      fstatat(AT_FDCWD, path, &named, AT_SYMLINK_NOFOLLOW) == 0
    else { return false }
    return open.st_dev == named.st_dev && open.st_ino == named.st_ino
  }

  /// Whether `path` names something that exists (following symbolic links); the errno otherwise.
  package static func statusOfPath(_ path: String) -> Errno? {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 ? nil : Errno(rawValue: Glibc.errno)
  }

  /// What `stat` says of `path`, links followed, or why it cannot say.
  package static func followedStatus(ofPath path: String) -> Result<EntryStatus, Errno> {
    var info = stat()
    guard fstatat(AT_FDCWD, path, &info, 0) == 0 else { return .failure(Errno(rawValue: Glibc.errno)) }
    return .success(EntryStatus(info))
  }

  /// Whether `path` is a regular file this process may execute.
  package static func isExecutableFile(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 && (info.st_mode & S_IFMT) == S_IFREG
      && access(path, X_OK) == 0
  }
}
