// Syscalls+Linux.swift — the system calls the Swift side of Crumbs makes on files, directories,
// mappings and processes: thin wrappers, one concern a file, the way swift-system keeps its
// syscalls apart from the types that use them:
//   Syscalls+Linux            open/close, locks, mappings, whole-file reads and atomic writes,
//                             directories by path, this process (and a thread's nice value)
//   Syscalls+Positioned       reads and writes at an offset, links and inodes (files read in parts)
//   Syscalls+BeneathDirectory calls relative to an open directory that never follow a link
//   Syscalls+Polling          wake-up pipes, poll, and small kernel files read again and again
//   Syscalls+Signals          a signal with a value to another process, waiting for its answer
//                             (pidfd, inotify), a thread that takes a signal
//   Syscalls+ProcessMemory    checked reads of this process's memory at an address from elsewhere
//   SystemCallError           the one error they all throw
// The rest of CrumbsPlatform is beside them, one idea a file: Subprocess+Linux (starting
// programs), Clock+Linux (reading clocks), BackgroundThread+Linux (starting threads), Quarantine
// (moving bad files aside), AbandonedFiles (what a killed writer left), PageBuffer (large buffers
// straight from mmap), SystemFacts (facts about this process and machine). Code outside
// CrumbsPlatform makes no system call of its own (the C signal path aside).
//
// Each wrapper retries EINTR and throws a typed `SystemCallError` that names the call and the
// path. errno is read as soon as the call returns: a wrapper's closure is the libc call alone,
// and the only code that can run between the call and the read is the release of the call's
// temporary C string, and glibc's free (since 2.33) preserves errno. Nothing here is
// signal-safe: the signal path is C (Sources/CrumbsSignalPath), and none of this runs on the
// append hot path.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

#if canImport(Glibc)
  /// glibc's malloc_trim (<malloc.h>, which the Glibc module leaves out).
  @_silgen_name("malloc_trim")
  private func glibcMallocTrim(_ pad: Int) -> Int32
#endif

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

  /// Gives the memory malloc holds free back to the kernel, in every arena (glibc's
  /// malloc_trim(0)): a thread's arena keeps what it freed, so the work of one pass (parsing,
  /// symbolication, encoding) would otherwise stay resident for the life of the process. It
  /// walks every arena under its lock: call it after such a pass, not per request. Nothing on
  /// musl, whose malloc returns freed memory itself.
  package static func returnFreeMemory() {
    #if canImport(Glibc)
      _ = glibcMallocTrim(0)
    #endif
  }

  package static func close(_ fd: Int32) {
    // Linux closes the descriptor even when close reports EINTR: never retry.
    _ = Glibc.close(fd)
  }

  /// Creates `path` with mode 0700 if missing; an existing directory is accepted as it is.
  package static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(SystemCallError) {
    // Usually there already (every launch after the first, on the caller's thread of
    // CrumbsClient.start): one stat, where a mkdir first costs a failed mkdir and then the stat.
    if isDirectory(path) { return }
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

  /// `size` bytes of private, zeroed memory straight from the kernel (see PageBuffer), every
  /// page mapped at once when `populated`.
  static func mapAnonymous(size: Int, populated: Bool = false) throws(SystemCallError)
    -> UnsafeMutableRawPointer
  {
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | (populated ? MAP_POPULATE : 0)
    guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, flags, -1, 0),
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
  package static func readAll(_ fd: Int32, limit: Int, path: String) throws(SystemCallError) -> [UInt8] {
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
  static func currentDirectory() -> String? {
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

  /// Sets the nice value of one thread of this process, named by its kernel id (gettid): on
  /// Linux, setpriority's PRIO_PROCESS with a thread's id changes that thread alone, and the
  /// threads it starts afterwards inherit the value. Anyone may raise a nice value (lower the
  /// priority); lowering it again needs CAP_SYS_NICE or an RLIMIT_NICE that allows it (EACCES).
  /// The nice value of one thread of this process, named by its kernel id (gettid).
  package static func threadNiceValue(threadID: UInt32) throws(SystemCallError) -> Int32 {
    // -1 is also a nice value: only errno tells a failure.
    Glibc.errno = 0
    let value = Glibc.getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(threadID))
    let error = Glibc.errno
    if value == -1 && error != 0 { throw SystemCallError(call: "getpriority", errno: Errno(rawValue: error)) }
    return value
  }

  package static func setThreadNiceValue(_ nice: Int32, threadID: UInt32) throws(SystemCallError) {
    try retrying("setpriority") {
      Glibc.setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(threadID), nice)
    }
  }
}
