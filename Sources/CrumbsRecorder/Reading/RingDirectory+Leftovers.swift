// RingDirectory+Leftovers.swift — the rings of earlier processes: found, read, claimed, and
// removed once reported; files that are not good rings quarantined with their reason. The
// directory's layout is in RingDirectory.swift.
//
// Entry points, in call order:
//   leftoverRings()               rings whose writer is gone, read; bad files are quarantined
//                                 with their reason
//   claimLeftovers()              the same, but each ring is claimed first: its claim lock taken
//                                 and renamed to `<session>.ring.claimed`, so that of two
//                                 processes starting at once exactly one gets it; a claim left by
//                                 a process killed mid-processing is taken over on the next start
//   ClaimedRing.finish()          delete the consumed files once their report is stored
//   removeEndedChildSessions      a forking parent deletes its ended, uncrashed children's
//                                 files while it runs (ForkedSessionReaper), claimed the same way
//
// Whether a ring's writer is gone is decided per writer process. The writer holds its ring's
// flock for its whole life, so a lock we get means it is gone. A lock we cannot get may be held
// by the writer, by another process claiming the ring, or by a child the writer forked that
// kept the descriptor: a child made by fork() closes its copy (crumbs_fork.h), but one made by
// vfork, clone or glibc's _Fork does not, and it may live on as a worker. The header names its
// writer (pid, start time, boot id, pid namespace): when that process no longer runs, the lock
// is a descendant's, and the ring is claimed by its rename alone (rename is atomic: one claimer
// wins). A header from before those fields, or from another pid namespace, says nothing; then
// the lock alone decides, as it always did.
//
// Claims use a second lock, apart from the writer's flock: an open-file-description lock on the
// ring's first byte (fcntl F_OFD_SETLK; flock and fcntl locks do not see each other on Linux).
// A claimer holds it from before its rename until it finishes or releases the ring, so a free
// claim lock on `.claimed` means a claimer that died. With the writer's flock doing both jobs,
// a ring claimed by its rename alone (flock held by a descendant, or by a claimer that was about
// to lose the rename race) carried no lock, and a third process took it over mid-processing.
// Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

extension RingDirectory {
  /// A ring left by a process that is gone.
  public struct LeftoverRing: Sendable {
    public var path: String
    public var contents: RingContents
  }

  /// A file moved aside, and why.
  public struct QuarantinedFile: Sendable, Equatable {
    public var originalPath: String
    public var quarantinedPath: String
    public var reason: String
  }

  /// What a scan of `rings/` found.
  public struct Scan: Sendable {
    /// Readable rings whose writer is gone, any state (clean ones included).
    public var leftovers: [LeftoverRing] = []
    /// Files moved to `quarantine/` by this scan.
    public var quarantined: [QuarantinedFile] = []
    /// Files that could not even be moved aside (reported, left in place).
    public var problems: [String] = []
  }

  /// Reads every ring in `rings/` that no live process holds locked. Files that are not
  /// readable rings (foreign, corrupt header, truncated, newer format) are moved to
  /// `quarantine/` with a `.reason` file; nothing is ever deleted here.
  public func leftoverRings() -> Scan {
    var scan = Scan()
    let names: [String]
    do {
      names = try listRings()
    } catch {
      scan.problems.append("cannot list \(ringsPath): \(error)")
      return scan
    }
    for name in names where name.hasSuffix(".ring") {
      let file = ringsPath + "/" + name
      let descriptor: Int32
      do {
        descriptor = try Syscall.openUntrustedFile(file, O_RDONLY)
      } catch {
        if error.refusal != nil {
          do {
            scan.quarantined.append(try quarantine(file, reason: error.description))
          } catch {
            scan.problems.append("cannot quarantine \(file): \(error)")
          }
        } else {
          scan.problems.append("\(error)")
        }
        continue
      }
      defer { Syscall.close(descriptor) }
      // A running writer: its ring is not a leftover.
      guard Self.writerState(descriptor, path: file).gone else { continue }
      do {
        let contents = try RingReader.read(file: file)
        scan.leftovers.append(LeftoverRing(path: file, contents: contents))
      } catch {
        do {
          scan.quarantined.append(try quarantine(file, reason: error.description))
        } catch {
          scan.problems.append("cannot quarantine \(file): \(error)")
        }
      }
    }
    return scan
  }

