// ReportStore.swift — the on-disk report database: one folder per report, states as folders.
//
//   reports/.incoming/<id>/     being written (never read)
//   reports/pending/<id>/       report.json + attachments, waiting for delivery
//   reports/sent/<id>/          delivered
//   reports/dropped/<id>/       refused by a server for good (with dropped.reason)
//   reports/quarantine/<name>   unreadable report folders, moved aside with a .reason file
//
// Every file is written temp + fsync + rename + directory fsync; a report appears in `pending`
// by one atomic rename of its whole folder, so a reader sees all of it or none of it.
//
// Entry points, in call order:
//   ReportStore(directory:)     create the folders
//   store(_:attachments:)       write a new report (idempotent per id)
//   list(_:) / load(id:)        read back; damaged folders are quarantined, not thrown
//   move(id:from:to:)           change state (delivery)
// Not signal-safe.

import CrumbsRecorder
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// Why the store failed.
public enum ReportStoreError: Error, CustomStringConvertible, Equatable {
  case system(SystemCallError)
  case encoding(String)
  case notFound(String)

  public var description: String {
    switch self {
    case .system(let error): "report store: \(error)"
    case .encoding(let reason): "report store: cannot encode report: \(reason)"
    case .notFound(let id): "report store: no report \(id)"
    }
  }
}

/// A report's place in the store.
public enum ReportState: String, Sendable, CaseIterable, Codable {
  case pending, sent, dropped
}

/// A stored report and where it is.
public struct StoredReport: Sendable {
  public var report: CrashReport
  public var state: ReportState
  /// The report's folder.
  public var path: String
  /// `path/report.json`.
  public var reportPath: String { path + "/report.json" }
  /// Path of an attachment by name.
  public func attachmentPath(_ name: String) -> String { path + "/" + name }
}

public struct ReportStore: Sendable {
  /// `<directory>/reports`.
  public let path: String

  /// Opens (creating) the report store under `directory`.
  public init(directory: String) throws(SystemCallError) {
    path = directory + "/reports"
    try Syscall.makeDirectories(path)
    for folder in [".incoming", "quarantine"] + ReportState.allCases.map(\.rawValue) {
      try Syscall.makeDirectory(path + "/" + folder)
    }
  }

  package func folder(_ state: ReportState) -> String { path + "/" + state.rawValue }

  /// Whether a report with this id is stored, in any state.
  public func contains(id: String) -> Bool {
    ReportState.allCases.contains { Syscall.fileExists(folder($0) + "/" + id) }
  }

  /// Stores a new report with its attachments in `pending`. If a report with the same id is
  /// already stored (in any state) nothing is written and the stored one is returned: a crash
  /// processed twice becomes one report.
  @discardableResult
  public func store(_ report: CrashReport, attachments: [(name: String, bytes: [UInt8])] = [])
    throws(ReportStoreError) -> StoredReport
  {
    for state in ReportState.allCases where Syscall.fileExists(folder(state) + "/" + report.id) {
      return StoredReport(report: report, state: state, path: folder(state) + "/" + report.id)
    }
    let incoming = path + "/.incoming/" + report.id + ".\(getpid())"
    let destination = folder(.pending) + "/" + report.id
    do throws(SystemCallError) {
      try Syscall.makeDirectory(incoming)
      for attachment in attachments {
        try Syscall.writeFileAtomically(incoming + "/" + attachment.name, attachment.bytes)
      }
      try Syscall.writeFileAtomically(incoming + "/report.json", try Self.encode(report))
      try Syscall.rename(incoming, to: destination)
      try Syscall.fsyncDirectory(folder(.pending))
    } catch {
      throw .system(error)
    }
    return StoredReport(report: report, state: .pending, path: destination)
  }

