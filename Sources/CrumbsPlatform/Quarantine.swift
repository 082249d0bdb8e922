// Quarantine.swift — moving a file or folder that could not be read out of the way, with its
// reason beside it. Used for rings, crash records and report folders alike: bad input is
// reported and kept, never misread. A quarantine folder is bounded like everything Crumbs
// writes: it keeps the newest `maxItems` items within `maxBytes`; when a new item comes in, the
// oldest beyond that are deleted (a symbolic link is unlinked, never followed).
//
// A quarantine folder sits in a directory the app writes, and the processor may be another,
// more privileged user (`crumbs collect` as root): the app can swap the folder for a symbolic
// link at any moment. So the folder is opened once, beneath the Crumbs directory with every
// component O_NOFOLLOW (Syscall.openDirectory(_:beneath:)), and everything after — the
// uniqueness check, the reason, the rename, the trim's listing and removals — works in that open
// descriptor; nothing reopens the folder by its path. Not signal-safe.

#if canImport(Glibc)
  import Glibc
#endif

package enum Quarantine {
  /// Items kept in one quarantine folder (each with its `.reason` file).
  package static let maxItems = 32
  /// Bytes kept in one quarantine folder (regular files, one folder level deep).
  package static let maxBytes = 64 << 20

  /// Moves `item` into `folder` (keeping its name, made unique with `.2`, `.3`…) and writes the
  /// one-line `reason` to `<new path>.reason`, then trims the folder to its bounds (never the
  /// item just moved). Returns the new path. Both `folder` and the folder holding `item` are
  /// opened beneath `root` (the Crumbs directory; by default the folder above `folder`), no
  /// component followed when it is a link.
  @discardableResult
  package static func move(_ item: String, into folder: String, reason: String, beneath root: String? = nil)
    throws(SystemCallError) -> String
  {
    let root = root ?? Syscall.directoryName(of: folder)
    let name = item.split(separator: "/").last.map(String.init) ?? "item"
    let line = String(reason.map { $0 == "\n" || $0 == "\r" ? " " : $0 }) + "\n"
    let target = try Syscall.openDirectory(folder, beneath: root)
    defer { Syscall.close(target) }
    let itemFolderPath = Syscall.directoryName(of: item)
    let itemFolder =
      itemFolderPath == root || itemFolderPath.hasPrefix(root.hasSuffix("/") ? root : root + "/")
      ? try Syscall.openDirectory(itemFolderPath, beneath: root)
      : try Syscall.open(itemFolderPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    defer { Syscall.close(itemFolder) }
    var newName = name
    var attempt = 1
    while Syscall.status(of: newName, in: target) != nil
      || Syscall.status(of: newName + ".reason", in: target) != nil
    {
      attempt += 1
      newName = "\(name).\(attempt)"
    }
    let destination = folder + "/" + newName
    try Syscall.writeFileAtomically(
      named: newName + ".reason", in: target, Array(line.utf8), path: destination + ".reason")
    try Syscall.rename(named: Syscall.baseName(of: item), in: itemFolder, to: newName, in: target, path: item)
    try Syscall.fsync(target, path: folder)
    trim(target, path: folder, keeping: newName)
    return destination
  }

  /// Deletes the oldest items of `folder` (see `trim(_:path:keeping:)`), the folder opened
  /// beneath `root` (by default the folder above it) without following a link: a link put in
  /// its place trims nothing. Returns the names deleted.
  @discardableResult
  package static func trim(_ folder: String, beneath root: String? = nil, keeping: String? = nil) -> [String]
  {
    guard
      let directory = try? Syscall.openDirectory(folder, beneath: root ?? Syscall.directoryName(of: folder))
    else { return [] }
    defer { Syscall.close(directory) }
    return trim(directory, path: folder, keeping: keeping)
  }

  /// Deletes the oldest items of the open quarantine folder `directory` (at `path`, for messages)
  /// by their reason file's time, until at most `maxItems` items and `maxBytes` bytes are left;
  /// `keeping` is never deleted. Returns the names deleted.
  @discardableResult
  package static func trim(_ directory: Int32, path: String, keeping: String? = nil) -> [String] {
    let names = (try? Syscall.directoryEntries(of: directory, path: path)) ?? []
    let present = Set(names)
    var items: [(name: String, time: UInt64, bytes: Int)] = []
    for name in names where !name.hasSuffix(".reason") && !name.contains(AbandonedFiles.temporarySeparator) {
      guard let status = Syscall.status(of: name, in: directory) else { continue }
      let reason =
        present.contains(name + ".reason") ? Syscall.status(of: name + ".reason", in: directory) : nil
      var bytes = status.kind == .regular ? status.size : 0
      if status.kind == .directory,
        let inner = try? Syscall.openDirectory(named: name, in: directory, path: path + "/" + name)
      {
        for file in (try? Syscall.directoryEntries(of: inner, path: name)) ?? [] {
          if let entry = Syscall.status(of: file, in: inner), entry.kind == .regular { bytes += entry.size }
        }
        Syscall.close(inner)
      }
      items.append((name, reason?.modifiedNanoseconds ?? status.modifiedNanoseconds, bytes))
    }
    items.sort { $0.time < $1.time }
    var total = items.reduce(0) { $0 + $1.bytes }
    var count = items.count
    var deleted: [String] = []
    for item in items where (count > maxItems || total > maxBytes) && item.name != keeping {
      Syscall.removeTree(named: item.name, in: directory)
      Syscall.removeTree(named: item.name + ".reason", in: directory)
      count -= 1
      total -= item.bytes
      deleted.append(item.name)
    }
    return deleted
  }
}
