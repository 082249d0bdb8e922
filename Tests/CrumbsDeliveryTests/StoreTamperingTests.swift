// StoreTamperingTests.swift — symbolic links put into the report store (issue 11, item 12): a
// linked report folder, a linked report.json, a linked attachment, a linked state folder. Each
// goes through listing, delivery to a real loopback server and eviction; nothing outside the
// Crumbs directory is read, sent, written or removed, and the entry is quarantined with its
// reason.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct StoreTamperingTests {
  static let precious = Array("precious: never read, sent or removed by Crumbs\n".utf8)

  /// A place outside the Crumbs directory with a precious file, and what it held at first.
  struct Outside {
    let directory = TestDirectory()
    var precious: String { directory.file("precious.txt") }

    init() throws {
      try Syscall.writeFileAtomically(precious, StoreTamperingTests.precious)
    }

    /// Everything in it (names and bytes), to compare before and after.
    func contents() -> [String: [UInt8]] {
      var found: [String: [UInt8]] = [:]
      func walk(_ path: String, _ prefix: String) {
        for name in (try? Syscall.directoryEntries(path)) ?? [] {
          let child = path + "/" + name
          if Syscall.isDirectory(child) {
            walk(child, prefix + name + "/")
          } else {
            found[prefix + name] = (try? Syscall.readFile(child)) ?? []
          }
        }
      }
      walk(directory.path, "")
      return found
    }
  }

  func link(_ target: String, at path: String) throws {
    try #require(symlink(target, path) == 0, "symlink: errno \(errno)")
  }

  func quarantineReasons(_ store: ReportStore) -> [String] {
    let folder = store.path + "/quarantine"
    return ((try? Syscall.directoryEntries(folder)) ?? []).filter { $0.hasSuffix(".reason") }.map {
      String(decoding: (try? Syscall.readFile(folder + "/" + $0)) ?? [], as: UTF8.self)
    }
  }

  /// A copy of the fixture's report with a new id, as a folder at `folder` (report.json, the
  /// trail, and a large `blob.bin` so that it is worth evicting), plus `precious.txt`.
  func victim(from fixture: ReportFixture, at folder: String, blobBytes: Int = 1_500_000) throws
    -> CrashReport
  {
    var report = fixture.reports[0].report
    report.id = SessionID().description
    report.sessionID = report.id
    report.attachments.append(
      .init(name: "blob.bin", contentType: "application/octet-stream", size: blobBytes))
    try Syscall.makeDirectory(folder)
    try Syscall.writeFileAtomically(folder + "/report.json", try ReportStore.encode(report))
    try Syscall.writeFileAtomically(
      folder + "/" + TrailAttachment.name,
      try fixture.reports[0].readFile(TrailAttachment.name, limit: 1 << 20))
    try Syscall.writeFileAtomically(folder + "/blob.bin", [UInt8](repeating: 1, count: blobBytes))
    try Syscall.writeFileAtomically(folder + "/precious.txt", Self.precious)
    return report
  }

  @Test func aLinkedReportFolderIsNeverReadSentWrittenOrEmptied() throws {
    let fixture = try ReportFixture()
    let outside = try Outside()
    let report = try victim(from: fixture, at: outside.directory.file("victim"))
    let before = outside.contents()
    let linkPath = fixture.store.folder(.pending) + "/" + report.id
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }

    // Delivery (the pass lists, evicts to 1 MB, then sends), then a plain eviction, each with
    // the link in place.
    try link(outside.directory.file("victim"), at: linkPath)
    var limited = fixture.store
    limited.limits.maxDatabaseSize = 1
    let uploader = ReportUploader(
      store: limited, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings())
    let pass = uploader.deliverPendingNow()
    #expect(pass.quarantined.count == 1)
    if !Syscall.fileExists(linkPath) { try link(outside.directory.file("victim"), at: linkPath) }
    uploader.enforceLimits()
    _ = fixture.store.list(.pending)

    #expect(outside.contents() == before, "something outside the Crumbs directory changed")
    #expect(!server.requests.compactMap(reportID(ofOTLP:)).contains(report.id))
    #expect(server.requests.compactMap(reportID(ofOTLP:)) == [fixture.ids[0]])
    let reasons = quarantineReasons(fixture.store)
    #expect(reasons.count == 2)
    #expect(reasons.allSatisfy { $0.contains("symbolic link") }, "\(reasons)")
    // Quarantined as what it is: the link itself, moved, still pointing where it did.
    let moved = fixture.store.path + "/quarantine/" + report.id
    #expect(Syscall.readLink(moved) == outside.directory.file("victim"))
  }

  @Test func aLinkedReportFileOrAttachmentInARealFolderIsNeverFollowed() throws {
    let fixture = try ReportFixture()
    let outside = try Outside()
    // One folder whose report.json is a link to a report outside; one whose attachment is a
    // link to the precious file.
    let linkedJSON = try victim(from: fixture, at: outside.directory.file("elsewhere"))
    let jsonFolder = fixture.store.folder(.pending) + "/" + linkedJSON.id
    try Syscall.makeDirectory(jsonFolder)
    try link(outside.directory.file("elsewhere/report.json"), at: jsonFolder + "/report.json")
    var linkedAttachment = fixture.reports[0].report
    linkedAttachment.id = SessionID().description
    linkedAttachment.attachments = [.init(name: "notes.txt", contentType: "text/plain", size: 10)]
    let attachmentFolder = fixture.store.folder(.pending) + "/" + linkedAttachment.id
    try Syscall.makeDirectory(attachmentFolder)
    try Syscall.writeFileAtomically(
      attachmentFolder + "/report.json", try ReportStore.encode(linkedAttachment))
    try link(outside.precious, at: attachmentFolder + "/notes.txt")
    let before = outside.contents()

    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    var limited = fixture.store
    limited.limits.maxDatabaseSize = 1
    let uploader = ReportUploader(
      store: limited, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings())
    uploader.deliverPendingNow()
    uploader.enforceLimits()

    #expect(outside.contents() == before)
    #expect(server.requests.compactMap(reportID(ofOTLP:)) == [fixture.ids[0]])
    for request in server.requests {
      #expect(request.body.firstRange(of: Self.precious) == nil, "the precious file was sent")
    }
    #expect(Syscall.fileExists(fixture.store.path + "/quarantine/" + linkedJSON.id))
    #expect(Syscall.fileExists(fixture.store.path + "/quarantine/" + linkedAttachment.id))
    let reasons = quarantineReasons(fixture.store)
    #expect(reasons.contains { $0.contains("report.json is a symbolic link") }, "\(reasons)")
    #expect(reasons.contains { $0.contains("notes.txt is a symbolic link") }, "\(reasons)")
  }

  @Test func aLinkedStateFolderIsMovedAsideNeverListed() throws {
    let fixture = try ReportFixture()
    let outside = try Outside()
    // pending/ itself is a link to a folder of reports outside.
    let foreign = outside.directory.file("pending")
    try Syscall.makeDirectory(foreign)
    let report = try victim(from: fixture, at: foreign + "/" + SessionID().description, blobBytes: 10)
    try Syscall.rename(fixture.store.folder(.pending), to: fixture.directory.file("old-pending"))
    try link(foreign, at: fixture.store.folder(.pending))
    let before = outside.contents()

    let store = try ReportStore(directory: fixture.directory.path)
    #expect(Syscall.status(ofPath: store.folder(.pending))?.kind == .directory)
    #expect(store.list(.pending).reports.isEmpty)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    ReportUploader(store: store, destinations: [OTLPDestination(endpoint: server.baseURL)])
      .deliverPendingNow()
    #expect(!server.requests.compactMap(reportID(ofOTLP:)).contains(report.id))
    #expect(outside.contents() == before)
    #expect(quarantineReasons(store).contains { $0.contains("pending/ was a symbolic link") })
  }

  @Test func aLinkInPlaceOfTheDeliveryLockIsReplacedNeverFollowed() throws {
    let fixture = try ReportFixture()
    let outside = try Outside()
    // A dangling link: opening it with O_CREAT would create the file it names, outside.
    let target = outside.directory.file("created-by-crumbs")
    try link(target, at: fixture.store.path + "/.delivery.lock")
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let pass = ReportUploader(store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)])
      .deliverPendingNow()
    #expect(!pass.lockBusy)
    #expect(!Syscall.fileExists(target))
    #expect(Syscall.status(ofPath: fixture.store.path + "/.delivery.lock")?.kind == .regular)
    #expect(server.requests.compactMap(reportID(ofOTLP:)) == [fixture.ids[0]])
  }
}
