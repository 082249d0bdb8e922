// Syscalls+Linux.swift — every system call the Swift side of Crumbs makes, in one thin file.
//
// Each wrapper retries EINTR, reads errno at once, and throws a typed `SystemCallError` that
// names the call and the path. Nothing here is signal-safe: the signal path is C
// (Sources/CrumbsSignalPath), and none of this runs on the append hot path.

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif
import SystemPackage

/// A failed system call: which call, on what, and the errno it left.
public struct SystemCallError: Error, CustomStringConvertible, Equatable {
  /// The call that failed, e.g. `"open"`.
  public var call: String
  /// The path it worked on, when it had one.
  public var path: String?
  /// What errno said.
  public var errno: Errno

  public var description: String {
    if let path { return "\(call)(\(path)): \(errno)" }
    return "\(call): \(errno)"
  }
}

enum Syscall {
  /// Runs `body` until it stops failing with EINTR; turns -1 into a thrown error.
  @discardableResult
  static func retrying<T: FixedWidthInteger>(
    _ call: String, path: String? = nil, _ body: () -> T
  ) throws(SystemCallError) -> T {
    while true {
      let result = body()
      if result != -1 { return result }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      throw SystemCallError(call: call, path: path, errno: error)
    }
  }

  static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(SystemCallError)
    -> Int32
  {
    try retrying("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
  }

  static func close(_ fd: Int32) {
    // Linux closes the descriptor even when close reports EINTR: never retry.
    _ = Glibc.close(fd)
  }

  /// Creates `path` with mode 0700 if missing; an existing directory is accepted as it is.
  static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(SystemCallError) {
    if Glibc.mkdir(path, mode) == 0 { return }
    let error = Errno(rawValue: Glibc.errno)
    if error == .fileExists, isDirectory(path) { return }
    throw SystemCallError(call: "mkdir", path: path, errno: error)
  }

  /// Creates every missing component of `path`, each 0700.
  static func makeDirectories(_ path: String) throws(SystemCallError) {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for component in path.split(separator: "/") {
      prefix += component
      try makeDirectory(prefix)
      prefix += "/"
    }
  }

  static func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
  }

  static func fileSize(_ fd: Int32, path: String) throws(SystemCallError) -> Int {
    var info = stat()
    try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
    return Int(info.st_size)
  }

  /// Exclusive, non-blocking flock. Returns false when another open file description holds it.
  static func tryLockExclusive(_ fd: Int32, path: String) throws(SystemCallError) -> Bool {
    while true {
      if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      if error == .wouldBlock { return false }
      throw SystemCallError(call: "flock", path: path, errno: error)
    }
  }

  /// Sizes a file and reserves its blocks, so that writing through a mapping of it can never
  /// meet a full disk (which would be a SIGBUS in the middle of an append).
  static func allocate(_ fd: Int32, size: Int, path: String) throws(SystemCallError) {
    try retrying("ftruncate", path: path) { Glibc.ftruncate(fd, off_t(size)) }
    let result = posix_fallocate(fd, 0, off_t(size))
    // Filesystems without fallocate (EOPNOTSUPP) keep the sparse file: still correct, only the
    // full-disk guarantee is lost.
    if result != 0 && result != EOPNOTSUPP {
      throw SystemCallError(call: "posix_fallocate", path: path, errno: Errno(rawValue: result))
    }
  }

  static func mapShared(_ fd: Int32, size: Int, path: String) throws(SystemCallError)
    -> UnsafeMutableRawPointer
  {
    guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
      base != MAP_FAILED
    else {
      throw SystemCallError(call: "mmap", path: path, errno: Errno(rawValue: Glibc.errno))
    }
    return base
  }

  static func unmap(_ base: UnsafeMutableRawPointer, size: Int) {
    _ = munmap(base, size)
  }

  /// Replaces a file mapping with private anonymous memory at the same address, so a late writer
  /// that still holds the address writes into harmless memory instead of faulting.
  static func retireMapping(_ base: UnsafeMutableRawPointer, size: Int) {
    _ = mmap(base, size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
  }

  static func msync(_ base: UnsafeMutableRawPointer, size: Int) {
    _ = Glibc.msync(base, size, MS_SYNC)
  }

  static func fsync(_ fd: Int32, path: String) throws(SystemCallError) {
    try retrying("fsync", path: path) { Glibc.fsync(fd) }
  }

  /// fsyncs a directory, making renames and creations in it durable.
  static func fsyncDirectory(_ path: String) throws(SystemCallError) {
    let fd = try open(path, O_RDONLY | O_DIRECTORY)
    defer { close(fd) }
    try fsync(fd, path: path)
  }

  static func rename(_ from: String, to: String) throws(SystemCallError) {
    try retrying("rename", path: from) { Glibc.rename(from, to) }
  }

  static func unlink(_ path: String) throws(SystemCallError) {
    try retrying("unlink", path: path) { Glibc.unlink(path) }
  }

  /// Reads a whole file, at most `limit` bytes (more is an EFBIG error).
  static func readFile(_ path: String, limit: Int = 1 << 30) throws(SystemCallError) -> [UInt8] {
    let fd = try open(path, O_RDONLY)
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let count = try retrying("read", path: path) {
        chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      }
      if count == 0 { return bytes }
      bytes.append(contentsOf: chunk[0..<count])
      if bytes.count > limit {
        throw SystemCallError(call: "read", path: path, errno: .fileTooLarge)
      }
    }
  }

  /// Writes `bytes` to a new file at `path` through a temporary file, fsync and rename, then
  /// fsyncs the directory: readers see the old file or the whole new one, never a part.
  static func writeFileAtomically(_ path: String, _ bytes: some Collection<UInt8>)
    throws(SystemCallError)
  {
    let temporary = path + ".tmp-\(getpid())"
    let fd = try open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
    do throws(SystemCallError) {
      let contiguous = Array(bytes)
      var offset = 0
      while offset < contiguous.count {
        let written = try retrying("write", path: temporary) {
          contiguous.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        }
        offset += written
      }
      try fsync(fd, path: temporary)
      close(fd)
    } catch {
      close(fd)
      _ = try? unlink(temporary)
      throw error
    }
    try rename(temporary, to: path)
    try fsyncDirectory(directoryName(of: path))
  }

  static func directoryEntries(_ path: String) throws(SystemCallError) -> [String] {
    guard let directory = opendir(path) else {
      throw SystemCallError(call: "opendir", path: path, errno: Errno(rawValue: Glibc.errno))
    }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafePointer(to: entry.pointee.d_name) {
        $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  static func directoryName(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
  }

  static func fileExists(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, AT_SYMLINK_NOFOLLOW) == 0
  }

  static func processID() -> Int32 { getpid() }

  static func onlineCPUCount() -> Int { max(1, sysconf(Int32(_SC_NPROCESSORS_CONF))) }
}
