// DebuginfodCache.swift — debug files fetched by build ID, kept on disk in the layout elfutils'
// debuginfod client uses (`<cache>/<build id>/debuginfo`, `…/executable`), so gdb, perf and
// Crumbs share one cache when DEBUGINFOD_CACHE_PATH names it, and a second symbolication of the
// same build asks no server.
//
// Entry points, in call order:
//   DebuginfodCache(path:)                  nothing is read or made yet
//   cache.lookup(buildID:kind:)             a kept file, a recent miss, or nothing
//   DebuginfodCache.check(_:buildID:kind:)  whether fetched bytes are the file asked for: an ELF
//                                           file (ELFImage: every read bounded, fuzzed) with that
//                                           build ID, undamaged, carrying symbols or DWARF
//   cache.store(_:buildID:kind:)            checked bytes written atomically, then the cache
//                                           trimmed to its bounds; a refused file goes to
//                                           `<cache>/quarantine` (its first `quarantinedBytes`)
//                                           with its reason, never silently deleted
//   cache.recordMiss(buildID:kind:)         every server said 404: an empty file, as elfutils
//                                           writes, not asked again for `missSeconds`
//   cache.source(buildID:path:limit:)       a kept source file (`<cache>/<build id>/source#…`:
//   cache.storeSource(_:buildID:path:)      the absolute path with each `/` a `#`, as the
//   cache.recordSourceMiss(buildID:path:)   elfutils 0.188 client names it), its check and miss
//                                           the same as a debug file's (checkSource: text)
//
// The cache is a folder another user may write (the Crumbs directory): it is opened beneath its
// parent with every component O_NOFOLLOW, every entry read or removed in that descriptor; a
// kept file is used only when it is a regular file. Bounded: at most `maxEntries` build IDs and
// `maxBytes`, the least recently used (modification time, touched on use) deleted first.
// Not signal-safe; thread-safe (no state in memory: the folder is the state).

import CrumbsPlatform
import CrumbsRecorder

/// What a debuginfod server serves for a build ID: the last component of its URL.
public enum DebugFileKind: String, Sendable, CaseIterable {
  /// The separate debug file (`objcopy --only-keep-debug`): symbols and DWARF.
  case debuginfo
  /// The executable or shared object itself, for a module whose own file is gone.
  case executable
}

/// Why a debug file could not be had from a server (or its cache), in one line.
public struct RemoteDebugFileFailure: Error, Sendable, Equatable, CustomStringConvertible {
  public var reason: String
  public init(_ reason: String) { self.reason = reason }
  public var description: String { reason }
}

/// Where a Symbolicator gets a module's debug file by build ID when the machine has none: a
/// debuginfod client (`DebuginfodClient` in CrumbsDelivery). Requirements: return within the
/// implementation's own bounds (time, size), never trap, and hand back only a path whose file
/// was checked (`DebuginfodCache.check`); the Symbolicator still compares its build ID.
public protocol RemoteDebugFiles: Sendable {
  /// The local path of a checked file of `kind` with this GNU build ID (kept earlier, or
  /// fetched now), or why there is none.
  func file(buildID: [UInt8], kind: DebugFileKind) -> Result<String, RemoteDebugFileFailure>
}

/// Debug files fetched by build ID, in elfutils' cache layout (see the file comment).
public struct DebuginfodCache: Sendable {
  /// The cache folder (made, mode 0700, on the first store).
  public let path: String
  /// Build IDs kept at most.
  public var maxEntries = 64
  /// Bytes kept at most (the files of every build ID): the oldest go first.
  public var maxBytes = 1 << 30
  /// How long a miss (404 from every server) stands before the servers are asked again: elfutils'
  /// `cache_miss_s` default.
  public var missSeconds: UInt64 = 600
  /// How much of a refused file is kept in quarantine: enough to see what the server sent.
  public static let quarantinedBytes = 1 << 20
  /// The folder of refused files, inside the cache.
  public static let quarantineName = "quarantine"

  public init(path: String) {
    self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
  }