  /// A leftover ring this process holds: locked and renamed, so no other process takes it.
  public final class ClaimedRing: @unchecked Sendable {
    /// The claimed file (`<session>.ring.claimed`).
    public let path: String
    /// The session file stem: `rings/<session>`; its crash record is `<stem>.crash`.
    public let stem: String
    private var descriptor: Int32

    init(path: String, stem: String, descriptor: Int32) {
      self.path = path
      self.stem = stem
      self.descriptor = descriptor
    }

    /// The crash record that belongs to this ring, if the crash handler made one.
    public var crashRecordPath: String { stem + ".crash" }
    /// The session file that belongs to this ring, if a client wrote one.
    public var sessionFilePath: String { RingDirectory.sessionFilePath(forRing: stem + ".ring") }

    /// Deletes the consumed ring, crash record and session file (their content is in a stored
    /// report, or the session ended cleanly), and any temporary copy of the session file its
    /// writer was making when it died (`<session>.session.json.tmp-<writer>`: a client writes the
    /// file on its background thread just after `start`, which a crash at once can interrupt),
    /// and thread dumps no asker took (`<session>.threads-…`, their temporary copies too), then
    /// releases the lock.
    public func finish() {
      // Unlinked in the rings folder opened without following it (the app may have swapped it
      // for a link to a folder of the same names elsewhere).
      let folder = Syscall.directoryName(of: sessionFilePath)
      if let rings = try? Syscall.openDirectory(folder, beneath: Syscall.directoryName(of: folder)) {
        defer { Syscall.close(rings) }
        let temporaryPrefix = Syscall.baseName(of: sessionFilePath) + ".tmp-"
        let dumpPrefix = Syscall.baseName(of: RingDirectory.threadDumpPrefix(forRing: stem + ".ring"))
        var names = [path, crashRecordPath, sessionFilePath].map(Syscall.baseName)
        for name in (try? Syscall.directoryEntries(of: rings, path: folder)) ?? []
        where name.hasPrefix(temporaryPrefix) || name.hasPrefix(dumpPrefix) {
          names.append(name)
        }
        for name in names { _ = unlinkat(rings, name, 0) }
      }
      release()
    }

    /// Releases the lock without deleting anything (the next start will retry).
    public func release() {
      if descriptor >= 0 { Syscall.close(descriptor) }
      descriptor = -1
    }

    deinit { release() }
  }

  /// Locks and claims every ring whose writer is gone (see the design comment), skipping
  /// `excluding` (this process's own session).
  public func claimLeftovers(excluding: SessionID? = nil) -> (claimed: [ClaimedRing], problems: [String]) {
    var claimed: [ClaimedRing] = []
    var problems: [String] = []
    let names: [String]
    do {
      names = try listRings()
    } catch {
      return ([], ["cannot list \(ringsPath): \(error)"])
    }
    for name in names where name.hasSuffix(".ring" + BreadcrumbRing.creatingSuffix) {
      removeIfAbandoned(ringsPath + "/" + name)
    }
    for name in names where name.hasSuffix(".ring") || name.hasSuffix(".ring.claimed") {
      let stemName = String(name.prefix { $0 != "." })
      if let excluding, stemName == excluding.description { continue }
      // Not a regular file of the folder's owner (a FIFO, a link, a device, a hard link to
      // another user's file): never opened for reading, moved aside with the reason.
      let file = ringsPath + "/" + name
      if let refusal = Self.untrustedRefusal(file) {
        do {
          let moved = try quarantine(file, reason: refusal)
          problems.append("quarantined \(file) to \(moved.quarantinedPath): \(refusal)")
        } catch {
          problems.append("cannot quarantine \(file) (\(refusal)): \(error)")
        }
        continue
      }
      if let ring = Self.claim(name, inRingsFolder: ringsPath, problems: &problems) { claimed.append(ring) }
    }
    return (claimed, problems)
  }

