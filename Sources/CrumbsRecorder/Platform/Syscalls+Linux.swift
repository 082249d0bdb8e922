// Syscalls+Linux.swift — the system calls the Swift side of Crumbs makes on files, directories,
// mappings and pipes, in one thin file. The rest of the platform layer is beside it, one idea a
// file: Subprocess+Linux (starting programs), Clock+Linux (reading clocks), BackgroundThread+Linux
// (starting threads), Quarantine (moving bad files aside), PageBuffer (large buffers straight
// from mmap), SystemFacts/ProcessAttributes (facts about this process and machine). Code outside
// Platform/ makes no system call of its own.
//
// Each wrapper retries EINTR and throws a typed `SystemCallError` that names the call and the
// path. errno is read as soon as the call returns: a wrapper's closure is the libc call alone,
// and the only code that can run between the call and the read is the release of the call's
// temporary C string, and glibc's free (since 2.33) preserves errno. Nothing here is signal-safe: the signal path is C
// (Sources/CrumbsSignalPath), and none of this runs on the append hot path.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A failed system call — which call, on what, and the errno it left — or a call that worked
/// but whose result Crumbs refused (too large, not a regular file): then `errno` is nil and
/// `refusal` says why. No errno is ever made up.
public struct SystemCallError: Error, CustomStringConvertible, Equatable {
  /// Why a call that succeeded did not give what was needed.
  public enum Refusal: Sendable, Equatable, CustomStringConvertible {
    /// More bytes than the caller's limit.
    case tooLarge(limit: Int)
    /// Not a regular file (a FIFO, a device, a directory…): never read, it could block or lie.
    case notARegularFile
    /// A symbolic link where a file or folder of Crumbs' own should be: never followed, it could
    /// lead anywhere outside the Crumbs directory.
    case symbolicLink
    /// Anything else, in words.
    case other(String)

    public var description: String {
      switch self {
      case .tooLarge(let limit): "larger than the limit of \(limit) bytes"
      case .notARegularFile: "not a regular file"
      case .symbolicLink: "a symbolic link (never followed)"
      case .other(let text): text
      }
    }
  }

  /// The call that failed, e.g. `"open"`.
  public var call: String
  /// The path it worked on, when it had one.
  public var path: String?
  /// What errno said; nil when the call succeeded and its result was refused.
  public var errno: Errno?
  /// Why the result of a successful call was refused; nil when errno says what failed.
  public var refusal: Refusal?

  package init(call: String, path: String? = nil, errno: Errno) {
    self.call = call
    self.path = path
    self.errno = errno
  }

  package init(call: String, path: String? = nil, refusal: Refusal) {
    self.call = call
    self.path = path
    self.refusal = refusal
  }

  /// What went wrong, without the call and path: the errno's text or the refusal.
  public var cause: String { refusal?.description ?? errno.map { "\($0)" } ?? "unknown" }

  public var description: String {
    if let path { return "\(call)(\(path)): \(cause)" }
    return "\(call): \(cause)"
  }
}

// MARK: - Waiting and small kernel files (memory-pressure monitor)

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

