// StoreLimits.swift — how large the report store may grow (the store's own configuration,
// `ReportStore.limits`), and the eviction that keeps it there.
//
// The store keeps itself within its limits after every `store` and every delivery pass
// (`enforceLimits`): at most `maxRecordCount` reports in each state, at most `maxDatabaseSize`
// megabytes in all. Over the size, sent reports go first, then dropped ones (both deleted, oldest
// first), and pending ones last (moved to dropped/ with their attachments removed and the reason
// written): oldest first, except that the newest report of a signature (CrashReport.signature)
// goes only after every older one of that signature.
//
// Entry points, in call order: ReportStore.enforceLimits(_:) (after every store, and by the
// uploader before each pass) → indexed(_:) (each report's index.txt, else its report.json) →
// evictionOrder(_:). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import FoundationEssentials

/// How large the store may grow (see the design comment of this file).
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

extension ReportStore {

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
    let names = (try? Syscall.directoryEntries(of: directory, path: folder(state))) ?? []
    for name in names {
      total += folderBytes(named: name, in: directory, state: state)
    }
    folderSizes.keep(only: Set(names), prefix: state.rawValue + "/")
    return total
  }

  /// Bytes used by a report folder (its regular files; folders are flat).
  package func size(of id: String, in state: ReportState) -> Int {
    guard let directory = try? Syscall.openDirectory(folder(state), beneath: path) else { return 0 }
    defer { Syscall.close(directory) }
    return folderBytes(named: id, in: directory, state: state)
  }

  /// A report folder's bytes: remembered while the folder is unchanged (FolderSizes), else its
  /// files listed and stat'ed.
  private func folderBytes(named name: String, in directory: Int32, state: ReportState) -> Int {
    // Read before the folder's status: a change after it is stamped later than the status says.
    let listedAt = SystemClock.wallNanoseconds()
    // Not followed: a link or a file where a report folder should be counts 0.
    guard let status = Syscall.status(of: name, in: directory), status.kind == .directory else { return 0 }
    let key = state.rawValue + "/" + name
    if let bytes = folderSizes.bytes(key, status: status) { return bytes }
    // O_DIRECTORY | O_NOFOLLOW: replaced by a link since the status, it is refused.
    guard let folder = try? Syscall.openDirectory(named: name, in: directory, path: name) else { return 0 }
    defer { Syscall.close(folder) }
    var total = 0
    for file in (try? Syscall.directoryEntries(of: folder, path: name)) ?? [] {
      if let status = Syscall.status(of: file, in: folder), status.kind == .regular { total += status.size }
    }
    folderSizes.remember(key, status: status, bytes: total, listedAtNanoseconds: listedAt)
    return total
  }
}
