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
// Every file is written temp + fsync + rename + directory fsync; a report appears in `pending`
// by one atomic rename of its whole folder, so a reader sees all of it or none of it.
//
// A report folder is untrusted input (anyone who can write the directory can tamper with it).
// Everything below `reports/` is reached relative to an open directory, component by component,
// with O_NOFOLLOW (Syscall.openDirectory(_:beneath:), readFile(named:in:)…): a symbolic link
// where a folder or file should be is never followed, so nothing outside the Crumbs directory is
// ever read, written or removed. A report folder that is a link, or holds anything but regular
// files, is quarantined with its reason by `list`.
//
// The store keeps itself within `limits` (StoreLimits) after every `store` and every delivery
// pass (`enforceLimits`): at most `maxRecordCount` reports in each state, at most
// `maxDatabaseSize` megabytes in all. Over the size, sent reports go first, then dropped ones
// (both deleted, oldest first), and pending ones last (moved to dropped/ with their attachments
// removed and the reason written): oldest first, except that the newest report of a signature
// (CrashReport.signature) goes only after every older one of that signature.
//
// Entry points, in call order:
//   ReportStore(directory:limits:)   create the folders (a link in place of one is moved aside)
//   removeLeftovers()                what writers killed mid-write left (the post-mortem run)
//   store(_:attachments:)            write a new report (idempotent per id), then enforceLimits()
//   list(_:) / load(id:)             read back; damaged or unsafe folders are quarantined
//   StoredReport.readFile(_:limit:)  a file of a report folder (destinations, delivery state)
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

/// How large the store may grow (see the design comment of ReportStore.swift).
public struct StoreLimits: Sendable, Equatable {
  /// Most reports kept in each state (pending, sent, dropped); 0: no limit. Pending reports
  /// beyond it are evicted to dropped/, sent and dropped ones beyond it deleted.
  public var maxRecordCount: Int
  /// Most megabytes (10^6 bytes) the reports may use, all states together; 0: no limit.
  public var maxDatabaseSize: Int

  /// The defaults: 50 reports in each state, 128 MB.
  public init(maxRecordCount: Int = 50, maxDatabaseSize: Int = 128) {
    self.maxRecordCount = maxRecordCount
    self.maxDatabaseSize = maxDatabaseSize
  }

  /// No limit at all (nothing is ever evicted).
  public static let unlimited = StoreLimits(maxRecordCount: 0, maxDatabaseSize: 0)
}