  /// What the cache holds for a build ID.
  public enum Entry: Equatable, Sendable {
    /// A kept file (checked when it was stored; the Symbolicator checks its build ID again).
    case file(String)
    /// Every server said it has none, less than `missSeconds` ago.
    case miss
    /// Nothing (or a miss too old to trust).
    case none
  }

  /// The parent the cache is opened beneath: the link-free walk starts there.
  private var parent: String { Syscall.directoryName(of: path) }

  /// What the cache holds for `buildID` and `kind`; a kept file's time is touched (it was used).
  public func lookup(buildID: [UInt8], kind: DebugFileKind) -> Entry {
    let hex = LoadedModule.hex(buildID)
    guard Self.isBuildID(hex), let folder = try? Syscall.openDirectory(path + "/" + hex, beneath: parent)
    else { return .none }
    defer { Syscall.close(folder) }
    guard let status = Syscall.status(of: kind.rawValue, in: folder), status.kind == .regular else {
      return .none
    }
    if status.size == 0 {
      let now = SystemClock.wallNanoseconds()
      let age = now > status.modifiedNanoseconds ? (now - status.modifiedNanoseconds) / 1_000_000_000 : 0
      return age < missSeconds ? .miss : .none
    }
    Syscall.touch(folder)
    return .file(path + "/" + hex + "/" + kind.rawValue)
  }

  /// Whether `bytes` are the file of `kind` with `buildID`: nil when they are, else why not.
  /// Every read of the bytes is bounded (ELFImage.parse, which the ELF fuzz target drives).
  public static func check(_ bytes: UnsafeRawBufferPointer, buildID: [UInt8], kind: DebugFileKind) -> String?
  {
    let image: ELFImage
    do {
      image = try ELFImage.parse(bytes: bytes)
    } catch {
      return "not a usable ELF file: \(error.reason)"
    }
    guard image.buildID == buildID else {
      let found = image.buildID.isEmpty ? "none" : LoadedModule.hex(image.buildID)
      return "build id \(found), not the \(LoadedModule.hex(buildID)) asked for"
    }
    if let problem = image.problems.first { return "damaged: \(problem)" }
    if kind == .debuginfo, image.symbolTable != .symtab, !image.hasDebugInfo {
      return "carries neither a symbol table nor DWARF"
    }
    return nil
  }

  /// Checks `bytes` (see `check`) and keeps them as the file of `kind` for `buildID`: its path,
  /// or why not. A refused file's start goes to the quarantine folder with its reason.
  public func store(_ bytes: [UInt8], buildID: [UInt8], kind: DebugFileKind)
    -> Result<String, RemoteDebugFileFailure>
  {
    let hex = LoadedModule.hex(buildID)
    guard Self.isBuildID(hex) else { return .failure(.init("no build id")) }
    if let refusal = bytes.withUnsafeBytes({ Self.check($0, buildID: buildID, kind: kind) }) {
      let kept = quarantine(
        Array(bytes.prefix(Self.quarantinedBytes)), name: hex + "." + kind.rawValue, reason: refusal)
      return .failure(.init("refused: \(refusal)" + (kept ? " (quarantined)" : "")))
    }
    do throws(SystemCallError) {
      let folder = try openEntry(hex)
      defer { Syscall.close(folder) }
      try Syscall.writeFileAtomically(
        named: kind.rawValue, in: folder, bytes, durable: false, path: path + "/" + hex + "/" + kind.rawValue)
    } catch {
      return .failure(.init("cannot keep it in \(path): \(error)"))
    }
    trim(keeping: hex)
    return .success(path + "/" + hex + "/" + kind.rawValue)
  }

  /// Notes that no server has the file (an empty file, elfutils' negative entry).
  public func recordMiss(buildID: [UInt8], kind: DebugFileKind) {
    recordMiss(hex: LoadedModule.hex(buildID), name: kind.rawValue)
  }