package enum Syscall {
  /// Runs `body` until it stops failing with EINTR; turns -1 into a thrown error.
  @discardableResult
  package static func retrying<T: FixedWidthInteger>(
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

  package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(SystemCallError)
    -> Int32
  {
    try retrying("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
  }

  package static func close(_ fd: Int32) {
    // Linux closes the descriptor even when close reports EINTR: never retry.
    _ = Glibc.close(fd)
  }

  /// Creates `path` with mode 0700 if missing; an existing directory is accepted as it is.
  package static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(SystemCallError) {
    if Glibc.mkdir(path, mode) == 0 { return }
    let error = Errno(rawValue: Glibc.errno)
    if error == .fileExists, isDirectory(path) { return }
    throw SystemCallError(call: "mkdir", path: path, errno: error)
  }

  /// Creates every missing component of `path`, each 0700.
  package static func makeDirectories(_ path: String) throws(SystemCallError) {
    // Usually there already (every launch after the first): one stat instead of a mkdir and a
    // stat per component, on the caller's thread of CrumbsClient.start.
    if isDirectory(path) { return }
    // Split as bytes: String's own split walks grapheme clusters, and a Substring appended goes
    // through the generic append(contentsOf:), whose first use makes the runtime look up a
    // conformance through every loaded image (this runs on the caller's thread of
    // CrumbsClient.start, where a process has Foundation loaded).
    var prefix = path.utf8.first == UInt8(ascii: "/") ? "/" : ""
    for component in path.utf8.split(separator: UInt8(ascii: "/")) {
      prefix += String(decoding: component, as: UTF8.self)
      try makeDirectory(prefix)
      prefix += "/"
    }
  }

  package static func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
  }

  package static func fileSize(_ fd: Int32, path: String) throws(SystemCallError) -> Int {
    var info = stat()
    try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
    return Int(info.st_size)
  }

  /// The file's last modification time, in nanoseconds since the epoch (0 before it).
  package static func modificationTime(_ fd: Int32, path: String) throws(SystemCallError) -> UInt64 {
    var info = stat()
    try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
    guard info.st_mtim.tv_sec >= 0 else { return 0 }
    return UInt64(info.st_mtim.tv_sec) * 1_000_000_000 + UInt64(max(0, info.st_mtim.tv_nsec))
  }

  /// Exclusive, non-blocking flock. Returns false when another open file description holds it.
  package static func tryLockExclusive(_ fd: Int32, path: String) throws(SystemCallError) -> Bool {
    while true {
      if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      if error == .wouldBlock { return false }
      throw SystemCallError(call: "flock", path: path, errno: error)
    }
  }

  /// Takes a write lock on the whole file that belongs to this process (fcntl F_SETLK). Unlike
  /// flock, no child ever holds it: a child that another thread spawns holds a copy of every
  /// descriptor (and so of every flock) from its clone until its exec, long enough for a lock
  /// check to fail. False when another process holds it. Record locks do not exclude threads of
  /// one process, and closing any descriptor of the file drops the lock: the caller keeps one
  /// descriptor per file and excludes its own threads.
  package static func tryLockForThisProcess(_ fd: Int32, path: String) throws(SystemCallError) -> Bool {
    var lock = Glibc.flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    while true {
      if fcntl(fd, F_SETLK, &lock) == 0 { return true }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      if error == .wouldBlock || error == .permissionDenied { return false }  // EAGAIN or EACCES
      throw SystemCallError(call: "fcntl(F_SETLK)", path: path, errno: error)
    }
  }

  /// Takes a write lock on the file's first byte that belongs to this open file description
  /// (fcntl F_OFD_SETLK): held until the last descriptor of that description closes, whatever
  /// other descriptors of the file this process opens and closes meanwhile (unlike
  /// `tryLockForThisProcess`), and unrelated to flock, so both can be held on one file by
  /// different owners. False when another description holds it.
  package static func tryLockOpenFileDescription(_ fd: Int32, path: String) throws(SystemCallError) -> Bool {
    let setLockOFD: Int32 = 37  // F_OFD_SETLK (Linux 3.15), hidden by Glibc's headers without _GNU_SOURCE
    var lock = Glibc.flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_len = 1
    while true {
      if fcntl(fd, setLockOFD, &lock) == 0 { return true }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      if error == .wouldBlock || error == .permissionDenied { return false }  // EAGAIN or EACCES
      throw SystemCallError(call: "fcntl(F_OFD_SETLK)", path: path, errno: error)
    }
  }

  /// The waiting form of `tryLockForThisProcess` (fcntl F_SETLKW): waits while another process
  /// holds the lock. The same rules: it does not exclude this process's threads, and closing any
  /// descriptor of the file drops it. No child ever holds it, so a worker the app forked (and
  /// never exec'd) while the lock was held cannot keep every later caller waiting.
  package static func lockForThisProcess(_ fd: Int32, path: String) throws(SystemCallError) {
    var lock = Glibc.flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    try retrying("fcntl(F_SETLKW)", path: path) { fcntl(fd, F_SETLKW, &lock) }
  }

  /// Sizes a file and reserves its blocks, so that writing through a mapping of it can never
  /// meet a full disk (which would be a SIGBUS in the middle of an append).
  package static func allocate(_ fd: Int32, size: Int, path: String) throws(SystemCallError) {
    try retrying("ftruncate", path: path) { Glibc.ftruncate(fd, off_t(size)) }
    let result = posix_fallocate(fd, 0, off_t(size))
    // Filesystems without fallocate (EOPNOTSUPP) keep the sparse file: still correct, only the
    // full-disk guarantee is lost.
    if result != 0 && result != EOPNOTSUPP {
      throw SystemCallError(call: "posix_fallocate", path: path, errno: Errno(rawValue: result))
    }
  }

  package static func mapShared(_ fd: Int32, size: Int, path: String) throws(SystemCallError)
    -> UnsafeMutableRawPointer
  {
    guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
      base != MAP_FAILED
    else {
      throw SystemCallError(call: "mmap", path: path, errno: Errno(rawValue: Glibc.errno))
    }
    return base
  }

  /// Tells the kernel a mapping is touched a page at a time, not read in order: a fault then
  /// brings in that page only, where readahead would allocate and zero up to the whole of a
  /// fresh file's range (about 0.3 ms for a 1 MiB ring, on the caller's thread of `start`).
  /// Advice only: failure changes nothing.
  package static func adviseRandomAccess(_ base: UnsafeMutableRawPointer, size: Int) {
    _ = madvise(base, size, MADV_RANDOM)
  }

  /// `size` bytes of private, zeroed memory straight from the kernel (see PageBuffer).
  package static func mapAnonymous(size: Int) throws(SystemCallError) -> UnsafeMutableRawPointer {
    guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
      base != MAP_FAILED
    else {
      throw SystemCallError(call: "mmap", errno: Errno(rawValue: Glibc.errno))
    }
    return base
  }

  package static func unmap(_ base: UnsafeMutableRawPointer, size: Int) {
    _ = munmap(base, size)
  }

  package static func msync(_ base: UnsafeMutableRawPointer, size: Int) {
    _ = Glibc.msync(base, size, MS_SYNC)
  }

  package static func fsync(_ fd: Int32, path: String) throws(SystemCallError) {
    try retrying("fsync", path: path) { Glibc.fsync(fd) }
  }

  /// fsyncs a directory, making renames and creations in it durable.
  package static func fsyncDirectory(_ path: String) throws(SystemCallError) {
    let fd = try open(path, O_RDONLY | O_DIRECTORY)
    defer { close(fd) }
    try fsync(fd, path: path)
  }

  package static func rename(_ from: String, to: String) throws(SystemCallError) {
    try retrying("rename", path: from) { Glibc.rename(from, to) }
  }

  package static func unlink(_ path: String) throws(SystemCallError) {
    try retrying("unlink", path: path) { Glibc.unlink(path) }
  }

  /// Reads a whole regular file, at most `limit` bytes (more is refused as `.tooLarge`).
  package static func readFile(_ path: String, limit: Int = 1 << 30) throws(SystemCallError) -> [UInt8] {
    // Regular files only, opened without blocking: a FIFO or a device put where a file should
    // be (a tampered report folder) is refused at once instead of hanging the reader.
    let fd = try openRegularFileForReading(path).fd
    defer { close(fd) }
    return try readAll(fd, limit: limit, path: path)
  }

  /// Reads from `fd` to its end, at most `limit` bytes (more is refused as `.tooLarge`).
  private static func readAll(_ fd: Int32, limit: Int, path: String) throws(SystemCallError) -> [UInt8] {
    var bytes: [UInt8] = []
    // A first chunk of 4 KiB: most files read here (/proc, /sys, small JSON) fit, and the kernel
    // zeroes a buffer of the size asked for some of them (sysctl files); then 64 KiB chunks.
    var chunk = [UInt8](repeating: 0, count: limit < 4096 ? Swift.max(limit, 0) + 1 : 4096)
    while true {
      let count = try retrying("read", path: path) {
        chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      }
      if count == 0 { return bytes }
      bytes.append(contentsOf: chunk[0..<count])
      if count == chunk.count && chunk.count < 1 << 16 {
        chunk = [UInt8](repeating: 0, count: 1 << 16)
      }
      if bytes.count > limit {
        throw SystemCallError(call: "read", path: path, refusal: .tooLarge(limit: limit))
      }
    }
  }

  /// Writes `bytes` to a new file at `path` through a temporary file, fsync and rename, then
  /// fsyncs the directory: readers see the old file or the whole new one, never a part.
  /// `durable: false` skips both fsyncs: the replacement is still all-or-nothing for readers and
  /// survives the process dying at any point, but not necessarily a power loss; it costs tens of
  /// microseconds instead of milliseconds. The temporary file is `<path>.tmp-<pid>-<pid namespace>`
  /// (AbandonedFiles.writerTag): a writer killed mid-write leaves it, and `AbandonedFiles` knows
  /// it by that name.
  package static func writeFileAtomically(
    _ path: String, _ bytes: some Collection<UInt8>, durable: Bool = true
  )
    throws(SystemCallError)
  {
    let directory = try open(directoryName(of: path), O_RDONLY | O_DIRECTORY)
    defer { close(directory) }
    try writeFileAtomically(named: baseName(of: path), in: directory, bytes, durable: durable, path: path)
  }

  /// The names in the directory at `path` (not `.` and `..`), sorted.
  package static func directoryEntries(_ path: String) throws(SystemCallError) -> [String] {
    let fd = try open(path, O_RDONLY | O_DIRECTORY)
    defer { close(fd) }
    return try directoryEntries(of: fd, path: path)
  }

  package static func directoryName(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
  }

  /// The last component of `path`.
  package static func baseName(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return path }
    return String(path[path.index(after: slash)...])
  }

  package static func fileExists(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, AT_SYMLINK_NOFOLLOW) == 0
  }

  /// The size of the file at `path` (following a symbolic link), nil when it cannot be stat'ed.
  package static func fileSize(atPath path: String) -> Int? {
    var info = stat()
    guard fstatat(AT_FDCWD, path, &info, 0) == 0, info.st_size >= 0 else { return nil }
    return Int(info.st_size)
  }

  /// Removes `path`: a file or symbolic link is unlinked (never followed), a directory is
  /// emptied the same way and removed. Below the directory that holds `path`, nothing is
  /// followed: every step is relative to an open directory (see `removeTree(named:in:)`). Best
  /// effort: what cannot be removed stays.
  package static func removeTree(_ path: String) {
    guard let directory = try? open(directoryName(of: path), O_RDONLY | O_DIRECTORY) else { return }
    defer { close(directory) }
    removeTree(named: baseName(of: path), in: directory)
  }

  /// Writes all of `bytes` to `fd`, retrying EINTR and short writes.
  package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String)
    throws(SystemCallError)
  {
    var written = 0
    while written < bytes.count {
      written += try retrying("write", path: path) {
        Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
      }
    }
  }

  package static func processID() -> Int32 { getpid() }

  /// Whether a process with this pid exists in this pid namespace (any process: the pid may have
  /// been reused). A zombie exists until reaped.
  package static func processExists(_ pid: Int32) -> Bool {
    guard pid > 0 else { return false }
    return kill(pid, 0) == 0 || Glibc.errno != ESRCH
  }

  /// The working directory, nil when it cannot be named (e.g. removed, or longer than 4 KiB).
  package static func currentDirectory() -> String? {
    var buffer = [CChar](repeating: 0, count: 4097)
    guard getcwd(&buffer, buffer.count) != nil else { return nil }
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// `path` made absolute against the working directory now (unchanged when it already is, or
  /// when the working directory cannot be named): a process may chdir later.
  package static func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    guard let current = currentDirectory() else { return path }
    return current + "/" + path
  }

  /// Names the calling thread (Linux keeps 15 bytes) through /proc/thread-self/comm, which is
  /// what pthread_setname_np does (that function is not visible to Swift without _GNU_SOURCE).
  /// Best effort: a thread without a name works the same.
  package static func setCurrentThreadName(_ name: String) {
    guard let fd = try? open("/proc/thread-self/comm", O_WRONLY) else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = try? retrying("write", path: "/proc/thread-self/comm") {
      bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }
  }

  package static func onlineCPUCount() -> Int { max(1, sysconf(Int32(_SC_NPROCESSORS_CONF))) }
}

