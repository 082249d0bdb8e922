// ReportStore.swift — the on-disk report database: one folder per report, states as folders.
//
//   reports/.incoming/<id>.<writer>/  being written by process <writer> (`<pid>-<pid namespace>`,
//                                  AbandonedFiles.writerTag; never read)
//   reports/pending/<id>/          report.json + index.txt (its time and signature, for
//                                  eviction) + attachments, waiting for delivery
//   reports/sent/<id>/             delivered
//   reports/dropped/<id>/          refused by a server for good, or evicted (with dropped.reason)
//   reports/quarantine/<name>      folders that could not be read, moved aside with a .reason file
//
// A report appears in `pending` by one atomic rename of its whole folder, so a reader sees all
// of it or none of it: its files are written in place in its private `.incoming` folder, all
// fsynced, then the folder, before the rename. A file changed later (delivery state, index) is
// written temp + fsync + rename + directory fsync.
//
// A report folder is untrusted input (anyone who can write the directory can tamper with it).
// Everything below `reports/` is reached relative to an open directory, component by component,
// with O_NOFOLLOW (Syscall.openDirectory(_:beneath:), readFile(named:in:)…): a symbolic link
// where a folder or file should be is never followed, so nothing outside the Crumbs directory is
// ever read, written or removed. A report folder that is a link, or holds anything but regular
// files, is quarantined with its reason by `list`.
//
// The store keeps itself within its `limits` (StoreLimits.swift: the limits and the eviction
// order) after every `store` and every delivery pass. Each report folder is a StoredReport
// (StoredReport.swift); what delivery remembers about it, delivery.json, is the store's format
// too (DeliveryState.swift).
//
// Entry points, in call order:
//   ReportStore(directory:limits:)   create the folders (a link in place of one is moved aside)
//   removeLeftovers()                what writers killed mid-write left (the post-mortem run)
//   store(_:attachments:)            write a new report (idempotent per id), then enforceLimits()
//   list(_:) / load(id:)             read back; damaged or unsafe folders are quarantined
//   StoredReport.readFile(_:limit:)  a file of a report folder (destinations, delivery state)
//   StoredReport.deliveryState() / writeDeliveryState(_:)   a report's delivery.json (delivery)
//   move(id:from:to:) / drop(id:reason:)   change state (delivery)
//   enforceLimits()                  evict to the limits (also after each store)
// Not signal-safe.

import CrumbsPlatform
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
  /// A prefix that starts more than one report's id: the prefix and those ids.
  case ambiguous(String, [String])

  public var description: String {
    switch self {
    case .system(let error): "report store: \(error)"
    case .encoding(let reason): "report store: cannot encode report: \(reason)"
    case .notFound(let id): "report store: no report \(id)"
    case .ambiguous(let prefix, let ids):
      "report store: \(prefix) starts \(ids.count) report ids: \(ids.joined(separator: ", "))"
    }
  }
}

/// A report's place in the store.
public enum ReportState: String, Sendable, CaseIterable, Codable {
  case pending, sent, dropped
}

public struct ReportStore: Sendable {
  /// `<directory>/reports`.
  public let path: String
  /// Applied after every `store` (and by the uploader before each pass).
  public var limits: StoreLimits
  /// Report folders' sizes while unchanged, for `enforceLimits` (FolderSizes.swift).
  var folderSizes = FolderSizes()

  /// The store's folder in a Crumbs directory, spelled here only (`CrumbsDirectory` takes it
  /// from here).
  package static let folderName = "reports"
  /// The file that says why a dropped report was dropped.
  public static let droppedReasonFileName = "dropped.reason"
  /// The uploader's per-report state (kept when attachments are evicted).
  public static let deliveryStateFileName = "delivery.json"
  /// The files a report keeps when it is evicted: the record, not the payload.
  static let recordFileNames: Set<String> = [
    "report.json", "index.txt", deliveryStateFileName, droppedReasonFileName,
  ]

  /// Opens (creating) the report store under `directory`. Any of the store's own folders found
  /// to be something else than a folder (a symbolic link, a file) is moved into `quarantine/`
  /// with the reason, and a real folder made in its place.
  public init(directory: String, limits: StoreLimits = StoreLimits()) throws(SystemCallError) {
    // Absolute now: a later chdir moves nothing.
    path = Syscall.absolutePath(directory) + "/" + Self.folderName
    self.limits = limits
    try Syscall.makeDirectories(path)
    // quarantine/ first: the others are moved into it.
    for folder in ["quarantine", ".incoming"] + ReportState.allCases.map(\.rawValue) {
      try makeOwnFolder(folder)
    }
  }