/// A report removed or moved to keep the store within its limits.
public struct Eviction: Sendable, Equatable {
  public var reportID: String
  /// The state it was in: pending ones move to dropped/, sent and dropped ones are deleted.
  public var state: ReportState
  public var reason: String
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

public struct ReportStore: Sendable {
  /// `<directory>/reports`.
  public let path: String
  /// Applied after every `store` (and by the uploader before each pass).
  public var limits: StoreLimits

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
    path = Syscall.absolutePath(directory) + "/reports"
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
    path = directory + "/reports"
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
  @discardableResult
  public func store(_ report: CrashReport, attachments: [(name: String, bytes: [UInt8])] = [])
    throws(ReportStoreError) -> StoredReport
  {
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
      for attachment in attachments {
        try Syscall.writeFileAtomically(
          named: attachment.name, in: folder, attachment.bytes, path: incomingPath + "/" + attachment.name)
      }
      try Syscall.writeFileAtomically(
        named: Self.indexFileName, in: folder, IndexEntry(report).encoded, durable: false,
        path: incomingPath + "/" + Self.indexFileName)
      try Syscall.writeFileAtomically(
        named: "report.json", in: folder, try Self.encode(report), path: incomingPath + "/report.json")
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

  private enum FolderReading {
    case report(CrashReport)
    case unreadable(String)
    /// Moved or removed meanwhile (another process delivering): not an error.
    case gone
  }

  /// Reads the report folder `name` of the open state folder `directory`, checking first that it
  /// is a real folder holding regular files only.
  private func readReport(named name: String, in directory: Int32, path reportFolder: String) -> FolderReading
  {
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

  // MARK: - Limits

  /// Keeps the store within `limits` (the store's own when nil); see the design comment for the
  /// order. Returns what was evicted, each with the reason (also written in dropped.reason).
  /// Reads each report's small index file, not its report.json, and does not fsync (an eviction
  /// a power loss undoes is done again): cheap enough for every store.
  @discardableResult
  public func enforceLimits(_ limits: StoreLimits? = nil) -> [Eviction] {
    let limits = limits ?? self.limits
    var evictions: [Eviction] = []
    let maxCount = limits.maxRecordCount
    if maxCount > 0 {
      if entryCount(.pending) > maxCount {
        let pending = indexed(.pending)
        let reason = "evicted: more than \(maxCount) pending reports (maxRecordCount)"
        for entry in Self.evictionOrder(pending).prefix(max(0, pending.count - maxCount))
        where (try? drop(id: entry.id, reason: reason, removingAttachments: true, durable: false)) != nil {
          evictions.append(Eviction(reportID: entry.id, state: .pending, reason: reason))
        }
      }
      for state in [ReportState.sent, .dropped] where entryCount(state) > maxCount {
        let entries = indexed(state)
        let reason = "deleted: more than \(maxCount) \(state.rawValue) reports (maxRecordCount)"
        for entry in entries.prefix(max(0, entries.count - maxCount)) {
          remove(id: entry.id, in: state)
          evictions.append(Eviction(reportID: entry.id, state: state, reason: reason))
        }
      }
    }
    guard limits.maxDatabaseSize > 0 else { return evictions }
    let limit = limits.maxDatabaseSize.multipliedReportingOverflow(by: 1_000_000)
    guard !limit.overflow else { return evictions }
    var total = ReportState.allCases.reduce(0) { $0 + bytes(in: $1) }
    guard total > limit.partialValue else { return evictions }
    let reason = "evicted: database over \(limits.maxDatabaseSize) MB (maxDatabaseSize)"
    // Delivered and refused reports first, oldest first; then pending ones; then, if records
    // alone are still over, the evicted records themselves.
    for state in [ReportState.sent, .dropped] {
      for entry in indexed(state) where total > limit.partialValue {
        total -= size(of: entry.id, in: state)
        remove(id: entry.id, in: state)
        evictions.append(Eviction(reportID: entry.id, state: state, reason: reason))
      }
    }
    for entry in Self.evictionOrder(indexed(.pending)) where total > limit.partialValue {
      let before = size(of: entry.id, in: .pending)
      guard (try? drop(id: entry.id, reason: reason, removingAttachments: true, durable: false)) != nil else {
        continue
      }
      total -= before - size(of: entry.id, in: .dropped)
      evictions.append(Eviction(reportID: entry.id, state: .pending, reason: reason))
    }
    for entry in indexed(.dropped) where total > limit.partialValue {
      total -= size(of: entry.id, in: .dropped)
      remove(id: entry.id, in: .dropped)
      evictions.append(Eviction(reportID: entry.id, state: .dropped, reason: reason))
    }
    return evictions
  }

  /// What eviction needs to know about a report: when it was made and its signature. Kept in
  /// the report's folder as `index.txt` (two lines), written with it (without fsync: after a
  /// power loss a damaged index only means report.json is read instead).
  struct IndexEntry: Equatable {
    var id: String
    var observedTimeUnixNano: UInt64
    var signature: String

    init(id: String, observedTimeUnixNano: UInt64, signature: String) {
      self.id = id
      self.observedTimeUnixNano = observedTimeUnixNano
      self.signature = signature
    }

    init(_ report: CrashReport) {
      self.init(id: report.id, observedTimeUnixNano: report.observedTimeUnixNano, signature: report.signature)
    }

    /// `index.txt`: the observed time in decimal, then the signature.
    var encoded: [UInt8] { Array("\(observedTimeUnixNano)\n\(signature)\n".utf8) }

    init?(id: String, decoding bytes: [UInt8]) {
      let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
      guard lines.count >= 2, let time = UInt64(String(decoding: lines[0], as: UTF8.self)) else { return nil }
      self.init(id: id, observedTimeUnixNano: time, signature: String(decoding: lines[1], as: UTF8.self))
    }
  }

  static let indexFileName = "index.txt"

  /// The reports of `state` by their index, oldest first. A folder without a readable index
  /// (an earlier version's, or damaged) is read whole; one that cannot be read at all, or is
  /// unsafe, is quarantined as `list` does.
  func indexed(_ state: ReportState) -> [IndexEntry] {
    guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { return [] }
    defer { Syscall.close(directory) }
    var entries: [IndexEntry] = []
    for name in (try? Syscall.directoryEntries(of: directory, path: folder(state))) ?? [] {
      let reportFolder = folder(state) + "/" + name
      if Syscall.status(of: name, in: directory)?.kind == .directory,
        let folder = try? Syscall.openDirectory(named: name, in: directory, path: reportFolder)
      {
        let bytes = try? Syscall.readFile(
          named: Self.indexFileName, in: folder, limit: 1 << 16, path: reportFolder + "/" + Self.indexFileName
        )
        Syscall.close(folder)
        if let bytes, let entry = IndexEntry(id: name, decoding: bytes) {
          entries.append(entry)
          continue
        }
      }
      switch readReport(named: name, in: directory, path: reportFolder) {
      case .report(let report):
        entries.append(
          IndexEntry(id: name, observedTimeUnixNano: report.observedTimeUnixNano, signature: report.signature)
        )
      case .unreadable(let reason):
        _ = try? quarantine(reportFolder, reason: reason)
      case .gone:
        break
      }
    }
    return entries.sorted { ($0.observedTimeUnixNano, $0.id) < ($1.observedTimeUnixNano, $1.id) }
  }

  /// Pending reports in the order they are evicted: oldest first, but the newest report of each
  /// signature after every other one (it goes only once the older ones of its signature are gone).
  static func evictionOrder(_ pending: [IndexEntry]) -> [IndexEntry] {
    var newest: [String: Int] = [:]
    for (index, entry) in pending.enumerated() { newest[entry.signature] = index }
    let isNewest = pending.indices.map { newest[pending[$0].signature] == $0 }
    return pending.indices.filter { !isNewest[$0] }.map { pending[$0] }
      + pending.indices.filter { isNewest[$0] }.map { pending[$0] }
  }

  /// Entries in a state folder (a cheap check before anything is read).
  private func entryCount(_ state: ReportState) -> Int {
    (try? Syscall.directoryEntries(folder(state)))?.count ?? 0
  }

  /// Bytes of regular files in the report folders of `state` (links and odd entries count 0).
  private func bytes(in state: ReportState) -> Int {
    guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { return 0 }
    defer { Syscall.close(directory) }
    var total = 0
    for name in (try? Syscall.directoryEntries(of: directory, path: folder(state))) ?? [] {
      total += folderBytes(named: name, in: directory)
    }
    return total
  }

  /// Bytes used by a report folder (its regular files; folders are flat).
  package func size(of id: String, in state: ReportState) -> Int {
    guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { return 0 }
    defer { Syscall.close(directory) }
    return folderBytes(named: id, in: directory)
  }

  private func folderBytes(named name: String, in directory: Int32) -> Int {
    guard Syscall.status(of: name, in: directory)?.kind == .directory,
      let folder = try? Syscall.openDirectory(named: name, in: directory, path: name)
    else { return 0 }
    defer { Syscall.close(folder) }
    var total = 0
    for file in (try? Syscall.directoryEntries(of: folder, path: name)) ?? [] {
      if let status = Syscall.status(of: file, in: folder), status.kind == .regular { total += status.size }
    }
    return total
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
