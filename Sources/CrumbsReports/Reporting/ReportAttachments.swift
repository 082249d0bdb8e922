// ReportAttachments.swift — the app's files attached to a report (non-fatal, or a crashed
// session's at the next launch): each read within the size limit under a unique name, and each
// one left out listed with the reason. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

package enum ReportAttachments {
  /// Reads every file of `paths` (at most `limit` bytes each) for a report whose folder already
  /// holds files named `taken`. Returns the report's attachment entries, in `paths` order, and
  /// the files to store with it.
  package static func read(_ paths: [String], limit: Int, taken: [String])
    -> (entries: [CrashReport.Attachment], files: [(name: String, bytes: [UInt8])])
  {
    var entries: [CrashReport.Attachment] = []
    var files: [(name: String, bytes: [UInt8])] = []
    var names = taken
    for path in paths {
      let name = Self.name(path, taken: names)
      names.append(name)
      let tooLarge = "larger than the \(limit)-byte attachment limit"
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
}