  /// The store under `directory` as it is, for readers that must change nothing (the CLI's
  /// `reports list/show`): no folder is made or moved; the caller checks that `reports/` exists.
  package init(existingDirectory directory: String, limits: StoreLimits = StoreLimits()) {
    path = directory + "/" + Self.folderName
    self.limits = limits
  }

  private func makeOwnFolder(_ name: String) throws(SystemCallError) {
    let folder = path + "/" + name
    let found = Syscall.status(ofPath: folder)
    if found?.kind == .directory { return }  // every launch after the first
    if let found {
      // Moved out of the way under a private name, then into quarantine/ (itself made first).
      let aside = path + "/.\(name).misplaced-\(Syscall.processID())"
      try Syscall.rename(folder, to: aside)
      try Syscall.makeDirectory(folder)
      let quarantine = name == "quarantine" ? folder : path + "/quarantine"
      try Quarantine.move(
        aside, into: quarantine, reason: "the store's \(name)/ was \(found.description), never followed")
      return
    }
    try Syscall.makeDirectory(folder)
  }

  package func folder(_ state: ReportState) -> String { path + "/" + state.rawValue }

  /// Whether a report with this id is stored, in any state.
  public func contains(id: String) -> Bool {
    ReportState.allCases.contains { Syscall.fileExists(folder($0) + "/" + id) }
  }

  // MARK: - Storing

  /// Stores a new report with its attachments in `pending`, then keeps the store within its
  /// limits (which may evict older reports, and in the last resort this one: the result then
  /// says `dropped`). If a report with the same id is already stored (in any state) nothing is
  /// written and the stored one is returned: a crash processed twice becomes one report. A
  /// failed store leaves nothing behind.
  /// `heldUntilUnixNano` stores the report held from delivery until then
  /// (`DeliveryState.heldUntilUnixNano`), in the same atomic rename.
  @discardableResult
  public func store(
    _ report: CrashReport, attachments: [(name: String, bytes: [UInt8])] = [],
    heldUntilUnixNano: UInt64? = nil
  ) throws(ReportStoreError) -> StoredReport {
    for state in ReportState.allCases where Syscall.fileExists(folder(state) + "/" + report.id) {
      return StoredReport(report: report, state: state, path: folder(state) + "/" + report.id)
    }
    let name = report.id + "." + AbandonedFiles.writerTag()
    let incomingPath = path + "/.incoming/" + name
    let destination = folder(.pending) + "/" + report.id
    var incoming: Int32 = -1
    defer { if incoming >= 0 { Syscall.close(incoming) } }
    do throws(SystemCallError) {
      incoming = try Syscall.openDirectory(path + "/.incoming", beneath: path)
      // Only an earlier process with this pid in this pid namespace, killed mid-write, can have
      // left this name.
      Syscall.removeTree(named: name, in: incoming)
      try Syscall.makeDirectory(named: name, in: incoming, path: incomingPath)
      let folder = try Syscall.openDirectory(named: name, in: incoming, path: incomingPath)
      defer { Syscall.close(folder) }
      // The folder is this writer's alone until the rename: its files are written in place (no
      // temporary name, rename and folder fsync each), all of them first, then fsynced, then
      // the folder, so that one journal commit can take them all (the index needs no fsync: a
      // missing one is rebuilt from report.json, see StoreLimits.indexed).
      var durable: [(fd: Int32, path: String)] = []
      defer { for file in durable { Syscall.close(file.fd) } }
      func write(_ file: String, _ bytes: [UInt8], durably: Bool = true) throws(SystemCallError) {
        let fd = try Syscall.createFile(named: file, in: folder, bytes, path: incomingPath + "/" + file)
        if durably { durable.append((fd, incomingPath + "/" + file)) } else { Syscall.close(fd) }
      }
      for attachment in attachments { try write(attachment.name, attachment.bytes) }
      if let heldUntilUnixNano {
        var held = DeliveryState()
        held.heldUntilUnixNano = heldUntilUnixNano
        try write(Self.deliveryStateFileName, held.encoded)
      }
      try write(Self.indexFileName, IndexEntry(report).encoded, durably: false)
      try write("report.json", try Self.encode(report))
      for file in durable { try Syscall.fsync(file.fd, path: file.path) }
      try Syscall.fsync(folder, path: incomingPath)
      let pending = try Syscall.openDirectory(self.folder(.pending), beneath: path)
      defer { Syscall.close(pending) }
      try Syscall.rename(named: name, in: incoming, to: report.id, in: pending, path: incomingPath)
      try Syscall.fsync(pending, path: self.folder(.pending))
    } catch {
      // A full disk (or any failure) leaves no half-written folder in .incoming.
      if incoming >= 0 { Syscall.removeTree(named: name, in: incoming) }
      throw .system(error)
    }
    if enforceLimits().contains(where: { $0.reportID == report.id }) {
      return StoredReport(report: report, state: .dropped, path: folder(.dropped) + "/" + report.id)
    }
    return StoredReport(report: report, state: .pending, path: destination)
  }

