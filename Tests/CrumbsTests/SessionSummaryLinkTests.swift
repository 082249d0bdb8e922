// SessionSummaryLinkTests.swift — the queued session summaries' folder swapped for a symbolic
// link (issue 35, case 2's audit): trimming the queue, which `crumbs collect` does as root,
// deletes nothing outside the Crumbs directory. A real link; the victim's files counted.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import Crumbs

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct SessionSummaryLinkTests {
  @Test func trimmingTheQueueNeverFollowsALinkInPlaceOfItsFolder() throws {
    let scratch = TestDirectory()
    let crumbs = scratch.file("crumbs")
    try Syscall.makeDirectories(crumbs)
    let victim = scratch.file("victim")
    try Syscall.makeDirectory(victim)
    let count = SessionSummaryQueue.maxQueued + 50
    for index in 0..<count {
      try Syscall.writeFileAtomically(victim + "/precious-\(index)", Array("keep\n".utf8), durable: false)
    }
    #expect(symlink(victim, SessionSummaryQueue.folder(crumbs)) == 0)

    SessionSummaryQueue.trim(crumbs)
    _ = SessionSummaryQueue.events(directory: crumbs, resource: [:])
    let left = (try? Syscall.directoryEntries(victim)) ?? []
    print("summary queue swapped for a link: victim folder \(count) files before, \(left.count) after")
    #expect(left.count == count, "files outside the Crumbs directory were deleted or renamed")
    #expect(left.allSatisfy { $0.hasPrefix("precious-") && !$0.hasSuffix(".unreadable") })
  }
}
