// FolderSizesTests.swift — the report folders' sizes enforceLimits remembers (FolderSizes): used
// while a folder is unchanged, measured again once another process (another ReportStore on the
// same directory, or plain file calls) adds or removes a file or a report, and never remembered
// for a folder changed too recently to be told apart by its ctime.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct FolderSizesTests {
  /// A store whose cache remembers a folder at once (no settling time), as after it settled.
  func store(_ directory: TestDirectory) throws -> ReportStore {
    var store = try ReportStore(directory: directory.path, limits: .unlimited)
    store.folderSizes = FolderSizes(settledNanoseconds: 0)
    return store
  }

  /// Writes `bytes` bytes into `file` of `folder` the way another process would (the store is not
  /// told), then, should the change have kept the folder's ctime (two changes within one tick of
  /// a coarse file clock), adds and removes a scratch file until the ctime moves: an event to
  /// wait on, not a sleep.
  func change(_ folder: String, from before: Syscall.EntryStatus, _ body: () -> Void) {
    body()
    let started = SystemClock.monotonicNanoseconds()
    while Syscall.status(ofPath: folder)?.changedNanoseconds == before.changedNanoseconds,
      SystemClock.monotonicNanoseconds() - started < 30_000_000_000
    {
      let scratch = folder + "/.scratch"
      _ = try? Syscall.writeFileAtomically(scratch, [])
      _ = unlink(scratch)
    }
  }

  func write(_ path: String, count: Int) {
    #expect((try? Syscall.writeFileAtomically(path, [UInt8](repeating: 0x41, count: count))) != nil)
  }

  @Test func aFolderChangedByAnotherProcessIsMeasuredAgain() throws {
    let directory = TestDirectory()
    let store = try store(directory)
    let report = CrashReport.sample(id: SessionID().description, observed: 1_000)
    try store.store(report, attachments: [("big.bin", [UInt8](repeating: 1, count: 300_000))])
    let folder = store.folder(.pending) + "/" + report.id
    let measured = store.size(of: report.id, in: .pending)
    #expect(measured > 300_000)
    #expect(store.folderSizes.count == 1, "remembered once measured")
    #expect(store.size(of: report.id, in: .pending) == measured)

    // Added: 700 kB more, so the store is over a 1 MB limit only if the change is seen.
    let before = try #require(Syscall.status(ofPath: folder))
    change(folder, from: before) { write(folder + "/added.bin", count: 700_000) }
    #expect(store.size(of: report.id, in: .pending) == measured + 700_000)
    let evicted = store.enforceLimits(StoreLimits(maxRecordCount: 0, maxDatabaseSize: 1))
    #expect(evicted.map(\.reportID) == [report.id], "the added file counted: over 1 MB")
  }

  @Test func aFileRemovedByAnotherProcessIsNoLongerCounted() throws {
    let directory = TestDirectory()
    let store = try store(directory)
    let report = CrashReport.sample(id: SessionID().description, observed: 1_000)
    try store.store(report, attachments: [("big.bin", [UInt8](repeating: 1, count: 1_200_000))])
    let folder = store.folder(.pending) + "/" + report.id
    let measured = store.size(of: report.id, in: .pending)
    #expect(measured > 1_200_000)
    let before = try #require(Syscall.status(ofPath: folder))
    change(folder, from: before) { _ = unlink(folder + "/big.bin") }
    #expect(store.size(of: report.id, in: .pending) == measured - 1_200_000)
    #expect(store.enforceLimits(StoreLimits(maxRecordCount: 0, maxDatabaseSize: 1)).isEmpty, "under 1 MB now")
  }

  @Test func aReportStoredByAnotherStoreIsCounted() throws {
    let directory = TestDirectory()
    let store = try store(directory)
    let first = CrashReport.sample(id: SessionID().description, observed: 1_000)
    try store.store(first, attachments: [("big.bin", [UInt8](repeating: 1, count: 600_000))])
    #expect(store.enforceLimits(StoreLimits(maxRecordCount: 0, maxDatabaseSize: 1)).isEmpty)
    #expect(store.folderSizes.count == 1)
    // Another process's store, its own cache: the first store is not told.
    let other = try ReportStore(directory: directory.path, limits: .unlimited)
    let second = CrashReport.sample(id: SessionID().description, observed: 2_000)
    try other.store(second, attachments: [("big.bin", [UInt8](repeating: 1, count: 600_000))])
    let evicted = store.enforceLimits(StoreLimits(maxRecordCount: 0, maxDatabaseSize: 1))
    #expect(evicted.map(\.reportID) == [first.id], "both counted: over 1 MB, the older one goes")
    // The evicted report (moved to dropped/, its attachment removed) is forgotten in pending/.
    #expect(store.size(of: first.id, in: .pending) == 0)
    #expect(store.size(of: first.id, in: .dropped) < 10_000)
  }

  @Test func aFolderChangedJustBeforeItWasListedIsNotRemembered() throws {
    let directory = TestDirectory()
    // A settling time of an hour: whatever this test made is too recent to trust.
    var store = try ReportStore(directory: directory.path, limits: .unlimited)
    store.folderSizes = FolderSizes(settledNanoseconds: 3_600_000_000_000)
    let report = CrashReport.sample(id: SessionID().description, observed: 1_000)
    try store.store(report)
    #expect(store.size(of: report.id, in: .pending) > 0)
    #expect(store.folderSizes.count == 0)
  }
}