  // MARK: - Reading

  /// Reports in `state`, oldest first. Folders that cannot be read — a damaged report.json, a
  /// symbolic link instead of a folder, a folder holding a link, a FIFO or a device — are moved
  /// to `quarantine/` with a reason (returned in `quarantined`), never deleted here, never
  /// followed.
  public func list(_ state: ReportState) -> (reports: [StoredReport], quarantined: [String]) {
    var reports: [StoredReport] = []
    var quarantined: [String] = []
    guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { return ([], []) }
    defer { Syscall.close(directory) }
    for name in (try? Syscall.directoryEntries(of: directory, path: folder(state))) ?? [] {
      let reportFolder = folder(state) + "/" + name
      switch readReport(named: name, in: directory, path: reportFolder) {
      case .report(let report):
        reports.append(StoredReport(report: report, state: state, path: reportFolder))
      case .unreadable(let reason):
        if let moved = try? quarantine(reportFolder, reason: reason) { quarantined.append(moved) }
      case .gone:
        break
      }
    }
    reports.sort { $0.report.observedTimeUnixNano < $1.report.observedTimeUnixNano }
    return (reports, quarantined)
  }

  /// The report with `id` in any state. `id` may be a unique prefix; a prefix of several ids
  /// is refused (`.ambiguous`, naming them) rather than answered with one of them.
  public func load(id: String) throws(ReportStoreError) -> StoredReport {
    var found: [(state: ReportState, name: String)] = []
    for state in ReportState.allCases {
      guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { continue }
      defer { Syscall.close(directory) }
      let names = (try? Syscall.directoryEntries(of: directory, path: folder(state))) ?? []
      found += names.filter { $0.hasPrefix(id) }.sorted().map { (state, $0) }
    }
    let ids = Set(found.map(\.name))
    if !ids.contains(id), ids.count > 1 { throw .ambiguous(id, ids.sorted()) }
    for (state, name) in found where name == id || !ids.contains(id) {
      guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { continue }
      defer { Syscall.close(directory) }
      let reportFolder = folder(state) + "/" + name
      switch readReport(named: name, in: directory, path: reportFolder) {
      case .report(let report):
        return StoredReport(report: report, state: state, path: reportFolder)
      case .unreadable(let reason):
        throw .encoding("\(reportFolder)/report.json: \(reason)")
      case .gone:
        continue
      }
    }
    throw .notFound(id)
  }

  enum FolderReading {
    case report(CrashReport)
    case unreadable(String)
    /// Moved or removed meanwhile (another process delivering): not an error.
    case gone
  }

  /// Reads the report folder `name` of the open state folder `directory`, checking first that it
  /// is a real folder holding regular files only.
  func readReport(named name: String, in directory: Int32, path reportFolder: String) -> FolderReading {
    guard let entry = Syscall.status(of: name, in: directory) else { return .gone }
    guard entry.kind == .directory else {
      return .unreadable("unsafe report folder: it is \(entry.description), never followed")
    }
    let folder: Int32
    do {
      folder = try Syscall.openDirectory(named: name, in: directory, path: reportFolder)
    } catch {
      return error.errno == .noSuchFileOrDirectory ? .gone : .unreadable("unreadable report: \(error)")
    }
    defer { Syscall.close(folder) }
    for file in (try? Syscall.directoryEntries(of: folder, path: reportFolder)) ?? [] {
      guard let status = Syscall.status(of: file, in: folder), status.kind != .regular else { continue }
      return .unreadable("unsafe report folder: \(file) is \(status.description), never followed")
    }
    do {
      let bytes = try Syscall.readFile(
        named: "report.json", in: folder, limit: 64 << 20, path: reportFolder + "/report.json")
      return .report(try Self.decode(bytes))
    } catch {
      return .unreadable("unreadable report: \(error)")
    }
  }

  // MARK: - Changing state

  /// Moves a report between states (one atomic rename; a link is moved, never followed).
  /// `durable: false` skips the directory fsync (see `drop`).
  @discardableResult
  public func move(id: String, from: ReportState, to: ReportState, durable: Bool = true)
    throws(ReportStoreError)
    -> String
  {
    let destination = folder(to) + "/" + id
    do throws(SystemCallError) {
      try Syscall.rename(folder(from) + "/" + id, to: destination)
      if durable { try Syscall.fsyncDirectory(folder(to)) }
    } catch {
      if error.errno == .noSuchFileOrDirectory { throw .notFound(id) }
      throw .system(error)
    }
    return destination
  }

