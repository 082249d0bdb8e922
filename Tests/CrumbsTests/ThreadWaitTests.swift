import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

// What each thread of a live capture waits on, with real threads of a real child
// (wait-graph, crumbs_test_waits.c): two pthread mutexes taken in opposite order, a chain whose
// end sleeps in nanosleep, and futex waits without an owner (a semaphore, a condition variable).
// The child prints what it set up and what captureThreads() found; its hang report is read
// from its store. Every wait is for a line, with a bounded margin.
@Suite struct ThreadWaitTests {
  @Test func aDeadlockAndAChainAreNamedWithTheirOwnersInTheDumpAndTheHangReports() throws {
    // Issue 40, points 1 and 2.
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["wait-graph", directory.path])
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait()
    let context = lines.joined(separator: " | ")
    #expect(child.exitCode == 0, "\(context)")
    func fields(_ prefix: String) -> [[String]] {
      lines.filter { $0.hasPrefix(prefix) }.map {
        $0.dropFirst(prefix.count).split(separator: " ").map(String.init)
      }
    }
    let roles = Dictionary(
      fields("role ").compactMap { $0.count == 3 ? ($0[0], (tid: $0[1], object: $0[2])) : nil },
      uniquingKeysWith: { first, _ in first })
    let waits = Dictionary(
      fields("wait ").compactMap { $0.count == 3 ? ($0[0], (owner: $0[1], call: $0[2])) : nil },
      uniquingKeysWith: { first, _ in first })
    let a = try #require(roles["dl-a"], "\(context)")
    let b = try #require(roles["dl-b"], "\(context)")
    let holder = try #require(roles["ch-holder"], "\(context)")
    let waiter = try #require(roles["ch-waiter"], "\(context)")

    // Each blocked thread's call, and the owner of each mutex waited for.
    #expect(waits[a.tid]?.owner == b.tid && waits[a.tid]?.call == "futex", "\(context)")
    #expect(waits[b.tid]?.owner == a.tid && waits[b.tid]?.call == "futex", "\(context)")
    #expect(waits[waiter.tid]?.owner == holder.tid, "\(context)")
    #expect(waits[holder.tid]?.owner == "-", "\(context)")
    #expect(["nanosleep", "clock_nanosleep"].contains(waits[holder.tid]?.call ?? ""), "\(context)")
    // Futexes without an owner: no owner made up.
    for name in ["sem-waiter", "cond-waiter"] {
      let tid = try #require(roles[name]?.tid, "\(context)")
      #expect(waits[tid]?.owner == "-" && waits[tid]?.call == "futex", "\(name): \(context)")
    }

    // The verdict: the deadlock, both threads in it.
    let verdict = try #require(fields("verdict ").first, "\(context)")
    #expect(verdict.first == "deadlock", "\(context)")
    #expect(Set(verdict.dropFirst().first?.split(separator: ",").map(String.init) ?? []) == [a.tid, b.tid])
    let text = try #require(lines.first { $0.hasPrefix("verdict-text deadlock: ") }, "\(context)")
    #expect(text.contains("dl-a (tid \(a.tid))") && text.contains("dl-b (tid \(b.tid))"), "\(text)")

    // Followed from the chain's waiter: it ends at the holder, in nanosleep; from the holder
    // and from the ownerless waits: no verdict.
    let chain = try #require(lines.first { $0.hasPrefix("from ch-waiter ") }, "\(context)")
    #expect(chain.hasPrefix("from ch-waiter chain \(waiter.tid),\(holder.tid) | in "), "\(chain)")
    #expect(chain.hasSuffix("nanosleep"), "\(chain)")
    for name in ["ch-holder", "sem-waiter", "cond-waiter"] {
      #expect(lines.contains("from \(name) - - | -"), "\(name): \(context)")
    }

    // The hang report of the deadlocked heartbeat leads with the deadlock, and carries it.
    let began = Dictionary(
      fields("hang-began ").compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil },
      uniquingKeysWith: { first, _ in first })
    let store = try ReportStore(directory: directory.path)
    let report = try store.load(id: try #require(began["dl-a"], "\(context)")).report
    let cycle = "deadlock: dl-a (tid \(a.tid)) → dl-b (tid \(b.tid)) → dl-a (tid \(a.tid))"
    #expect(report.exceptionMessage.hasPrefix(cycle), "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.contains("heartbeat \"dl-a\" silent for"), "\(report.exceptionMessage)")
    #expect(report.attributes[HangFacts.verdictKey] == "deadlock")
    #expect(report.attributes[HangFacts.verdictThreadsKey]?.text == "\(a.tid),\(b.tid)")
    #expect(report.attributes[HangFacts.verdictLocksKey]?.text == "\(a.object),\(b.object)")
    #expect(report.attributes[HangFacts.verdictEndKey] == nil)
    // Both lock sites: the first function outside libc of each deadlocked thread.
    #expect(
      report.attributes[HangFacts.verdictSitesKey]?.text == "crumbs_test_wait_role | crumbs_test_wait_role",
      "\(report.attributes)")
    #expect(
      report.exceptionMessage.contains(
        "; lock sites: dl-a in crumbs_test_wait_role, dl-b in crumbs_test_wait_role; "),
      "\(report.exceptionMessage)")

    // The chain's waiter's hang report: the chain, its end, no deadlock claimed.
    let chained = try store.load(id: try #require(began["ch-waiter"], "\(context)")).report
    let prefix =
      "wait chain: ch-waiter (tid \(waiter.tid)) → ch-holder (tid \(holder.tid)) (mutexes \(waiter.object))"
    #expect(chained.exceptionMessage.hasPrefix(prefix), "\(chained.exceptionMessage)")
    #expect(chained.attributes[HangFacts.verdictKey] == "chain")
    #expect(chained.attributes[HangFacts.verdictThreadsKey]?.text == "\(waiter.tid),\(holder.tid)")
    #expect(chained.attributes[HangFacts.verdictLocksKey]?.text == waiter.object)
    #expect(chained.attributes[HangFacts.verdictEndKey]?.text.hasSuffix("nanosleep") == true)
  }
}
