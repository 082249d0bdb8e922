// FolderSizes.swift — the bytes of each report folder, remembered while the folder is unchanged,
// so that `enforceLimits` (after every store) stats one entry per report instead of opening,
// listing and stat'ing every file of every stored report (0.2–0.4 ms per store with 50 reports,
// growing with the store).
//
// A folder's size is trusted while the folder is the same one (device and inode) with the same
// ctime: adding, removing or renaming a file in it (a report stored, an attachment evicted,
// delivery.json rewritten by temp + rename, whichever process does it) changes its ctime. A file
// rewritten in place without a rename would not; nothing writes a report's files so (they are
// written once in `.incoming`, or replaced by rename).
//
// Timestamps are coarse (the kernel stamps a change with its tick clock, up to 10 ms behind the
// wall clock): two changes within one tick may leave the same ctime. A size is therefore only
// remembered for a folder whose ctime was already more than `settledNanoseconds` old when its
// files were listed (as git treats "racily clean" index entries): any later change stamps a
// ctime that differs. A just-stored report is measured again until it has settled.
//
// One cache per ReportStore value and its copies (a class shared by them); it lives in memory
// only: a new process measures each folder once. Not signal-safe.

import CrumbsPlatform
import Synchronization

/// Report folders' sizes, keyed by their path below the store, each with what the folder's
/// status was when it was measured.
final class FolderSizes: Sendable {
  /// How old a folder's ctime must be, when its files are listed, for the size to be remembered
  /// (tests make it 0, and then change a folder until its ctime differs).
  let settledNanoseconds: UInt64

  struct Entry: Equatable {
    var folder: Syscall.EntryStatus.FileID
    var changedNanoseconds: UInt64
    var bytes: Int
  }

  private let entries = Mutex<[String: Entry]>([:])

  init(settledNanoseconds: UInt64 = 100_000_000) { self.settledNanoseconds = settledNanoseconds }

  /// The remembered size of `key` if `status` (the folder's, now) is what it was when measured.
  func bytes(_ key: String, status: Syscall.EntryStatus) -> Int? {
    entries.withLock { entries in
      guard let entry = entries[key], entry.folder == status.fileID,
        entry.changedNanoseconds == status.changedNanoseconds
      else { return nil }
      return entry.bytes
    }
  }

  /// Remembers `bytes` for `key`, measured from a listing started at `listedAtNanoseconds`
  /// (wall clock), when the folder had settled by then; else forgets any earlier size.
  func remember(_ key: String, status: Syscall.EntryStatus, bytes: Int, listedAtNanoseconds: UInt64) {
    let settled =
      listedAtNanoseconds > settledNanoseconds
      && status.changedNanoseconds < listedAtNanoseconds - settledNanoseconds
    entries.withLock { entries in
      if settled {
        entries[key] = Entry(
          folder: status.fileID, changedNanoseconds: status.changedNanoseconds, bytes: bytes)
      } else {
        entries[key] = nil
      }
    }
  }

  /// Forgets the folders of one state that are not in `names` (reports moved or deleted).
  func keep(only names: Set<String>, prefix: String) {
    entries.withLock { entries in
      entries = entries.filter { key, _ in
        !key.hasPrefix(prefix) || names.contains(String(key.dropFirst(prefix.count)))
      }
    }
  }

  /// How many sizes are remembered (tests).
  var count: Int { entries.withLock { $0.count } }
}
