// SessionAttachmentTrustTests.swift — who may open the files a session file names (issue 35,
// case 1). The next launch of the app's own user attaches them as named; a processor running
// under another user than the session file's owner (here root, over a Crumbs directory a real
// second user owns) attaches only that user's regular files below the Crumbs directory, and
// nobody reads /proc/self after the fact. Real files, a real second uid (useradd), real chown.

import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct SessionAttachmentTrustTests {
  /// `/proc` and `/dev` name the reader, whatever spelling reaches them: `.` and `..` are
  /// resolved the way the kernel walks them before the rule is applied, even for the app's own
  /// next launch (no confinement).
  @Test func procAndDevAreRefusedHoweverTheyAreSpelled() {
    for path in [
      "/proc/self/environ", "/proc/./self/environ", "/proc/1/../self/environ", "//proc/thread-self/environ",
      "/tmp/../proc/self/environ", "/proc/4242/environ", "/dev/fd/3", "/dev/stdin",
    ] {
      #expect(ReportAttachments.refusal(path, confinement: nil) != nil, "\(path)")
    }
    for path in ["/var/log/app.log", "/tmp/proc/self/environ", "/srv/dev/notes.txt"] {
      #expect(ReportAttachments.refusal(path, confinement: nil) == nil, "\(path)")
    }
  }

  /// The uid of a second user made for tests (created once, idempotently); nil when this process
  /// cannot make or find one (not root).
  static func otherUser() -> uid_t? {
    let name = "crumbs-test-other"
    if getpwnam(name) == nil, geteuid() == 0 {
      _ = system("useradd --system --no-create-home --shell /usr/sbin/nologin \(name) >/dev/null 2>&1")
    }
    return getpwnam(name).map { $0.pointee.pw_uid }
  }

  /// A Crumbs directory holding one killed session whose session file names `attachments`.
  func killedSession(in path: String, attachments: (String) -> [String]) throws -> RingDirectory {
    let rings = try RingDirectory(path: path)
    let ring = try rings.createRing()
    ring.append("working", level: .info, type: .manual, attributes: [:])
    var metadata = SessionMetadata(sessionID: ring.sessionID, appVersion: "1.0")
    metadata.attachments = attachments(path)
    try Syscall.writeFileAtomically(
      RingDirectory.sessionFilePath(forRing: ring.path), metadata.encoded(), durable: false)
    ring.close(clean: false)
    return rings
  }

  func onlyReport(_ rings: RingDirectory, _ store: ReportStore) throws -> StoredReport {
    var outcome = PostMortemProcessor(directory: rings, store: store).run()
    let deadline = ChildProcess.now() + 10
    while outcome.reports.isEmpty, ChildProcess.now() < deadline {
      outcome = PostMortemProcessor(directory: rings, store: store).run()
    }
    return try #require(outcome.reports.first, "problems: \(outcome.problems)")
  }

  @Test func aProcessorUnderAnotherUserAttachesOnlyThatUsersFilesInsideTheDirectory() throws {
    guard geteuid() == 0, let other = Self.otherUser() else {
      print("skipped: needs root and a second user (useradd)")
      return
    }
    let scratch = TestDirectory()
    let outside = scratch.file("outside.txt")
    try Syscall.writeFileAtomically(outside, Array("root's file outside\n".utf8), durable: false)
    let crumbs = scratch.file("crumbs")
    let rings = try killedSession(in: crumbs) {
      [outside, $0 + "/app.log", $0 + "/roots.log", "/proc/self/environ"]
    }
    try Syscall.writeFileAtomically(crumbs + "/app.log", Array("the app's log\n".utf8), durable: false)
    try Syscall.writeFileAtomically(crumbs + "/roots.log", Array("root's log\n".utf8), durable: false)
    // The app's user owns its Crumbs directory and all it wrote; roots.log stays root's.
    #expect(system("chown -R \(other) '\(crumbs)' && chown 0 '\(crumbs)/roots.log'") == 0)
    let store = try ReportStore(directory: crumbs)

    let stored = try onlyReport(rings, store)
    let attached = Dictionary(uniqueKeysWithValues: stored.report.attachments.map { ($0.name, $0) })
    #expect(attached["attachment-app.log"]?.omittedReason == nil)
    #expect(Syscall.fileExists(stored.attachmentPath("attachment-app.log")))
    for name in ["attachment-outside.txt", "attachment-roots.log", "attachment-environ"] {
      #expect(attached[name]?.omittedReason != nil, "\(name) was attached")
      #expect(!Syscall.fileExists(stored.attachmentPath(name)))
    }
    let damage = stored.report.damage.joined(separator: "\n")
    #expect(damage.contains("attachment-outside.txt left out"), "\(damage)")
    #expect(damage.contains("not by uid \(other)"), "\(damage)")
  }

  /// The app's own next launch (same user) still attaches what its session named, outside the
  /// directory too; only /proc/self is never read after the fact.
  @Test func theAppsOwnNextLaunchAttachesItsFilesAsNamed() throws {
    let scratch = TestDirectory()
    let outside = scratch.file("outside.txt")
    try Syscall.writeFileAtomically(outside, Array("the app's file outside\n".utf8), durable: false)
    let crumbs = scratch.file("crumbs")
    let rings = try killedSession(in: crumbs) { _ in [outside, "/proc/self/environ"] }
    let store = try ReportStore(directory: crumbs)

    let stored = try onlyReport(rings, store)
    let attached = Dictionary(uniqueKeysWithValues: stored.report.attachments.map { ($0.name, $0) })
    #expect(attached["attachment-outside.txt"]?.omittedReason == nil)
    #expect(attached["attachment-environ"]?.omittedReason?.contains("names the process reading it") == true)
  }
}
