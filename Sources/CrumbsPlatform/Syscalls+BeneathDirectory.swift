// Syscalls+BeneathDirectory.swift — calls inside a directory, never following a symbolic link.
// See Syscalls+Linux.swift.
//
// A report folder is untrusted input: a symbolic link put where a folder or file should be must
// never lead a read, a write or a removal outside the Crumbs directory. These calls work relative
// to an open directory (openat, mkdirat, renameat, unlinkat, fstatat) and open every component
// with O_NOFOLLOW, so no check can be raced by swapping a folder for a link between a check and
// its use.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

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
    /// Last status change (ctime), nanoseconds since the epoch: a folder's changes when an entry
    /// is added, removed or renamed in it.
    package var changedNanoseconds: UInt64
    /// The file itself (device and inode), whatever path reached it.
    package var fileID: FileID
    /// The user that owns it.
    package var owner: UInt32

    /// A file's identity: its device and inode.
    package struct FileID: Sendable, Hashable {
      package var device: UInt64
      package var inode: UInt64
    }

    init(_ info: stat) {
      fileID = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
      owner = UInt32(info.st_uid)
      switch info.st_mode & S_IFMT {
      case S_IFREG: kind = .regular
      case S_IFDIR: kind = .directory
      case S_IFLNK: kind = .symbolicLink
      default: kind = .other
      }
      size = max(0, Int(info.st_size))
      modifiedNanoseconds =
        UInt64(max(0, info.st_mtim.tv_sec)) * 1_000_000_000 + UInt64(max(0, info.st_mtim.tv_nsec))
      changedNanoseconds =
        UInt64(max(0, info.st_ctim.tv_sec)) * 1_000_000_000 + UInt64(max(0, info.st_ctim.tv_nsec))
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

  /// Sets the open `fd`'s access and modification times to now (a cache marking what it used);
  /// a failure changes nothing worth reporting.
  package static func touch(_ fd: Int32) { _ = futimens(fd, nil) }

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
    // `..` would climb out of `root` (and `.` is never needed): refused before anything opens.
    let components = path.dropFirst(root.count).split(separator: "/")
    guard !components.contains(where: { $0 == ".." || $0 == "." }) else {
      throw SystemCallError(
        call: "open", path: path, refusal: .other("a '.' or '..' component below \(root)"))
    }
    var fd = try open(root, O_RDONLY | O_DIRECTORY)
    var walked = String(prefix.dropLast())
    for component in components {
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
  /// With `owner`, a file another user owns is refused too (checked on the open file).
  package static func readFile(
    named name: String, in directory: Int32, limit: Int, path: String, owner: UInt32? = nil
  ) throws(SystemCallError) -> [UInt8] {
    let fd = try openUntrustedFile(named: name, in: directory, O_RDONLY, path: path, owner: owner)
    defer { close(fd) }
    return try readAll(fd, limit: limit, path: path)
  }

  /// Opens the entry `name` of the open `directory` for `access` (O_RDONLY or O_RDWR) the way a
  /// file another user may have put there must be opened before anything reads it: a link is
  /// refused, not followed (O_NOFOLLOW); the open never blocks (O_NONBLOCK: a FIFO would wait
  /// for a writer forever; it changes nothing for a regular file's reads, writes and locks); and
  /// what was opened is refused unless fstat says it is a regular file owned by `owner` (when
  /// given: a hard link to someone else's file is not the app's to hand over).
  package static func openUntrustedFile(
    named name: String, in directory: Int32, _ access: Int32, path: String, owner: UInt32?
  ) throws(SystemCallError) -> Int32 {
    let fd: Int32
    do {
      fd = try retrying("open", path: path) {
        openat(directory, name, access | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC)
      }
    } catch {
      if error.errno == .tooManySymbolicLinkLevels {
        throw SystemCallError(call: "open", path: path, refusal: .symbolicLink)
      }
      throw error
    }
    var info = stat()
    do throws(SystemCallError) {
      try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
      guard (info.st_mode & S_IFMT) == S_IFREG else {
        throw SystemCallError(call: "open", path: path, refusal: .notARegularFile)
      }
      if let owner, UInt32(info.st_uid) != owner {
        throw SystemCallError(
          call: "open", path: path, refusal: .other("owned by uid \(info.st_uid), not by uid \(owner)"))
      }
    } catch {
      close(fd)
      throw error
    }
    return fd
  }

  /// O_PATH (Linux 2.6.39): a descriptor that only names a file, for fstat and as the start of
  /// a lookup; opening one runs no open of the file itself (no device, FIFO or fsnotify open).
  /// Glibc does not export it to Swift (a _GNU_SOURCE name); the value is the same on x86_64
  /// and aarch64.
  package static let openPathOnly: Int32 = 0o10_000_000

  /// A regular file opened for reading by `openRegularFile(named:in:path:)`.
  package struct OpenedFile {
    package var fd: Int32
    package var size: UInt64
    /// Its owner's uid.
    package var owner: UInt32
  }

  /// Opens the regular file `name` of the open `directory` for reading, looking before opening:
  /// the name is first opened as a mere reference (O_PATH, O_NOFOLLOW: no open of a device or
  /// FIFO happens, a symbolic link is the link itself), checked with fstat, and only a regular
  /// file is then opened for reading through /proc/self/fd (the same file, whatever the name
  /// names by then; O_NONBLOCK). A symbolic link is refused as `.symbolicLink`, anything else
  /// but a regular file as `.notARegularFile`. The caller closes `fd`.
  package static func openRegularFile(named name: String, in directory: Int32, path: String)
    throws(SystemCallError) -> OpenedFile
  {
    let reference = try retrying("open", path: path) {
      openat(directory, name, openPathOnly | O_NOFOLLOW | O_CLOEXEC)
    }
    defer { close(reference) }
    var info = stat()
    try retrying("fstat", path: path) { Glibc.fstat(reference, &info) }
    switch info.st_mode & S_IFMT {
    case S_IFREG: break
    case S_IFLNK: throw SystemCallError(call: "open", path: path, refusal: .symbolicLink)
    default: throw SystemCallError(call: "open", path: path, refusal: .notARegularFile)
    }
    let fd = try open("/proc/self/fd/\(reference)", O_RDONLY | O_NONBLOCK | O_NOCTTY)
    return OpenedFile(fd: fd, size: UInt64(max(0, info.st_size)), owner: info.st_uid)
  }

  /// Creates the file `name` (0600) in the open `directory`, a folder no one else reads (a
  /// report being assembled), with `bytes`, and returns it still open: the caller fsyncs it when
  /// it must be durable (after its other writes, so one journal commit can take them all) and
  /// closes it. Whatever was at `name` is unlinked first (a link is removed, never followed:
  /// O_EXCL, O_NOFOLLOW). On failure nothing of it is left.
  package static func createFile(named name: String, in directory: Int32, _ bytes: [UInt8], path: String)
    throws(SystemCallError) -> Int32
  {
    _ = unlinkat(directory, name, 0)
    let fd = try retrying("open", path: path) {
      openat(directory, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
    }
    do throws(SystemCallError) {
      var offset = 0
      while offset < bytes.count {
        offset += try retrying("write", path: path) {
          bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        }
      }
    } catch {
      close(fd)
      _ = unlinkat(directory, name, 0)
      throw error
    }
    return fd
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

  /// Unlinks the entry `name` of the open `directory` unless it is a folder (a link is removed,
  /// never followed); one already gone is no error.
  package static func unlink(named name: String, in directory: Int32, path: String) throws(SystemCallError) {
    do {
      try retrying("unlink", path: path) { unlinkat(directory, name, 0) }
    } catch {
      if error.errno != .noSuchFileOrDirectory { throw error }
    }
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

  /// Opens the file at `path` in a folder another user may write (a ring or crash record in
  /// `rings/`) for `access`, as `openUntrustedFile(named:in:…)` does, in its folder opened
  /// without following a link (a `rings/` swapped for a link leads nowhere else; the folders
  /// above it are the Crumbs directory, taken as configured): a regular file owned by the owner
  /// of that folder.
  package static func openUntrustedFile(_ path: String, _ access: Int32) throws(SystemCallError) -> Int32 {
    let parent = directoryName(of: path)
    let folder: Int32
    do {
      folder = try open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    } catch {
      if error.errno == .tooManySymbolicLinkLevels {
        throw SystemCallError(call: "open", path: parent, refusal: .symbolicLink)
      }
      throw error
    }
    defer { close(folder) }
    var info = stat()
    try retrying("fstat", path: parent) { Glibc.fstat(folder, &info) }
    return try openUntrustedFile(
      named: baseName(of: path), in: folder, access, path: path, owner: UInt32(info.st_uid))
  }

  /// The user that owns the open file `fd`.
  package static func owner(of fd: Int32, path: String) throws(SystemCallError) -> UInt32 {
    var info = stat()
    try retrying("fstat", path: path) { Glibc.fstat(fd, &info) }
    return UInt32(info.st_uid)
  }

  /// The effective user of this process: whose privileges its opens use.
  package static func effectiveUserID() -> UInt32 { UInt32(geteuid()) }
}