  /// Reports in `state`, oldest first. Folders whose report.json cannot be read are moved to
  /// `quarantine/` with a reason (returned in `quarantined`), never deleted.
  public func list(_ state: ReportState) -> (reports: [StoredReport], quarantined: [String]) {
    var reports: [StoredReport] = []
    var quarantined: [String] = []
    let names = (try? Syscall.directoryEntries(folder(state))) ?? []
    for name in names {
      let reportFolder = folder(state) + "/" + name
      do {
        let report = try Self.decode(try Syscall.readFile(reportFolder + "/report.json", limit: 64 << 20))
        reports.append(StoredReport(report: report, state: state, path: reportFolder))
      } catch {
        if let moved = try? quarantine(reportFolder, reason: "unreadable report: \(error)") {
          quarantined.append(moved)
        }
      }
    }
    reports.sort { $0.report.observedTimeUnixNano < $1.report.observedTimeUnixNano }
    return (reports, quarantined)
  }

  /// The report with `id` in any state. `id` may be a unique prefix.
  public func load(id: String) throws(ReportStoreError) -> StoredReport {
    for state in ReportState.allCases {
      let names = (try? Syscall.directoryEntries(folder(state))) ?? []
      guard let name = names.first(where: { $0 == id }) ?? names.first(where: { $0.hasPrefix(id) })
      else { continue }
      let reportFolder = folder(state) + "/" + name
      do {
        let report = try Self.decode(try Syscall.readFile(reportFolder + "/report.json", limit: 64 << 20))
        return StoredReport(report: report, state: state, path: reportFolder)
      } catch {
        throw .encoding("\(reportFolder)/report.json: \(error)")
      }
    }
    throw .notFound(id)
  }

  /// Moves a report between states (one atomic rename).
  @discardableResult
  public func move(id: String, from: ReportState, to: ReportState) throws(ReportStoreError) -> String {
    let destination = folder(to) + "/" + id
    do throws(SystemCallError) {
      try Syscall.rename(folder(from) + "/" + id, to: destination)
      try Syscall.fsyncDirectory(folder(to))
    } catch {
      if error.errno == .noSuchFileOrDirectory { throw .notFound(id) }
      throw .system(error)
    }
    return destination
  }

  /// Moves `item` into `quarantine/` with a `.reason` file; returns the new path.
  @discardableResult
  public func quarantine(_ item: String, reason: String) throws(SystemCallError) -> String {
    let destination = try Quarantine.move(item, into: path + "/quarantine", reason: reason)
    return destination
  }

  static func encode(_ report: CrashReport) throws(SystemCallError) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    do {
      return Array(try encoder.encode(report))
    } catch {
      // Every field is a plain value: encoding cannot fail short of memory exhaustion.
      throw SystemCallError(call: "encode report", path: report.id, refusal: .other("\(error)"))
    }
  }

  /// Decodes report JSON.
  /// Decodes report JSON. A report folder is untrusted input: every attachment it names must be
  /// a plain file name in the folder, or the report is refused (and its folder quarantined by
  /// `list`), so that a tampered `report.json` can never make Crumbs read or send a file outside
  /// the report's folder (`../../home/user/.ssh/id_rsa`).
  public static func decode(_ bytes: [UInt8]) throws -> CrashReport {
    let report = try JSONDecoder().decode(CrashReport.self, from: Data(bytes))
    for name in report.attachments.map(\.name) + [report.breadcrumbs.attachment].compactMap({ $0 })
    where !isPlainFileName(name) {
      throw UnsafeAttachmentName(name: name)
    }
    return report
  }

  /// A name that stays in its folder: not empty, not `.` or `..`, no `/` and no NUL.
  static func isPlainFileName(_ name: String) -> Bool {
    !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/"))
      && !name.utf8.contains(0)
  }

  /// A report names an attachment outside its folder.
  public struct UnsafeAttachmentName: Error, CustomStringConvertible {
    public var name: String
    public var description: String { "attachment name \"\(name)\" leaves the report folder" }
  }
}