  /// Moves a pending report to `dropped/` with its reason written first (so a dropped report is
  /// never without one). With `removingAttachments`, everything but report.json, delivery.json
  /// and the reason is deleted (eviction: the point is to free space, the record stays).
  /// `durable: false` skips the fsyncs: after a power loss the report may be back in pending/ (or
  /// its reason empty), which only matters for an eviction, and the next one does it again.
  @discardableResult
  public func drop(id: String, reason: String, removingAttachments: Bool = false, durable: Bool = true)
    throws(ReportStoreError) -> String
  {
    let source = folder(.pending) + "/" + id
    do throws(SystemCallError) {
      let folder = try Syscall.openDirectory(source, beneath: path)
      defer { Syscall.close(folder) }
      try Syscall.writeFileAtomically(
        named: Self.droppedReasonFileName, in: folder, Array((reason + "\n").utf8), durable: durable,
        path: source + "/" + Self.droppedReasonFileName)
      if removingAttachments {
        for name in try Syscall.directoryEntries(of: folder, path: source)
        where !Self.recordFileNames.contains(name) {
          Syscall.removeTree(named: name, in: folder)
        }
      }
    } catch {
      if error.errno == .noSuchFileOrDirectory { throw .notFound(id) }
      throw .system(error)
    }
    return try move(id: id, from: .pending, to: .dropped, durable: durable)
  }

  /// Deletes a report folder (its links unlinked, never followed).
  package func remove(id: String, in state: ReportState) {
    guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { return }
    defer { Syscall.close(directory) }
    Syscall.removeTree(named: id, in: directory)
  }

  /// Moves `item` into `quarantine/` with a `.reason` file; returns the new path.
  @discardableResult
  public func quarantine(_ item: String, reason: String) throws(SystemCallError) -> String {
    let destination = try Quarantine.move(item, into: path + "/quarantine", reason: reason)
    return destination
  }

  // MARK: - Leftovers of dead writers

  /// Removes what writers killed mid-write left: `.incoming/<id>.<writer>` folders and
  /// `*.tmp-<writer>` files in the state folders, the report folders and quarantine/, when their
  /// writer is gone (see `AbandonedFiles`: judged by pid only within its pid namespace). Returns
  /// the paths removed.
  @discardableResult
  public func removeLeftovers() -> [String] {
    var removed: [String] = []
    if let incoming = try? Syscall.openDirectory(path + "/.incoming", beneath: path) {
      defer { Syscall.close(incoming) }
      for name in (try? Syscall.directoryEntries(of: incoming, path: path + "/.incoming")) ?? [] {
        guard let status = Syscall.status(of: name, in: incoming),
          AbandonedFiles.isAbandoned(name, separator: ".", modifiedNanoseconds: status.modifiedNanoseconds)
        else { continue }
        Syscall.removeTree(named: name, in: incoming)
        removed.append(path + "/.incoming/" + name)
      }
    }
    for folder in ["quarantine"] + ReportState.allCases.map(\.rawValue) {
      let folderPath = path + "/" + folder
      guard let directory = try? Syscall.openDirectory(folderPath, beneath: path) else { continue }
      defer { Syscall.close(directory) }
      removed += AbandonedFiles.removeTemporaryFiles(in: directory, path: folderPath)
      guard folder != "quarantine" else { continue }  // quarantined folders are kept as they are
      for name in (try? Syscall.directoryEntries(of: directory, path: folderPath)) ?? []
      where Syscall.status(of: name, in: directory)?.kind == .directory {
        guard
          let report = try? Syscall.openDirectory(named: name, in: directory, path: folderPath + "/" + name)
        else { continue }
        removed += AbandonedFiles.removeTemporaryFiles(in: report, path: folderPath + "/" + name)
        Syscall.close(report)
      }
    }
    return removed
  }

  // MARK: - Encoding

  /// report.json's bytes (docs/formats.md): compact, keys sorted, slashes as they are, written by
  /// hand through the JSON writer (CrashReport+JSON.swift): `JSONEncoder` (and before it, its
  /// pretty-printing) cost a third of the store step's CPU on every report. Its
  /// readers are JSON parsers (`crumbs report decode` pretty-prints it). Sorted, so one report
  /// always gives the same bytes. It no longer fails; `throws` stays for its callers.
  static func encode(_ report: CrashReport) throws(SystemCallError) -> [UInt8] {
    report.jsonBytes
  }

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
