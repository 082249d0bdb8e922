// Syscalls+Linux.swift — every system call the Swift side of Crumbs makes, in one thin file.
//
// Each wrapper retries EINTR, reads errno at once, and throws a typed `SystemCallError` that
// names the call and the path. Nothing here is signal-safe: the signal path is C
// (Sources/CrumbsSignalPath), and none of this runs on the append hot path.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

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

// MARK: - Waiting and small kernel files (memory-pressure monitor)

extension Syscall {
  /// A pipe whose ends are close-on-exec and non-blocking: the wake-up channel of a poll loop.
  static func wakePipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    try retrying("pipe") { pipe(&ends) }
    for end in ends {
      _ = fcntl(end, F_SETFD, FD_CLOEXEC)
      _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
    }
    return (ends[0], ends[1])
  }

  /// Writes one byte (a wake-up) to a non-blocking pipe; a full pipe already wakes its reader.
  static func signalWakePipe(_ fd: Int32) {
    var byte: UInt8 = 1
    while Glibc.write(fd, &byte, 1) < 0 && Glibc.errno == EINTR {}
  }

  /// Waits for `descriptors`' events for at most `timeoutMilliseconds` (-1: no limit) and
  /// fills in their `revents`. EINTR counts as a timeout (the caller loops anyway).
  static func poll(_ descriptors: inout [pollfd], timeoutMilliseconds: Int32) throws(SystemCallError) {
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
  static func writeCommand(_ fd: Int32, _ bytes: [UInt8], path: String) throws(SystemCallError) {
    try retrying("write", path: path) { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
  }

  /// Reads the whole of a small file (a /proc or /sys text file) into `buffer`, reusing its
  /// storage, and returns the byte count; more than `buffer.count` bytes is an EFBIG error.
  /// Re-opened on every call: a cgroup file replaced or removed is seen as it is now.
  static func readSmallFile(_ path: String, into buffer: inout [UInt8]) throws(SystemCallError) -> Int {
    let fd = try open(path, O_RDONLY)
    defer { close(fd) }
    var total = 0
    while true {
      let count = try retrying("read", path: path) {
        buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, $0.count - total) }
      }
      if count == 0 { return total }
      total += count
      if total == buffer.count { throw SystemCallError(call: "read", path: path, errno: .fileTooLarge) }
    }
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

// MARK: - Reading other files in parts, and running a helper program (symbolication)

/// What a helper program run by `Syscall.runProcess` left: how it ended and what it printed.
struct ProcessOutput {
  /// The exit status when it exited, nil when a signal ended it (including our SIGKILL on timeout).
  var exitStatus: Int32?
  /// True when it was killed for running past its time limit.
  var timedOut: Bool
  var standardOutput: [UInt8]
  var standardError: [UInt8]
}

extension Syscall {
  /// Opens `path` for reading without blocking on FIFOs or devices, and returns the descriptor
  /// and size only when it is a regular file (ENODEV-style `SystemCallError` otherwise).
  static func openRegularFileForReading(_ path: String) throws(SystemCallError)
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
      throw SystemCallError(call: "open", path: path, errno: Errno(rawValue: ENODEV))
    }
    return (fd, UInt64(info.st_size))
  }

  /// Reads up to `count` bytes at `offset` with pread; fewer only at end of file.
  static func read(_ fd: Int32, at offset: UInt64, count: Int, path: String) throws(SystemCallError)
    -> [UInt8]
  {
    guard count > 0, offset <= UInt64(Int64.max) else { return [] }
    var bytes = [UInt8](repeating: 0, count: count)
    var done = 0
    while done < count {
      let (position, overflow) = Int64(offset).addingReportingOverflow(Int64(done))
      if overflow { break }
      let got = try retrying("pread", path: path) {
        bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(position)) }
      }
      if got == 0 { break }
      done += got
    }
    if done < count { bytes.removeLast(count - done) }
    return bytes
  }

  /// The target of the symbolic link at `path`, or nil.
  static func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4097)
    let count = Glibc.readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// Whether `path` names something that exists (following symbolic links); the errno otherwise.
  static func statusOfPath(_ path: String) -> Errno? {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 ? nil : Errno(rawValue: Glibc.errno)
  }

  /// Whether `path` is a regular file this process may execute.
  static func isExecutableFile(_ path: String) -> Bool {
    var info = stat()
    return fstatat(AT_FDCWD, path, &info, 0) == 0 && (info.st_mode & S_IFMT) == S_IFREG
      && access(path, X_OK) == 0
  }

  /// Runs `executable` with `arguments` (no shell; stdin is /dev/null), collects its stdout and
  /// stderr (each capped at `outputLimit` bytes, the rest drained and dropped), and waits for it.
  /// Past `timeoutMilliseconds` it is killed with SIGKILL and reaped: no child is ever left behind.
  static func runProcess(
    _ executable: String, _ arguments: [String], timeoutMilliseconds: Int, outputLimit: Int = 16 << 20
  ) throws(SystemCallError) -> ProcessOutput {
    // pipe2 does not import; pipe + FD_CLOEXEC leaves a window in which a fork on another
    // thread inherits the descriptors, which costs that child nothing but two open pipes.
    var outputPipe: [Int32] = [-1, -1]
    var errorPipe: [Int32] = [-1, -1]
    try retrying("pipe") { pipe(&outputPipe) }
    do throws(SystemCallError) {
      try retrying("pipe") { pipe(&errorPipe) }
    } catch {
      close(outputPipe[0])
      close(outputPipe[1])
      throw error
    }
    for fd in outputPipe + errorPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
    posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)

    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
    close(outputPipe[1])
    close(errorPipe[1])
    defer {
      close(outputPipe[0])
      close(errorPipe[0])
    }
    guard spawned == 0 else {
      throw SystemCallError(call: "posix_spawn", path: executable, errno: Errno(rawValue: spawned))
    }

    var output = ProcessOutput(exitStatus: nil, timedOut: false, standardOutput: [], standardError: [])
    var streamOpen = [true, true]
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    while streamOpen[0] || streamOpen[1] {
      var now = timespec()
      clock_gettime(CLOCK_MONOTONIC, &now)
      let elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1_000_000
      let remaining = timeoutMilliseconds - elapsed
      if remaining <= 0 {
        output.timedOut = true
        break
      }
      var fds = [
        pollfd(fd: streamOpen[0] ? outputPipe[0] : -1, events: Int16(POLLIN), revents: 0),
        pollfd(fd: streamOpen[1] ? errorPipe[0] : -1, events: Int16(POLLIN), revents: 0),
      ]
      let ready = Glibc.poll(&fds, 2, Int32(clamping: remaining))
      if ready < 0 {
        if Glibc.errno == EINTR { continue }
        output.timedOut = true  // cannot wait properly: treat as a failure, kill below
        break
      }
      for index in 0..<2 where streamOpen[index] && fds[index].revents != 0 {
        let fd = index == 0 ? outputPipe[0] : errorPipe[0]
        let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if count < 0 && Glibc.errno == EINTR { continue }
        if count <= 0 {
          streamOpen[index] = false
          continue
        }
        if index == 0 {
          if output.standardOutput.count < outputLimit { output.standardOutput += chunk[0..<count] }
        } else if output.standardError.count < outputLimit {
          output.standardError += chunk[0..<count]
        }
      }
    }
    if output.timedOut { kill(pid, SIGKILL) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && Glibc.errno == EINTR {}
    // WIFEXITED / WEXITSTATUS, spelled out (the macros do not import).
    if status & 0x7f == 0 { output.exitStatus = (status >> 8) & 0xff }
    return output
  }
}
