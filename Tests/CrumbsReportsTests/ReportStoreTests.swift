// ReportStoreTests.swift — the on-disk report database with real files: folders made 0700,
// reports stored whole (never half), listed oldest first, loaded by id or prefix, moved between
// states by rename, and damaged folders quarantined with their reason, never deleted.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ReportStoreTests {
  static func report(id: String = SessionID().description, observed: UInt64 = 1_000) -> CrashReport {
    CrashReport.sample(id: id, observed: observed)
  }

  func entries(_ path: String) -> [String] { (try? Syscall.directoryEntries(path)) ?? [] }

  @Test func openingMakesThePrivateStateFolders() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.file("app"))
    #expect(store.path == directory.file("app") + "/reports")
    #expect(entries(store.path) == [".incoming", "dropped", "pending", "quarantine", "sent"])
    for name in entries(store.path) { #expect(fileMode(of: store.path + "/" + name) == 0o700, "\(name)") }
    // Opening again keeps what is there.
    let report = Self.report()
    try store.store(report)
    _ = try ReportStore(directory: directory.file("app"))
    #expect(store.contains(id: report.id))
  }

  @Test func aStoredReportIsAWholeFolderInPending() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let report = Self.report()
    let stored = try store.store(
      report, attachments: [("trail.bin", [1, 2, 3]), ("notes.txt", Array("hi".utf8))])
    #expect(stored.state == .pending)
    #expect(stored.path == store.path + "/pending/" + report.id)
    #expect(entries(stored.path) == ["index.txt", "notes.txt", "report.json", "trail.bin"])
    #expect(try Syscall.readFile(stored.attachmentPath("trail.bin")) == [1, 2, 3])
    #expect(try ReportStore.decode(try Syscall.readFile(stored.reportPath)) == report)
    #expect(fileMode(of: stored.reportPath) == 0o600)
    // Nothing left half-written behind.
    #expect(entries(store.path + "/.incoming").isEmpty)
    #expect(store.contains(id: report.id))
    #expect(!store.contains(id: SessionID().description))
  }

  @Test func storingTheSameIdTwiceKeepsTheFirstInWhateverStateItIs() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let report = Self.report()
    try store.store(report, attachments: [("a.bin", [1])])
    try store.move(id: report.id, from: .pending, to: .sent)
    var again = report
    again.exceptionMessage = "processed twice"
    let second = try store.store(again, attachments: [("b.bin", [2])])
    #expect(second.state == .sent)
    #expect(entries(store.folder(.pending)).isEmpty)
    #expect(entries(store.folder(.sent) + "/" + report.id) == ["a.bin", "index.txt", "report.json"])
    #expect(try store.load(id: report.id).report.exceptionMessage == "SEGV_MAPERR at 0x0")
  }

  @Test func listIsOldestFirstAndLoadTakesAnIdOrAUniquePrefix() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let reports = [
      Self.report(id: "cccc-3", observed: 3_000), Self.report(id: "aaaa-1", observed: 1_000),
      Self.report(id: "bbbb-2", observed: 2_000),
    ]
    for report in reports { try store.store(report) }
    let listing = store.list(.pending)
    #expect(listing.reports.map(\.report.id) == ["aaaa-1", "bbbb-2", "cccc-3"])
    #expect(listing.reports.allSatisfy { $0.state == .pending })
    #expect(listing.quarantined.isEmpty)
    #expect(store.list(.sent).reports.isEmpty)

    #expect(try store.load(id: "bbbb-2").report == reports[2])
    #expect(try store.load(id: "cc").report.id == "cccc-3")
    #expect(throws: ReportStoreError.notFound("dddd")) { try store.load(id: "dddd") }
  }

  @Test func moveChangesStateByRenameAndSaysWhenThereIsNothingToMove() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let report = Self.report()
    try store.store(report, attachments: [("a.bin", [9])])
    let sent = try store.move(id: report.id, from: .pending, to: .sent)
    #expect(sent == store.folder(.sent) + "/" + report.id)
    #expect(!Syscall.fileExists(store.folder(.pending) + "/" + report.id))
    #expect(try Syscall.readFile(sent + "/a.bin") == [9])
    let loaded = try store.load(id: report.id)
    #expect(loaded.state == .sent && loaded.path == sent && loaded.report == report)
    #expect(store.list(.pending).reports.isEmpty)
    #expect(store.list(.sent).reports.map(\.report.id) == [report.id])

    try store.move(id: report.id, from: .sent, to: .dropped)
    #expect(try store.load(id: report.id).state == .dropped)
    #expect(throws: ReportStoreError.notFound(report.id)) {
      try store.move(id: report.id, from: .pending, to: .sent)
    }
  }

  @Test func aReportNamingAFileOutsideItsFolderIsQuarantinedNeverRead() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.file("app"))
    let secret = directory.file("secret.txt")
    try Syscall.writeFileAtomically(secret, Array("do not send".utf8))
    for (index, name) in ["../../../secret.txt", "..", "", "a/b"].enumerated() {
      var report = Self.report(id: "tampered-\(index)")
      report.attachments = [.init(name: name, contentType: "text/plain", size: 11)]
      let folder = store.folder(.pending) + "/" + report.id
      try Syscall.makeDirectory(folder)
      try Syscall.writeFileAtomically(folder + "/report.json", try ReportStore.encode(report))
    }
    var trailEscape = Self.report(id: "tampered-trail")
    trailEscape.breadcrumbs.attachment = "../../../secret.txt"
    try Syscall.makeDirectory(store.folder(.pending) + "/tampered-trail")
    try Syscall.writeFileAtomically(
      store.folder(.pending) + "/tampered-trail/report.json", try ReportStore.encode(trailEscape))

    #expect(
      performing: { try store.load(id: "tampered-0") },
      throws: { "\($0)".contains("leaves the report folder") })
    let listing = store.list(.pending)
    #expect(listing.reports.isEmpty, "\(listing.reports.map(\.report.id))")
    #expect(listing.quarantined.count == 5)
    #expect(Syscall.fileExists(secret), "the file outside is untouched")
    for moved in listing.quarantined {
      let reason = try Syscall.readFile(moved + ".reason")
      #expect(String(decoding: reason, as: UTF8.self).contains("leaves the report folder"))
    }
  }

  @Test func aDamagedFolderIsQuarantinedWithItsReasonAndItsBytesKept() throws {
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let good = Self.report(observed: 5_000)
    try store.store(good)
    // A report.json cut short, and a folder with no report.json at all.
    let cut = store.folder(.pending) + "/cut-report"
    try Syscall.makeDirectory(cut)
    let cutBytes = Array(try ReportStore.encode(Self.report(id: "cut-report")).prefix(40))
    try Syscall.writeFileAtomically(cut + "/report.json", cutBytes)
    try Syscall.writeFileAtomically(cut + "/trail.bin", [7, 7])
    let empty = store.folder(.pending) + "/empty-folder"
    try Syscall.makeDirectory(empty)

    // Loading the damaged one by id says why, and moves nothing.
    #expect(
      performing: { try store.load(id: "cut-report") },
      throws: {
        guard case .encoding(let reason) = $0 as? ReportStoreError else { return false }
        return reason.hasPrefix(cut + "/report.json: ")
      })
    #expect(Syscall.fileExists(cut))

    let listing = store.list(.pending)
    #expect(listing.reports.map(\.report.id) == [good.id])
    let quarantine = store.path + "/quarantine"
    #expect(Set(listing.quarantined) == [quarantine + "/cut-report", quarantine + "/empty-folder"])
    #expect(!Syscall.fileExists(cut) && !Syscall.fileExists(empty))
    #expect(try Syscall.readFile(quarantine + "/cut-report/report.json") == cutBytes)
    #expect(try Syscall.readFile(quarantine + "/cut-report/trail.bin") == [7, 7])
    for moved in listing.quarantined {
      let reason = String(decoding: try Syscall.readFile(moved + ".reason"), as: UTF8.self)
      #expect(reason.hasPrefix("unreadable report: "), "\(reason)")
      #expect(reason.hasSuffix("\n") && reason.dropLast().allSatisfy { $0 != "\n" }, "one line: \(reason)")
    }
    // A second folder of the same name later does not overwrite the first in quarantine.
    try Syscall.makeDirectory(empty)
    #expect(store.list(.pending).quarantined == [quarantine + "/empty-folder.2"])
    #expect(store.list(.pending).reports.map(\.report.id) == [good.id])
  }
}
