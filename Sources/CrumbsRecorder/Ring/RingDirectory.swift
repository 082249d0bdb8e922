// RingDirectory.swift — where rings live, and what happens to files that are not good rings.
//
// Layout of a Crumbs directory (created 0700):
//   rings/<session-id>.ring       one per process instance, 0600, flock'ed by its writer
//   rings/<session-id>.ring.creating   a ring being made (BreadcrumbRing.create), never read or
//                                 claimed; removed once abandoned (lock free, a minute old)
//   rings/<session-id>.crash      its crash record (CrashHandler)
//   rings/<session-id>.session.json   what the session said about itself (CrumbsClient)
//   rings/<session-id>.threads-<cookie>.json   a dump of its threads, answering the request
//                                 `cookie` of `crumbs threads PID` (0600; the asker deletes it
//                                 once read, the client at close, the next launch with the ring)
//   quarantine/<name>             files that could not be read as rings, moved aside (the newest
//                                 kept: Quarantine.maxItems)
//   quarantine/<name>.reason      one line: why
//
// Entry points, in call order:
//   RingDirectory(path:)          create the folders if missing
//   createRing(options:)          a new ring for this process
//   sessionFilePath(forRing:)     where the client keeps what the session said about itself
// What the next launch does with the rings of earlier processes (leftoverRings, claimLeftovers,
// ClaimedRing.finish, removeEndedChildSessions, quarantine) is RingDirectory+Leftovers.swift
// (Reading/). Not signal-safe.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// A Crumbs directory: rings of this and earlier processes, and quarantined files.
public struct RingDirectory: Sendable {
  /// The directory.
  public let path: String
  /// `path/rings`.
  public var ringsPath: String { path + "/" + Self.ringsFolderName }
  /// `path/quarantine`.
  public var quarantinePath: String { path + "/" + Self.quarantineFolderName }

  /// The two folder names the recorder makes in a Crumbs directory, spelled here only: the
  /// recorder cannot see the client's `CrumbsDirectory`, which names every other file there and
  /// takes these two from here.
  package static let ringsFolderName = "rings"
  package static let quarantineFolderName = "quarantine"

  /// Opens (creating, mode 0700) a Crumbs directory. A relative `path` is made absolute now, so
  /// a later chdir moves nothing (ring, crash record and a forked child's files are named from it).
  public init(path: String) throws(SystemCallError) {
    self.path = Syscall.absolutePath(path)
    try Syscall.makeDirectories(path)
    try Syscall.makeDirectory(ringsPath)
    try Syscall.makeDirectory(quarantinePath)
  }

  /// Creates a new ring for this process in `rings/`.
  public func createRing(options: RingOptions = RingOptions()) throws(RingCreationError)
    -> BreadcrumbRing
  {
    try createRing(options: options, cgroupLater: false)
  }

  /// `createRing`, leaving the cgroup facts to `BreadcrumbRing.recordCgroup()` when `cgroupLater`.
  package func createRing(options: RingOptions, cgroupLater: Bool) throws(RingCreationError)
    -> BreadcrumbRing
  {
    let sessionID = SessionID()
    return try BreadcrumbRing.create(
      at: ringsPath + "/\(sessionID).ring", options: options, sessionID: sessionID,
      cgroupLater: cgroupLater)
  }

  /// The answer to the thread-dump request `cookie` for a ring file: `x.ring` →
  /// `x.threads-<cookie, 8 hex digits>.json`.
  public static func threadDumpPath(forRing ringPath: String, cookie: UInt32) -> String {
    let hex = String(cookie, radix: 16)
    return threadDumpPrefix(forRing: ringPath) + String(repeating: "0", count: 8 - hex.count) + hex + ".json"
  }

  /// What every thread-dump answer of a ring file starts with: `x.ring` → `x.threads-`.
  public static func threadDumpPrefix(forRing ringPath: String) -> String {
    (ringPath.hasSuffix(".ring") ? String(ringPath.dropLast(5)) : ringPath) + ".threads-"
  }

  /// The session file that belongs to a ring file: `x.ring` → `x.session.json`.
  public static func sessionFilePath(forRing ringPath: String) -> String {
    (ringPath.hasSuffix(".ring") ? String(ringPath.dropLast(5)) : ringPath) + ".session.json"
  }
}