// MARK: - Reading other files in parts (symbolication)

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

  /// Whether `path` is a regular file this process may execute.
  package static func isExecutableFile(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 && (info.st_mode & S_IFMT) == S_IFREG
      && access(path, X_OK) == 0
  }
}

// MARK: - Inside a directory, never following a symbolic link (the report store)

// A report folder is untrusted input: a symbolic link put where a folder or file should be must
// never lead a read, a write or a removal outside the Crumbs directory. These calls work relative
// to an open directory (openat, mkdirat, renameat, unlinkat, fstatat) and open every component
// with O_NOFOLLOW, so no check can be raced by swapping a folder for a link between a check and
// its use.

extension Syscall {
  /// What an entry of a directory is, seen without following it.
  package struct EntryStatus: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
      case regular, directory, symbolicLink, other
    }
    package var kind: Kind
    package var size: Int
    /// Last modification, nanoseconds since the epoch.
    package var modifiedNanoseconds: UInt64

    init(_ info: stat) {
      switch info.st_mode & S_IFMT {
      case S_IFREG: kind = .regular
      case S_IFDIR: kind = .directory
      case S_IFLNK: kind = .symbolicLink
      default: kind = .other
      }
      size = max(0, Int(info.st_size))
      modifiedNanoseconds =
        UInt64(max(0, info.st_mtim.tv_sec)) * 1_000_000_000 + UInt64(max(0, info.st_mtim.tv_nsec))
    }

    /// In words, for reasons: "a symbolic link", "a folder"…
    package var description: String {
      switch kind {
      case .regular: "a file"
      case .directory: "a folder"
      case .symbolicLink: "a symbolic link"
      case .other: "not a regular file (a FIFO, socket or device)"
      }
    }
  }

  /// The entry `name` of the open `directory`, not followed; nil when it is not there.
  package static func status(of name: String, in directory: Int32) -> EntryStatus? {
    var info = stat()
    guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
    return EntryStatus(info)
  }

  /// The entry at `path`, not followed (the directories above it are); nil when it is not there.
  package static func status(ofPath path: String) -> EntryStatus? {
    var info = stat()
    guard fstatat(AT_FDCWD, path, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
    return EntryStatus(info)
  }

  /// Opens the directory at `path` below `root`: `root` itself as configured (it may be a link
  /// the user made), then each component below it with O_NOFOLLOW. A symbolic link on the way is
  /// refused as `.symbolicLink`, never followed.
  package static func openDirectory(_ path: String, beneath root: String) throws(SystemCallError) -> Int32 {
    let prefix = root.hasSuffix("/") ? root : root + "/"
    guard path == root || path.hasPrefix(prefix) else {
      throw SystemCallError(call: "open", path: path, refusal: .other("not inside \(root)"))
    }
    var fd = try open(root, O_RDONLY | O_DIRECTORY)
    var walked = String(prefix.dropLast())
    for component in path.dropFirst(root.count).split(separator: "/") {
      walked += "/" + component
      do {
        let next = try openDirectory(named: String(component), in: fd, path: walked)
        close(fd)
        fd = next
      } catch {
        close(fd)
        throw error
      }
    }
    return fd
  }

  /// Opens the directory `name` in the open `directory`, refusing a symbolic link.
  package static func openDirectory(named name: String, in directory: Int32, path: String)
    throws(SystemCallError) -> Int32
  {
    do {
      return try retrying("open", path: path) {
        openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      }
    } catch {
      // O_DIRECTORY|O_NOFOLLOW on a link fails with ENOTDIR (ELOOP without O_DIRECTORY).
      if error.errno == .notDirectory || error.errno == .tooManySymbolicLinkLevels,
        status(of: name, in: directory)?.kind == .symbolicLink
      {
        throw SystemCallError(call: "open", path: path, refusal: .symbolicLink)
      }
      throw error
    }
  }

  /// The names in the open `directory` (not `.` and `..`), sorted.
  package static func directoryEntries(of directory: Int32, path: String) throws(SystemCallError) -> [String]
  {
    // fdopendir takes the descriptor over: give it a copy, and start from the beginning.
    let copy = try retrying("dup", path: path) { fcntl(directory, F_DUPFD_CLOEXEC, 0) }
    guard let stream = fdopendir(copy) else {
      let error = Errno(rawValue: Glibc.errno)
      close(copy)
      throw SystemCallError(call: "opendir", path: path, errno: error)
    }
    defer { closedir(stream) }
    rewinddir(stream)
    var names: [String] = []
    while let entry = readdir(stream) {
      let name = withUnsafePointer(to: entry.pointee.d_name) {
        $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  /// Reads the regular file `name` in the open `directory`, at most `limit` bytes. A symbolic
  /// link is refused as `.symbolicLink`, a FIFO or device as `.notARegularFile`; neither blocks.
  package static func readFile(named name: String, in directory: Int32, limit: Int, path: String)
    throws(SystemCallError) -> [UInt8]
  {
    let fd: Int32
    do {
      fd = try retrying("open", path: path) {
        openat(directory, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC)
      }
    } catch {
      if error.errno == .tooManySymbolicLinkLevels {
        throw SystemCallError(call: "open", path: path, refusal: .symbolicLink)
      }
      throw error
    }
    defer { close(fd) }
    var info = stat()
    try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
    guard (info.st_mode & S_IFMT) == S_IFREG else {
      throw SystemCallError(call: "open", path: path, refusal: .notARegularFile)
    }
    return try readAll(fd, limit: limit, path: path)
  }

  /// Writes `bytes` as the file `name` in the open `directory`, all or nothing (see
  /// `writeFileAtomically(_:_:durable:)`). The temporary file is created new (O_EXCL,
  /// O_NOFOLLOW), so nothing already at its name — a link left there — is ever written through;
  /// the rename replaces a link at `name` itself, never its target.
  package static func writeFileAtomically(
    named name: String, in directory: Int32, _ bytes: some Collection<UInt8>, durable: Bool = true,
    path: String
  ) throws(SystemCallError) {
    let writer = AbandonedFiles.writerTag()
    let temporary = name + AbandonedFiles.temporarySeparator + writer
    let temporaryPath = path + AbandonedFiles.temporarySeparator + writer
    // A file of that name is this pid's own leftover (an earlier process with this pid in this
    // pid namespace, killed mid-write): never in use.
    _ = unlinkat(directory, temporary, 0)
    let fd = try retrying("open", path: temporaryPath) {
      openat(directory, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
    }
    do throws(SystemCallError) {
      let contiguous = Array(bytes)
      var offset = 0
      while offset < contiguous.count {
        offset += try retrying("write", path: temporaryPath) {
          contiguous.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        }
      }
      if durable { try fsync(fd, path: temporaryPath) }
      close(fd)
      try retrying("rename", path: temporaryPath) { renameat(directory, temporary, directory, name) }
    } catch {
      close(fd)
      _ = unlinkat(directory, temporary, 0)
      throw error
    }
    if durable { try fsync(directory, path: directoryName(of: path)) }
  }

  /// Creates the directory `name` (0700) in the open `directory`; fails if anything is there.
  package static func makeDirectory(named name: String, in directory: Int32, path: String)
    throws(SystemCallError)
  {
    try retrying("mkdir", path: path) { mkdirat(directory, name, 0o700) }
  }

  /// Renames `name` in `directory` to `newName` in `newDirectory` (a link is moved, not followed).
  package static func rename(
    named name: String, in directory: Int32, to newName: String, in newDirectory: Int32, path: String
  ) throws(SystemCallError) {
    try retrying("rename", path: path) { renameat(directory, name, newDirectory, newName) }
  }

  /// Removes the entry `name` of the open `directory`: a file or link is unlinked (never
  /// followed), a folder is opened with O_NOFOLLOW, emptied the same way and removed. Best
  /// effort: what cannot be removed stays.
  package static func removeTree(named name: String, in directory: Int32) {
    guard let entry = status(of: name, in: directory) else { return }
    guard entry.kind == .directory else {
      _ = unlinkat(directory, name, 0)
      return
    }
    if let folder = try? openDirectory(named: name, in: directory, path: name) {
      for child in (try? directoryEntries(of: folder, path: name)) ?? [] {
        removeTree(named: child, in: folder)
      }
      close(folder)
    }
    _ = unlinkat(directory, name, AT_REMOVEDIR)
  }
}
