// RingDirectoryLinkSwapTests.swift — a hostile app swaps a folder of its Crumbs directory for a
// symbolic link while a processor (its next launch, or `crumbs collect` as root) works there:
// nothing outside the Crumbs directory may be deleted (issue 35, case 2). Real symbolic links
// and a real renameat2(RENAME_EXCHANGE) loop on another thread; the victim folder's files are
// counted before and after.

import CrumbsPlatform
import CrumbsTestSupport
import CrumbsTestSupportC
import Foundation
import Synchronization
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct RingDirectoryLinkSwapTests {
  /// A folder outside the Crumbs directory holding `count` files, the oldest first.
  func victimFolder(_ scratch: TestDirectory, count: Int = 40) throws -> String {
    let victim = scratch.file("victim")
    try Syscall.makeDirectory(victim)
    for index in 0..<count {
      let file = victim + "/precious-\(index)"
      try Syscall.writeFileAtomically(file, Array("keep me \(index)\n".utf8), durable: false)
      let time = timespec(tv_sec: 1_000_000 + index, tv_nsec: 0)
      #expect(utimensat(AT_FDCWD, file, [time, time], 0) == 0)
    }
    return victim
  }

  func fileCount(_ folder: String) -> Int { ((try? Syscall.directoryEntries(folder)) ?? []).count }

  /// Deterministic: quarantine/ is already a link to the victim folder when the trim runs.
  @Test func trimRefusesAQuarantineFolderThatIsALink() throws {
    let scratch = TestDirectory()
    let directory = try RingDirectory(path: scratch.file("crumbs"))
    let victim = try victimFolder(scratch)
    try Syscall.rename(directory.quarantinePath, to: directory.quarantinePath + "-real")
    #expect(symlink(victim, directory.quarantinePath) == 0)

    let deleted = Quarantine.trim(directory.quarantinePath)
    print("victim folder: 40 files before the trim, \(fileCount(victim)) after")
    #expect(deleted.isEmpty, "deleted through the link: \(deleted)")
    #expect(fileCount(victim) == 40)
  }

  /// A path below the Crumbs directory that climbs out of it with `..` is refused before any
  /// open, as a link on the way is.
  @Test func openingBeneathTheDirectoryRefusesDotDot() throws {
    let scratch = TestDirectory()
    let directory = try RingDirectory(path: scratch.file("crumbs"))
    _ = try victimFolder(scratch)
    #expect(throws: SystemCallError.self) {
      Syscall.close(try Syscall.openDirectory(directory.ringsPath + "/../../victim", beneath: directory.path))
    }
    #expect(symlink(scratch.path, directory.path + "/up") == 0)
    #expect(throws: SystemCallError.self) {
      Syscall.close(try Syscall.openDirectory(directory.path + "/up/victim", beneath: directory.path))
    }
  }

  /// A ring, crash record or session file is opened in rings/ opened without following a link:
  /// with rings/ swapped for a link to a folder of the same owner, the file behind it (a regular
  /// file of that owner, which the owner check alone would pass) is not opened.
  @Test func anUntrustedFileIsNotOpenedThroughALinkInPlaceOfItsFolder() throws {
    let scratch = TestDirectory()
    let directory = try RingDirectory(path: scratch.file("crumbs"))
    let victim = try victimFolder(scratch, count: 1)
    try Syscall.writeFileAtomically(victim + "/x.ring", Array("not the app's\n".utf8), durable: false)
    Syscall.close(try Syscall.openUntrustedFile(victim + "/x.ring", O_RDONLY))  // a file it would open
    #expect(rmdir(directory.ringsPath) == 0)
    #expect(symlink(victim, directory.ringsPath) == 0)
    #expect(throws: SystemCallError.self) {
      Syscall.close(try Syscall.openUntrustedFile(directory.ringsPath + "/x.ring", O_RDONLY))
    }
  }

  /// The race: another thread exchanges quarantine/ with a link to the victim folder as fast as
  /// it can (a bounded number of times) while bad rings are quarantined, each move trimming a
  /// full quarantine folder. Not one victim file may go.
  @Test func quarantiningWhileTheFolderIsSwappedForALinkDeletesNothingOutside() throws {
    let scratch = TestDirectory()
    let directory = try RingDirectory(path: scratch.file("crumbs"))
    let victim = try victimFolder(scratch)
    // A full quarantine folder: every move after these trims one.
    for index in 0..<Quarantine.maxItems {
      let bad = directory.ringsPath + "/full-\(index).ring"
      try Syscall.writeFileAtomically(bad, [UInt8](repeating: 0x78, count: 64), durable: false)
      try directory.quarantine(bad, reason: "filler \(index)")
    }
    #expect(symlink(victim, directory.path + "/swap") == 0)
    let root = try Syscall.open(directory.path, O_RDONLY | O_DIRECTORY)
    defer { Syscall.close(root) }

    let exchanges: UInt64 = 200_000  // even: every name ends as it began
    let result = Mutex<Int64?>(nil)
    let finished = Atomic<Bool>(false)
    Thread.detachNewThread {
      let done = crumbs_test_exchange_loop(root, "quarantine", "swap", exchanges)
      result.withLock { $0 = done }
      finished.store(true, ordering: .releasing)
    }
    var moves = 0
    var refused = 0
    // Bounded by a count too: the swapper's loop ends on its own, this one at most 20,000 times.
    for index in 0..<20_000 where !finished.load(ordering: .acquiring) {
      let bad = directory.ringsPath + "/bad-\(index).ring"
      try Syscall.writeFileAtomically(bad, [UInt8](repeating: 0x78, count: 64), durable: false)
      do {
        try directory.quarantine(bad, reason: "not a ring")
        moves += 1
      } catch {
        refused += 1
        try? Syscall.unlink(bad)
      }
    }
    while !finished.load(ordering: .acquiring) { sched_yield() }
    let done = result.withLock { $0 } ?? -1
    guard done >= 0 else {
      print("skipped: renameat2(RENAME_EXCHANGE) is not available here (errno \(errno))")
      return
    }
    print(
      "link swap: \(done) exchanges, \(moves) moves, \(refused) refused; victim folder: 40 files before, "
        + "\(fileCount(victim)) after")
    #expect(done == Int64(exchanges), "every exchange worked, so quarantine/ is itself again")
    #expect(Syscall.status(ofPath: directory.quarantinePath)?.kind == .directory)
    #expect(fileCount(victim) == 40, "files outside the Crumbs directory were deleted")
  }
}
