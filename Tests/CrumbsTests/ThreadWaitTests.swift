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
    #expect(chain.hasPrefix("from ch-waiter chain \(waiter.tid),\(holder.tid) | sleeping in "), "\(chain)")
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
    // Its end: the call, and the holder's first frame in the executable.
    #expect(
      chained.attributes[HangFacts.verdictEndKey]?.text
        == "sleeping in clock_nanosleep under crumbs_test_wait_role",
      "\(chained.attributes)")
  }

  @Test func rwlockWritersSynchronizationMutexOwnersAndConditionVariablesAreNamed() throws {
    // Issue 40: owners beyond glibc's mutex (lock-graph: rwlocks, Synchronization.Mutex, a
    // cycle of a Mutex and a pthread mutex, condition variables, a chain ending in an app frame).
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["lock-graph", directory.path])
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait()
    let context = lines.joined(separator: " | ")
    #expect(child.exitCode == 0, "\(context)")
    let graph = try LockGraphLines(lines)
    func role(_ name: String) throws -> (tid: String, object: String) {
      try #require(graph.roles[name], "\(name): \(context)")
    }
    func wait(_ name: String) throws -> LockGraphLines.Wait {
      try #require(graph.waits[try role(name).tid], "\(name): \(context)")
    }
    func activity(_ name: String) throws -> String { graph.activities[try role(name).tid] ?? "" }

    // A rwlock held for writing: its reader and its second writer both wait for the writer.
    let writer = try role("rw-writer")
    for name in ["rw-reader", "rw-writer2"] {
      let found = try wait(name)
      #expect(found.owner == writer.tid && found.kind == "rwlock", "\(name): \(context)")
      #expect(found.object == (try role(name)).object, "\(name): \(context)")
    }
    #expect(try activity("rw-reader").hasPrefix("waiting to read rwlock 0x"), "\(context)")
    #expect(try activity("rw-writer2").hasSuffix("held for writing by tid \(writer.tid)"), "\(context)")
    // A rwlock held by a reader: its writer waits for nobody it could name, and says so.
    let readers = try wait("rd-writer")
    let readersLock = try role("rd-writer").object
    #expect(readers.owner == "-" && readers.kind == "rwlock" && readers.object == readersLock, "\(context)")
    #expect(try activity("rd-writer").hasSuffix("; held by 1 reader; readers have no owner"), "\(context)")

    // A Synchronization.Mutex: its waiter in withLock names the holder.
    let mutex = try wait("mx-waiter")
    #expect(mutex.owner == (try role("mx-holder")).tid && mutex.kind == "pi_mutex", "\(context)")
    #expect(mutex.object == (try role("mx-waiter")).object, "\(context)")
    // Its word with a waiter asleep in FUTEX_LOCK_PI: the holder's tid | FUTEX_WAITERS.
    let word = try #require(lines.first { $0.hasPrefix("mutex-word ") }, "\(context)")
    let holderHex = String(UInt32(try role("mx-holder").tid) ?? 0, radix: 16)
    #expect(
      word
        == "mutex-word 0x\(String(0x8000_0000 | (UInt32(holderHex, radix: 16) ?? 0), radix: 16)) holder 0x\(holderHex)",
      "\(word)")

    // A condition variable: not signalled, no owner; signalled while another thread keeps its
    // mutex, the waiter waits for that thread.
    let unsignalled = try wait("cv-waiter")
    #expect(unsignalled.owner == "-" && unsignalled.kind == "condition_variable", "\(context)")
    #expect(unsignalled.object == (try role("cv-waiter")).object, "\(context)")
    #expect(try activity("cv-waiter").hasSuffix("; no owner"), "\(context)")
    let woken = try wait("cv-woken")
    #expect(woken.owner == (try role("cv-holder")).tid && woken.kind == "mutex", "\(context)")

    // The cycle of a pthread mutex and a Synchronization.Mutex is the dump's deadlock.
    let p = try role("mix-p")
    let q = try role("mix-q")
    let (waitOfP, waitOfQ) = (try wait("mix-p"), try wait("mix-q"))
    #expect(waitOfP.owner == q.tid && waitOfQ.owner == p.tid, "\(context)")
    #expect(graph.verdict.first == "deadlock", "\(context)")
    #expect(
      Set(graph.verdict.dropFirst().first?.split(separator: ",").map(String.init) ?? []) == [p.tid, q.tid])

    let store = try ReportStore(directory: directory.path)
    func report(_ watch: String) throws -> CrashReport {
      try store.load(id: try #require(graph.began[watch], "\(watch): \(context)")).report
    }
    // The deadlock's hang report: both threads, both locks with their kinds, both app sites.
    let deadlock = try report("mix-p")
    #expect(
      deadlock.exceptionMessage.hasPrefix(
        "deadlock: mix-p (tid \(p.tid)) → mix-q (tid \(q.tid)) → mix-p (tid \(p.tid)) "
          + "(PI mutex \(p.object), mutex \(q.object)); lock sites: mix-p in closure #"),
      "\(deadlock.exceptionMessage)")
    #expect(deadlock.attributes[HangFacts.verdictKey] == "deadlock")
    #expect(deadlock.attributes[HangFacts.verdictThreadsKey]?.text == "\(p.tid),\(q.tid)")
    #expect(deadlock.attributes[HangFacts.verdictLocksKey]?.text == "\(p.object),\(q.object)")
    #expect(deadlock.attributes[HangFacts.verdictLockKindsKey]?.text == "pi_mutex,mutex")
    let sites = deadlock.attributes[HangFacts.verdictSitesKey]?.text ?? ""
    #expect(sites.hasPrefix("closure #") && sites.contains("LockGraph.run()"), "\(sites)")
    #expect(!sites.contains("_MutexHandle"), "\(sites)")

    // The rwlock reader's: a chain to the writer, ending where it sleeps, under its app frame.
    let chain = try report("rw-reader")
    let reader = try role("rw-reader")
    #expect(
      chain.exceptionMessage.hasPrefix(
        "wait chain: rw-reader (tid \(reader.tid)) → rw-writer (tid \(writer.tid)) (rwlock \(reader.object)); "
          + "the last is sleeping in clock_nanosleep under Worker.backoff(); "),
      "\(chain.exceptionMessage)")
    #expect(chain.attributes[HangFacts.verdictKey] == "chain")
    #expect(chain.attributes[HangFacts.verdictEndKey] == "sleeping in clock_nanosleep under Worker.backoff()")
    #expect(chain.attributes[HangFacts.verdictLockKindsKey] == "rwlock")

    // The Mutex waiter's: a chain to the holder.
    let held = try report("mx-waiter")
    #expect(
      held.attributes[HangFacts.verdictThreadsKey]?.text
        == "\((try role("mx-waiter")).tid),\((try role("mx-holder")).tid)")
    #expect(held.attributes[HangFacts.verdictLockKindsKey] == "pi_mutex")
    #expect(held.exceptionMessage.contains("the last is sleeping in clock_nanosleep under Worker.backoff()"))
  }
}

/// What the lock-graph scenario printed: its roles, each thread's wait and activity, the
/// dump's verdict and the hang reports begun.
struct LockGraphLines {
  struct Wait {
    var owner: String
    var kind: String
    var object: String
  }
  var roles: [String: (tid: String, object: String)] = [:]
  var waits: [String: Wait] = [:]
  var activities: [String: String] = [:]
  var verdict: [String] = []
  var began: [String: String] = [:]

  init(_ lines: [String]) throws {
    for line in lines {
      let fields = line.split(separator: " ").map(String.init)
      switch fields.first {
      case "role" where fields.count == 4: roles[fields[1]] = (fields[2], fields[3])
      case "wait" where fields.count == 5:
        waits[fields[1]] = Wait(owner: fields[2], kind: fields[3], object: fields[4])
      case "activity" where fields.count > 2:
        activities[fields[1]] = fields.dropFirst(2).joined(separator: " ")
      case "verdict": verdict = Array(fields.dropFirst())
      case "hang-began" where fields.count == 3: began[fields[1]] = fields[2]
      default: break
      }
    }
  }
}
