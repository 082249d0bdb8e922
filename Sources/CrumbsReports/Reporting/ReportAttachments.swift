// ReportAttachments.swift — the app's files attached to a report (non-fatal, or a crashed
// session's at the next launch): each read within the size limit under a unique name, and each
// one left out listed with the reason.
//
// Who may open what. A path comes from the app: a non-fatal report's process names its own
// files (`read(_:limit:taken:)`, opened as named). A crashed session's paths come from its
// session file, which the processor reads later, maybe as another user (`crumbs collect` as
// root, or a next launch under another uid): opening them as named would let the app read any
// file the processor can (`/proc/self/environ`: the processor's own environment and its
// tokens; as root, any file on the host) into a report that leaves the machine. So a processor
// that did not write the session reads its attachments `confined` (see `Confinement`): only
// files below the Crumbs directory, opened beneath it with no link followed, regular files of
// the session file's owner; the rest is left out with the reason. `/proc` and `/dev` are never
// read after the fact by anyone: they name the processor (its environment, its descriptors) or
// a live device, not the session. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package enum ReportAttachments {
  /// Reads every file of `paths` (at most `limit` bytes each) for a report whose folder already
  /// holds files named `taken`. Returns the report's attachment entries, in `paths` order, and
  /// the files to store with it.
  package static func read(_ paths: [String], limit: Int, taken: [String])
    -> (entries: [CrashReport.Attachment], files: [(name: String, bytes: [UInt8])])
  {
    read(paths, limit: limit, taken: taken, confinement: nil, afterTheFact: false)
  }

  /// How a processor that did not write a session opens the files its session file names.
  package struct Confinement: Sendable, Equatable {
    /// The Crumbs directory: nothing outside it is opened.
    package var root: String
    /// The session file's owner: a file owned by anyone else is not the app's to attach.
    package var owner: UInt32

    package init(root: String, owner: UInt32) {
      self.root = root
      self.owner = owner
    }
  }

  /// Reads a previous session's attachments (see the design comment): as `read(_:limit:taken:)`,
  /// but never below `/proc` or `/dev`, and, with `confinement`, only regular files
  /// of its owner below its root, opened beneath it without following a link. What is left out
  /// is listed with the reason.
  package static func readAfterTheFact(
    _ paths: [String], limit: Int, taken: [String], confinement: Confinement?
  ) -> (entries: [CrashReport.Attachment], files: [(name: String, bytes: [UInt8])]) {
    read(paths, limit: limit, taken: taken, confinement: confinement, afterTheFact: true)
  }

  private static func read(
    _ paths: [String], limit: Int, taken: [String], confinement: Confinement?, afterTheFact: Bool
  ) -> (entries: [CrashReport.Attachment], files: [(name: String, bytes: [UInt8])]) {
    var entries: [CrashReport.Attachment] = []
    var files: [(name: String, bytes: [UInt8])] = []
    var names = taken
    for path in paths {
      let name = Self.name(path, taken: names)
      names.append(name)
      let tooLarge = "larger than the \(limit)-byte attachment limit"
      if afterTheFact, let refusal = refusal(path, confinement: confinement) {
        entries.append(
          .init(name: name, contentType: "application/octet-stream", size: 0, omittedReason: refusal))
        continue
      }
      if let confinement {
        do {
          let bytes = try readConfined(path, confinement, limit: limit)
          files.append((name, bytes))
          entries.append(.init(name: name, contentType: "application/octet-stream", size: bytes.count))
        } catch {
          entries.append(
            .init(
              name: name, contentType: "application/octet-stream", size: 0,
              omittedReason: error.refusal == .tooLarge(limit: limit) ? tooLarge : "not read: \(error.cause)")
          )
        }
        continue
      }
      if let size = Syscall.fileSize(atPath: path), size > limit {
        entries.append(
          .init(name: name, contentType: "application/octet-stream", size: size, omittedReason: tooLarge))
        continue
      }
      do {
        let bytes = try Syscall.readFile(path, limit: limit)
        files.append((name, bytes))
        entries.append(.init(name: name, contentType: "application/octet-stream", size: bytes.count))
      } catch {
        entries.append(
          .init(
            name: name, contentType: "application/octet-stream", size: 0,
            omittedReason: error.refusal == .tooLarge(limit: limit) ? tooLarge : "unreadable: \(error)"))
      }
    }
    return (entries, files)
  }

  /// A file name for an attachment in the report folder: the path's last component, made unique
  /// and never one of the report's own files.
  package static func name(_ path: String, taken: [String]) -> String {
    let base = path.split(separator: "/").last.map(String.init) ?? "attachment"
    var name = "attachment-" + base
    var index = 2
    while taken.contains(name) {
      name = "attachment-\(index)-" + base
      index += 1
    }
    return name
  }

  /// Why `path`, named by a session file, is not opened after the fact; nil when it may be.
  static func refusal(_ path: String, confinement: Confinement?) -> String? {
    // Lexically, as the kernel would walk it: `/proc/./self` and `/proc/1/../self` are
    // `/proc/self`. `/proc` and `/dev` name the reading process (its environment, its
    // descriptors) or a live device, never what the session left: after the fact, neither.
    var components: [Substring] = []
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
      if component == "." { continue }
      if component == ".." {
        _ = components.popLast()
        continue
      }
      components.append(component)
    }
    if path.hasPrefix("/"), components.first == "proc" || components.first == "dev" {
      return "not read: \(path) names the process reading it, not the session"
    }
    guard let confinement else { return nil }
    let root = confinement.root.hasSuffix("/") ? String(confinement.root.dropLast()) : confinement.root
    guard path.hasPrefix(root + "/"),
      !path.dropFirst(root.count).split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
    else {
      return "not read: outside the Crumbs directory \(root), and this processor did not write the session "
        + "(it reads only the session's own files below that directory)"
    }
    return nil
  }

  /// Reads the file at `path` below `confinement.root` (see `refusal`): every folder opened
  /// beneath the root with O_NOFOLLOW, the file with O_NOFOLLOW and O_NONBLOCK, then refused
  /// unless fstat says it is a regular file of `confinement.owner`, at most `limit` bytes.
  static func readConfined(_ path: String, _ confinement: Confinement, limit: Int) throws(SystemCallError)
    -> [UInt8]
  {
    let root = confinement.root.hasSuffix("/") ? String(confinement.root.dropLast()) : confinement.root
    let folder = try Syscall.openDirectory(Syscall.directoryName(of: path), beneath: root)
    defer { Syscall.close(folder) }
    // O_NOFOLLOW | O_NONBLOCK, then fstat on what was opened: a regular file of the owner, or
    // nothing is read (a link, a FIFO, a hard link to another user's file).
    let bytes = try Syscall.readFile(
      named: Syscall.baseName(of: path), in: folder, limit: limit, path: path, owner: confinement.owner)
    return bytes
  }
}