  private func recordMiss(hex: String, name: String) {
    guard Self.isBuildID(hex), let folder = try? openEntry(hex) else { return }
    defer { Syscall.close(folder) }
    try? Syscall.writeFileAtomically(
      named: name, in: folder, [UInt8](), durable: false, path: path + "/" + hex + "/" + name)
  }

  // MARK: Source files (`/buildid/<id>/source/<path>`)

  /// What the cache holds for a source file.
  public enum SourceEntry: Equatable, Sendable {
    /// Its bytes (checked again now: the folder may be another user's).
    case file([UInt8])
    /// Every server said it has none, less than `missSeconds` ago.
    case miss
    /// Nothing kept, or what is kept is refused (the reason).
    case none(String?)
  }

  /// The name the source file `path` (absolute, as DWARF names it) has in a build ID's folder:
  /// `source` then the path with each `/` a `#` (elfutils 0.188's client; a newer one hashes
  /// long names, so its entries are not shared). Nil for a relative path, a NUL byte, or a name
  /// longer than a file name may be.
  public static func sourceEntryName(_ path: String) -> String? {
    guard path.hasPrefix("/"), !path.utf8.contains(0) else { return nil }
    let name =
      "source"
      + String(decoding: path.utf8.map { $0 == UInt8(ascii: "/") ? UInt8(ascii: "#") : $0 }, as: UTF8.self)
    return name.utf8.count <= 255 ? name : nil
  }

  /// Whether fetched `bytes` may stand as a source file of at most `limit` bytes: nil when
  /// they may, else why not (text only: no NUL byte; the size bound).
  public static func checkSource(_ bytes: [UInt8], limit: Int) -> String? {
    if bytes.count > limit { return "over \(limit) bytes" }
    if bytes.isEmpty { return "empty" }
    if bytes.contains(0) { return "not text (a NUL byte)" }
    return nil
  }

  /// The kept source file `path` of the build ID `hex`, read beneath the cache (no link followed, at
  /// most `limit` bytes) and checked as a fetched one is.
  public func source(buildID hex: String, path sourcePath: String, limit: Int) -> SourceEntry {
    guard Self.isBuildID(hex), let name = Self.sourceEntryName(sourcePath),
      let folder = try? Syscall.openDirectory(path + "/" + hex, beneath: parent)
    else { return .none(nil) }
    defer { Syscall.close(folder) }
    guard let status = Syscall.status(of: name, in: folder), status.kind == .regular else {
      return .none(nil)
    }
    if status.size == 0 {
      let now = SystemClock.wallNanoseconds()
      let age = now > status.modifiedNanoseconds ? (now - status.modifiedNanoseconds) / 1_000_000_000 : 0
      return age < missSeconds ? .miss : .none(nil)
    }
    let bytes: [UInt8]
    do {
      bytes = try Syscall.readFile(named: name, in: folder, limit: limit, path: path + "/" + hex + "/" + name)
    } catch {
      if case .tooLarge = error.refusal { return .none("the kept file is over \(limit) bytes") }
      return .none("the kept file: \(error)")
    }
    if let refusal = Self.checkSource(bytes, limit: limit) { return .none("the kept file: \(refusal)") }
    Syscall.touch(folder)
    return .file(bytes)
  }

  /// Keeps fetched source bytes (checked: `checkSource`) as `path`'s file for the build ID `hex`;
  /// a file that cannot be kept is still good for this report (success).
  public func storeSource(_ bytes: [UInt8], buildID hex: String, path sourcePath: String, limit: Int)
    -> Result<Void, RemoteDebugFileFailure>
  {
    guard Self.isBuildID(hex) else { return .failure(.init("no build id")) }
    if let refusal = Self.checkSource(bytes, limit: limit) { return .failure(.init("refused: \(refusal)")) }
    guard let name = Self.sourceEntryName(sourcePath) else { return .success(()) }  // used, not kept
    do throws(SystemCallError) {
      let folder = try openEntry(hex)
      defer { Syscall.close(folder) }
      try Syscall.writeFileAtomically(
        named: name, in: folder, bytes, durable: false, path: path + "/" + hex + "/" + name)
    } catch {
      return .success(())  // used now, not kept: the lines are still good
    }
    trim(keeping: hex)
    return .success(())
  }

