// AbandonedFiles.swift — what a writer killed mid-write leaves behind, known by the writer
// named in its name, removed once that process is gone.
//
// Names: `<file>.tmp-<writer>` (the temporary file of Syscall.writeFileAtomically: session
// files, session metrics, delivery state, reasons, summaries) and a report store's
// `.incoming/<id>.<writer>` folders, where `<writer>` is `<pid>-<pid namespace inode>`
// (writerTag; older writers put `<pid>` alone). A pid means something only in its own pid
// namespace: two containers, or an app and its sidecar, sharing the directory both see their
// own pid 1, and a pid free here may be a live writer there. So an entry is abandoned only when
// it is not this process's and either its writer is in this pid namespace and no process has
// its pid, or it has not changed for `margin` (an hour; a write takes milliseconds) — the only
// rule for a writer of another namespace, or one that did not name its namespace. A pid
// reused by a later process is covered by the same margin. Not signal-safe.

#if canImport(Glibc)
  import Glibc
#endif

package enum AbandonedFiles {
  /// How long an entry whose pid names a running process must have been untouched to be
  /// abandoned all the same (that process is a later one with a reused pid).
  package static let margin: UInt64 = 3600 * 1_000_000_000

  /// The separator before the pid in a temporary file's name.
  static let temporarySeparator = ".tmp-"

  /// What a writer puts after the separator: `<pid>-<pid namespace inode>` (0 when the
  /// namespace cannot be read: then only the margin judges it).
  package static func writerTag() -> String {
    "\(Syscall.processID())-\(SystemFacts.pidNamespace(of: "self"))"
  }

  /// The writer after the last `separator` in `name`: `<pid>-<namespace>` or, from older
  /// writers, `<pid>` (namespace nil); nil when anything else follows it.
  package static func writer(_ name: String, separator: String) -> (pid: Int32, namespace: UInt64?)? {
    let bytes = Array(name.utf8)
    let mark = Array(separator.utf8)
    var start = bytes.count - mark.count
    while start >= 0, !bytes[start..<(start + mark.count)].elementsEqual(mark) { start -= 1 }
    guard start >= 0 else { return nil }
    let parts = bytes[(start + mark.count)...].split(
      separator: UInt8(ascii: "-"), maxSplits: 1, omittingEmptySubsequences: false)
    func number<T: FixedWidthInteger>(_ digits: ArraySlice<UInt8>, as: T.Type) -> T? {
      guard !digits.isEmpty, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
      else { return nil }
      return T(String(decoding: digits, as: UTF8.self))
    }
    guard let first = parts.first, let pid = number(first, as: Int32.self) else { return nil }
    guard parts.count == 2 else { return (pid, nil) }
    guard let namespace = number(parts[1], as: UInt64.self) else { return nil }
    return (pid, namespace)
  }

  /// Whether the entry `name` (modified at `modifiedNanoseconds`) was left by a writer that is
  /// gone (see the design comment).
  package static func isAbandoned(
    _ name: String, separator: String, modifiedNanoseconds: UInt64,
    now: UInt64 = SystemClock.wallNanoseconds()
  ) -> Bool {
    guard let writer = writer(name, separator: separator) else { return false }
    let quiet = now > modifiedNanoseconds && now - modifiedNanoseconds > margin
    let here = SystemFacts.pidNamespace(of: "self")
    // Another pid namespace's writer, or one that did not say: its pid means nothing here.
    guard let namespace = writer.namespace, namespace != 0, namespace == here else { return quiet }
    if writer.pid == Syscall.processID() { return false }
    return !Syscall.processExists(writer.pid) || quiet
  }

  /// Removes the abandoned temporary files in the open `directory` (at `path`) — only those of
  /// the files named in `of`, when given (a folder Crumbs shares with others) — and returns their
  /// paths. Links are unlinked, never followed; folders are left alone.
  package static func removeTemporaryFiles(in directory: Int32, path: String, of files: Set<String>? = nil)
    -> [String]
  {
    var removed: [String] = []
    for name in (try? Syscall.directoryEntries(of: directory, path: path)) ?? []
    where name.contains(temporarySeparator) {
      if let files, !files.contains(where: { name.hasPrefix($0 + temporarySeparator) }) { continue }
      guard let status = Syscall.status(of: name, in: directory), status.kind != .directory,
        isAbandoned(name, separator: temporarySeparator, modifiedNanoseconds: status.modifiedNanoseconds)
      else { continue }
      Syscall.removeTree(named: name, in: directory)
      removed.append(path + "/" + name)
    }
    return removed
  }

  /// The same for the folder at `path`: opened as it is named, or, with `root` (the Crumbs
  /// directory, for a folder below it that others can write), beneath `root` without following
  /// a link on the way.
  package static func removeTemporaryFiles(
    inFolder path: String, beneath root: String? = nil, of files: Set<String>? = nil
  ) -> [String] {
    let opened =
      root.map { try? Syscall.openDirectory(path, beneath: $0) }
      ?? (try? Syscall.open(path, O_RDONLY | O_DIRECTORY))
    guard let directory = opened else { return [] }
    defer { Syscall.close(directory) }
    return removeTemporaryFiles(in: directory, path: path, of: files)
  }
}