  /// Claims the ring `name` (`.ring` or `.ring.claimed`) of the rings folder `folder` when its
  /// writer is gone (see the design comment) and no other process claims it, and `accepts` (the
  /// claimer's descriptor, read-write, both locks held) agrees; nil otherwise, nothing changed.
  private static func claim(
    _ name: String, inRingsFolder folder: String, problems: inout [String],
    accepts: (Int32, String) -> Bool = { _, _ in true }
  ) -> ClaimedRing? {
    let stemName = String(name.prefix { $0 != "." })
    let file = folder + "/" + name
    // Read-write: the claim lock is a write lock.
    guard let descriptor = try? Syscall.openUntrustedFile(file, O_RDWR) else { return nil }  // raced away
    // The claim lock: held by another description, another process is processing the ring.
    // Free on a `.claimed` ring, its claimer died: the ring is taken over.
    let claimLock: Bool
    do {
      claimLock = try Syscall.tryLockOpenFileDescription(descriptor, path: file)
    } catch {
      problems.append("cannot claim \(file): \(error)")
      claimLock = false
    }
    guard claimLock,
      // It may have come free because its claimer finished the ring (deleted it) or
      // quarantined it (renamed it away) after we opened it: ours would then be a lock on a
      // file that is no longer this entry, and one ring would be processed twice.
      Syscall.pathStillNames(descriptor, file),
      name.hasSuffix(".ring.claimed") || Self.writerState(descriptor, path: file).gone,
      accepts(descriptor, file)
    else {
      Syscall.close(descriptor)  // a running writer, or another process processing it
      return nil
    }
    var claimedPath = file
    if name.hasSuffix(".ring") {
      claimedPath = file + ".claimed"
      do {
        try Syscall.rename(file, to: claimedPath)
      } catch {
        Syscall.close(descriptor)
        if error.errno != .noSuchFileOrDirectory { problems.append("cannot claim \(file): \(error)") }
        return nil
      }
    }
    return ClaimedRing(path: claimedPath, stem: folder + "/" + stemName, descriptor: descriptor)
  }

  /// Deletes, in the rings folder `folder`, the files of every session forked from one of
  /// `parents` (its header's parent session) that ended without a crash: its writer gone (it
  /// exec'd, exited or was killed), its ring not marked crashed and its crash record, if any,
  /// untouched. Such a session is never reported (PostMortemProcessor drops it), but its ring and
  /// crash record (a megabyte and more, reserved on disk) would stay until the next launch, and
  /// a parent that forks and execs all day would fill the disk (ForkedSessionReaper). A crashed
  /// child's files are left for the next launch to report. Returns the paths removed.
  package static func removeEndedChildSessions(inRingsFolder folder: String, parents: [SessionID])
    -> [String]
  {
    guard !parents.isEmpty, let names = try? Syscall.directoryEntries(folder) else { return [] }
    var removed: [String] = []
    var problems: [String] = []
    for name in names where name.hasSuffix(".ring") {
      let file = folder + "/" + name
      // The parent first, without a lock (it never changes): taking the locks of another
      // session's ring, even for a moment, could make a claimer that processes it skip it.
      guard let info = headerInfo(ofFile: file), let parent = info.parentSessionID, parents.contains(parent)
      else { continue }
      let claimed = claim(name, inRingsFolder: folder, problems: &problems) { descriptor, path in
        // Read again now that the writer is known gone: a crash before it ended shows now.
        guard let info = headerInfo(descriptor, path: path), info.state != .crashed else { return false }
        let record = String(path.dropLast(5)) + ".crash"
        return !Syscall.fileExists(record) || CrashRecord.isUntouched(file: record)
      }
      guard let claimed else { continue }
      removed.append(file)
      claimed.finish()
    }
    return removed
  }

  /// Why the file at `path` in `rings/` is not opened at all (Syscall.openUntrustedFile), in
  /// words; nil when it may be, or is gone.
  static func untrustedRefusal(_ path: String) -> String? {
    do {
      Syscall.close(try Syscall.openUntrustedFile(path, O_RDONLY))
      return nil
    } catch {
      return error.refusal.map { "\($0)" }
    }
  }

  /// The header of the ring file at `path`, when it is a readable ring.
  private static func headerInfo(ofFile path: String) -> RingHeaderInfo? {
    guard let descriptor = try? Syscall.openUntrustedFile(path, O_RDONLY) else { return nil }
    defer { Syscall.close(descriptor) }
    return headerInfo(descriptor, path: path)
  }