  /// Notes that no server has the source file `path` of the build ID `hex`.
  public func recordSourceMiss(buildID hex: String, path sourcePath: String) {
    guard let name = Self.sourceEntryName(sourcePath) else { return }
    recordMiss(hex: hex, name: name)
  }

  /// The build ID's folder, made when missing (the cache too), opened without following links.
  private func openEntry(_ hex: String) throws(SystemCallError) -> Int32 {
    if !Syscall.isDirectory(path) { try Syscall.makeDirectories(path) }
    let cache = try Syscall.openDirectory(path, beneath: parent)
    defer { Syscall.close(cache) }
    if Syscall.status(of: hex, in: cache) == nil {
      do {
        try Syscall.makeDirectory(named: hex, in: cache, path: path + "/" + hex)
      } catch {
        if error.errno != .fileExists { throw error }
      }
    }
    return try Syscall.openDirectory(named: hex, in: cache, path: path + "/" + hex)
  }

  /// Keeps `bytes` in the quarantine folder with `reason`; whether it could.
  private func quarantine(_ bytes: [UInt8], name: String, reason: String) -> Bool {
    do throws(SystemCallError) {
      let folder = path + "/" + Self.quarantineName
      if !Syscall.isDirectory(path) { try Syscall.makeDirectories(path) }
      let cache = try Syscall.openDirectory(path, beneath: parent)
      defer { Syscall.close(cache) }
      if Syscall.status(of: Self.quarantineName, in: cache) == nil {
        try Syscall.makeDirectory(named: Self.quarantineName, in: cache, path: folder)
      }
      // Written in the cache, then moved in with its reason (Quarantine keeps its bounds).
      let staging = ".refused-" + name
      try Syscall.writeFileAtomically(
        named: staging, in: cache, bytes, durable: false, path: path + "/" + staging)
      try Quarantine.move(path + "/" + staging, into: folder, reason: reason, beneath: parent)
      return true
    } catch {
      return false
    }
  }

  /// Deletes the least recently used build IDs until at most `maxEntries` and `maxBytes` are
  /// left; `keeping` (the one just stored) stays. Only folders named like build IDs are counted
  /// or touched. Returns the build IDs deleted.
  @discardableResult
  public func trim(keeping: String? = nil) -> [String] {
    guard let cache = try? Syscall.openDirectory(path, beneath: parent) else { return [] }
    defer { Syscall.close(cache) }
    var entries: [(name: String, time: UInt64, bytes: Int)] = []
    for name in (try? Syscall.directoryEntries(of: cache, path: path)) ?? [] where Self.isBuildID(name) {
      guard let status = Syscall.status(of: name, in: cache), status.kind == .directory,
        let folder = try? Syscall.openDirectory(named: name, in: cache, path: path + "/" + name)
      else { continue }
      // Every regular file counts: debug files and kept sources alike.
      var bytes = 0
      for entry in ((try? Syscall.directoryEntries(of: folder, path: path + "/" + name)) ?? []).prefix(4096) {
        if let file = Syscall.status(of: entry, in: folder), file.kind == .regular { bytes += file.size }
      }
      Syscall.close(folder)
      entries.append((name, status.modifiedNanoseconds, bytes))
    }
    entries.sort { $0.time < $1.time }
    var count = entries.count
    var total = entries.reduce(0) { $0 + $1.bytes }
    var deleted: [String] = []
    for entry in entries where (count > maxEntries || total > maxBytes) && entry.name != keeping {
      Syscall.removeTree(named: entry.name, in: cache)
      count -= 1
      total -= entry.bytes
      deleted.append(entry.name)
    }
    return deleted
  }

  /// Whether `name` is a build ID's hex (lowercase, 2 to 128 digits): the only names the cache
  /// makes, reads or deletes.
  package static func isBuildID(_ name: String) -> Bool {
    name.utf8.count >= 2 && name.utf8.count <= 128
      && name.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
  }
}
