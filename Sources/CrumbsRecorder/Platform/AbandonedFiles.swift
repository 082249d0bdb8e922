// AbandonedFiles.swift — what a writer killed mid-write leaves behind, known by the pid in its
// name, removed once that process is gone.
//
// Names: `<file>.tmp-<pid>` (the temporary file of Syscall.writeFileAtomically: session files,
// session metrics, delivery state, reasons, summaries) and a report store's
// `.incoming/<id>.<pid>` folders. A pid alone may have been reused by a later process, so an
// entry is abandoned only when it is not this process's and either no process has that pid, or
// it has not changed for `margin` (an hour; a write takes milliseconds). Not signal-safe.

#if canImport(Glibc)
  import Glibc
#endif

package enum AbandonedFiles {
  /// How long an entry whose pid names a running process must have been untouched to be
  /// abandoned all the same (that process is a later one with a reused pid).
  package static let margin: UInt64 = 3600 * 1_000_000_000

  /// The separator before the pid in a temporary file's name.
  package static let temporarySeparator = ".tmp-"

  /// The pid after the last `separator` in `name`, when only digits follow it.
  package static func writerPID(_ name: String, separator: String) -> Int32? {
    let bytes = Array(name.utf8)
    let mark = Array(separator.utf8)
    var start = bytes.count - mark.count
    while start >= 0, !bytes[start..<(start + mark.count)].elementsEqual(mark) { start -= 1 }
    guard start >= 0 else { return nil }
    let digits = bytes[(start + mark.count)...]
    guard !digits.isEmpty, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
    else { return nil }
    return Int32(String(decoding: digits, as: UTF8.self))
  }

  /// Whether the entry `name` (modified at `modifiedNanoseconds`) was left by a writer that is
  /// gone (see the design comment).
  package static func isAbandoned(
    _ name: String, separator: String, modifiedNanoseconds: UInt64,
    now: UInt64 = SystemClock.wallNanoseconds()
  ) -> Bool {
    guard let pid = writerPID(name, separator: separator), pid != Syscall.processID() else { return false }
    if !Syscall.processExists(pid) { return true }
    return now > modifiedNanoseconds && now - modifiedNanoseconds > margin
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

  /// The same for the folder at `path` (opened as it is named).
  package static func removeTemporaryFiles(inFolder path: String, of files: Set<String>? = nil) -> [String] {
    guard let directory = try? Syscall.open(path, O_RDONLY | O_DIRECTORY) else { return [] }
    defer { Syscall.close(directory) }
    return removeTemporaryFiles(in: directory, path: path, of: files)
  }
}