  static func headerInfo(_ descriptor: Int32, path: String) -> RingHeaderInfo? {
    let header = Int(CRUMBS_RING_HEADER_SIZE + CRUMBS_RING_MAX_LANES * CRUMBS_RING_LANE_SIZE)
    guard let bytes = try? Syscall.read(descriptor, at: 0, count: header, path: path),
      let size = try? Syscall.fileSize(descriptor, path: path),
      let layout = bytes.withUnsafeBytes({ try? RingHeaderValidation.validate($0, availableBytes: size) })
    else { return nil }
    return layout.info
  }

  /// How long a ring may stay under its `.creating` name with its lock free before it counts as
  /// abandoned: its creator locks it right after the O_EXCL open, so a free lock means a creator
  /// killed before the rename, or one between those two calls — never for this long.
  static let abandonedCreationAgeNanoseconds: UInt64 = 60_000_000_000

  /// Deletes `<session>.ring.creating` left by a creator that died before renaming it
  /// (BreadcrumbRing.create): it was never a ring, holds no breadcrumb, and nothing else removes
  /// it. A file whose lock is held, or that is younger than `abandonedCreationAgeNanoseconds`,
  /// is left alone.
  private func removeIfAbandoned(_ file: String) {
    guard let descriptor = try? Syscall.openUntrustedFile(file, O_RDONLY) else { return }
    defer { Syscall.close(descriptor) }
    // Age first: probing the lock of a file its creator has just opened would take the lock
    // from under it, and its own flock would fail.
    guard let modified = try? Syscall.modificationTime(descriptor, path: file),
      SystemClock.wallNanoseconds() > modified &+ Self.abandonedCreationAgeNanoseconds,
      (try? Syscall.tryLockExclusive(descriptor, path: file)) == true
    else { return }
    _ = try? Syscall.unlink(file)
  }

  /// Whether the writer of the ring open at `descriptor` is gone (see the design comment), and
  /// whether we now hold the ring's flock.
  private static func writerState(_ descriptor: Int32, path: String) -> (gone: Bool, locked: Bool) {
    if (try? Syscall.tryLockExclusive(descriptor, path: path)) == true { return (true, true) }
    guard let info = headerInfo(descriptor, path: path) else { return (false, false) }
    // This process wrote it: closed here means gone, whoever holds a copy of the lock.
    let writer = info.writer
    if writer.pid == Syscall.processID(), writer.startTicks == ProcessIdentity.startTicks(of: 0) {
      let open = BreadcrumbRing.openInThisProcess.withLock { $0.contains(info.sessionID) }
      return (!open, false)
    }
    return (writer.liveness == .gone, false)
  }

  /// How many sessions' rings wait in `rings/` (`.ring` and `.ring.claimed` files, running ones
  /// included), not counting `excluding`: one directory listing, nothing opened.
  public func waitingRingCount(excluding: SessionID? = nil) -> Int {
    let names = (try? listRings()) ?? []
    let own = excluding?.description
    return names.filter { name in
      (name.hasSuffix(".ring") || name.hasSuffix(".ring.claimed")) && String(name.prefix { $0 != "." }) != own
    }.count
  }

  /// Removes the temporary files (`*.tmp-<writer>`: session files, quarantine reasons) that
  /// writers killed mid-write left in `rings/` and `quarantine/`, when their writer is gone
  /// (AbandonedFiles). Returns the paths removed.
  @discardableResult
  public func removeAbandonedTemporaryFiles() -> [String] {
    AbandonedFiles.removeTemporaryFiles(inFolder: ringsPath, beneath: path)
      + AbandonedFiles.removeTemporaryFiles(inFolder: quarantinePath, beneath: path)
  }

  /// The names in `rings/`, opened beneath the Crumbs directory without following a link.
  func listRings() throws(SystemCallError) -> [String] {
    let rings = try Syscall.openDirectory(ringsPath, beneath: path)
    defer { Syscall.close(rings) }
    return try Syscall.directoryEntries(of: rings, path: ringsPath)
  }

  /// Moves `file` into `quarantine/` (keeping its name, made unique) with a `.reason` file.
  @discardableResult
  public func quarantine(_ file: String, reason: String) throws(SystemCallError) -> QuarantinedFile {
    let destination = try Quarantine.move(file, into: quarantinePath, reason: reason, beneath: path)
    return QuarantinedFile(originalPath: file, quarantinedPath: destination, reason: reason)
  }
}
