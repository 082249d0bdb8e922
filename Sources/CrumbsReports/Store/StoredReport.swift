// StoredReport.swift — one report folder of the store, and the only way to its files: reached
// from the store without following a symbolic link (see ReportStore.swift).
//
// Entry points: ReportStore.list(_:) / load(id:) / store(_:attachments:) hand one out →
// readFile(_:limit:) / writeFile(_:_:). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import FoundationEssentials

/// A stored report and where it is.
public struct StoredReport: Sendable {
  public var report: CrashReport
  public var state: ReportState
  /// The report's folder.
  public var path: String
  /// The trail to send instead of the stored attachment (LZ4 JSON Lines; empty: none), set by
  /// delivery on its own copy when the app edited the trail in `willSend` (ReportDraft.swift).
  package var trailOverride: [UInt8]? = nil
  /// `path/report.json`.
  public var reportPath: String { path + "/report.json" }
  /// Path of an attachment by name.
  public func attachmentPath(_ name: String) -> String { path + "/" + name }

  /// The store the folder is in: its path is `<store>/<state>/<id>`.
  var storePath: String { Syscall.directoryName(of: Syscall.directoryName(of: path)) }

  /// Reads the file `name` of the report's folder (at most `limit` bytes), reaching it from the
  /// store without following any symbolic link: a link, a FIFO or a device is refused, and
  /// nothing outside the folder is ever read.
  public func readFile(_ name: String, limit: Int) throws(SystemCallError) -> [UInt8] {
    let folder = try openFolder(forFile: name)
    defer { Syscall.close(folder) }
    return try Syscall.readFile(named: name, in: folder, limit: limit, path: attachmentPath(name))
  }

  /// Replaces the file `name` of the report's folder atomically, without following any link.
  package func writeFile(_ name: String, _ bytes: [UInt8]) throws(SystemCallError) {
    let folder = try openFolder(forFile: name)
    defer { Syscall.close(folder) }
    try Syscall.writeFileAtomically(named: name, in: folder, bytes, path: attachmentPath(name))
  }

  private func openFolder(forFile name: String) throws(SystemCallError) -> Int32 {
    guard ReportStore.isPlainFileName(name) else {
      throw SystemCallError(
        call: "open", path: attachmentPath(name), refusal: .other("not a file name inside the report folder"))
    }
    return try Syscall.openDirectory(path, beneath: storePath)
  }
}
