// Quarantine.swift — moving a file or folder that could not be read out of the way, with its
// reason beside it. Used for rings, crash records and report folders alike: bad input is
// reported and kept, never misread. A quarantine folder is bounded like everything Crumbs
// writes: it keeps the newest `maxItems` items within `maxBytes`; when a new item comes in, the
// oldest beyond that are deleted (a symbolic link is unlinked, never followed). Not signal-safe.

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
  /// item just moved). Returns the new path.
  @discardableResult
  package static func move(_ item: String, into folder: String, reason: String) throws(SystemCallError)
    -> String
  {
    let name = item.split(separator: "/").last.map(String.init) ?? "item"
    var destination = folder + "/" + name
    var attempt = 1
    while Syscall.fileExists(destination) || Syscall.fileExists(destination + ".reason") {
      attempt += 1
      destination = folder + "/\(name).\(attempt)"
    }
    let line = String(reason.map { $0 == "\n" || $0 == "\r" ? " " : $0 }) + "\n"
    // The folder is opened without following a link (it may sit in an untrusted store), and the
    // reason and the item go into that open folder.
    let target = try Syscall.openDirectory(folder, beneath: Syscall.directoryName(of: folder))
    defer { Syscall.close(target) }
    let itemFolder = try Syscall.open(Syscall.directoryName(of: item), O_RDONLY | O_DIRECTORY)
    defer { Syscall.close(itemFolder) }
    let newName = Syscall.baseName(of: destination)
    try Syscall.writeFileAtomically(
      named: newName + ".reason", in: target, Array(line.utf8), path: destination + ".reason")
    try Syscall.rename(named: Syscall.baseName(of: item), in: itemFolder, to: newName, in: target, path: item)
    try Syscall.fsync(target, path: folder)
    trim(folder, keeping: newName)
    return destination
  }

  /// Deletes the oldest items of `folder` (by their reason file's time) until at most
  /// `maxItems` items and `maxBytes` bytes are left; `keeping` is never deleted. Returns the
  /// names deleted.
  @discardableResult
  package static func trim(_ folder: String, keeping: String? = nil) -> [String] {
    guard let directory = try? Syscall.open(folder, O_RDONLY | O_DIRECTORY) else { return [] }
    defer { Syscall.close(directory) }
    let names = (try? Syscall.directoryEntries(of: directory, path: folder)) ?? []
    let present = Set(names)
    var items: [(name: String, time: UInt64, bytes: Int)] = []
    for name in names where !name.hasSuffix(".reason") && !name.contains(AbandonedFiles.temporarySeparator) {
      guard let status = Syscall.status(of: name, in: directory) else { continue }
      let reason =
        present.contains(name + ".reason") ? Syscall.status(of: name + ".reason", in: directory) : nil
      var bytes = status.kind == .regular ? status.size : 0
      if status.kind == .directory,
        let inner = try? Syscall.openDirectory(named: name, in: directory, path: folder + "/" + name)
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
