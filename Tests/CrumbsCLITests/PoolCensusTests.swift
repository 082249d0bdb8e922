import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import Crumbs
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

// The cooperative pool's census (issue 40, point 3) with a real child whose pool is starved:
// 2 × seats tasks each wait in censusBlockedOnSemaphore() (DispatchSemaphore.wait). The pool's
// hang report leads with the census, captureThreads() and `crumbs threads` (text and --json)
// give the same, each naming the semaphore's call site; the threads running the blocked jobs
// carry libdispatch 6.3's name for the default pool's workers (docs/platform-facts.md). Every
// wait is for a line of the child, with a bounded margin.
@Suite struct PoolCensusTests {
  @Test func aStarvedPoolIsCountedSeatBySeatInTheHangReportTheDumpAndTheCLI() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["pool-starved", directory.path, "stay"])
    defer {
      child.signal(SIGKILL)
      child.wait(seconds: 60)
    }
    let lines = child.readLines(until: "ready", seconds: 120)
    let context = lines.joined(separator: " | ")
    try #require(lines.last == "ready", "\(context)")
    let seats = try #require(lines.first { $0.hasPrefix("seats ") }.flatMap { Int($0.dropFirst(6)) })
    let site = "in `censusBlockedOnSemaphore(_:)` (DispatchSemaphore.wait)"
    let expected = "\(seats) of \(seats) pool seats blocked: \(seats) \(site)"

    // captureThreads(): every seat blocked in futex under the semaphore's call site.
    let census = try #require(lines.first { $0.hasPrefix("census ") }, "\(context)")
    #expect(census.hasPrefix("census " + expected), "\(census)")
    let blocked = lines.filter { $0.hasPrefix("seat ") && $0.contains(" blocked ") }
    #expect(blocked.count == seats, "\(context)")
    for line in blocked {
      #expect(
        line.hasSuffix(" blocked default DispatchSemaphore.wait censusBlockedOnSemaphore(_:)"), "\(line)")
    }

    // The platform fact: libdispatch 6.3 names the default pool's workers after the root queue's
    // label, its last 15 bytes ("com.apple.root.default-qos").
    let names = Dictionary(
      lines.filter { $0.hasPrefix("comm ") }.compactMap { line -> (String, String)? in
        let fields = line.split(separator: " ", maxSplits: 2).map(String.init)
        return fields.count == 3 ? (fields[1], fields[2]) : nil
      }, uniquingKeysWith: { first, _ in first })
    #expect(DispatchPools.threadName(quality: "default") == "oot.default-qos")
    for line in blocked {
      let tid = String(line.split(separator: " ")[1])
      #expect(names[tid] == "oot.default-qos", "thread \(tid): \(context)")
    }

    // The pool's hang report leads with the census.
    let began = try #require(lines.first { $0.hasPrefix("hang-began concurrency-pool ") }, "\(context)")
    let id = String(began.dropFirst("hang-began concurrency-pool ".count))
    let report = try ReportStore(directory: directory.path).load(id: id).report
    #expect(report.exceptionMessage.hasPrefix(expected), "\(report.exceptionMessage)")
    #expect(report.exceptionMessage.contains("the concurrency pool ran no job"), "\(report.exceptionMessage)")
    #expect(report.attributes[HangFacts.poolBlockedKey] == .string(String(seats)), "\(report.attributes)")
    #expect(report.attributes[HangFacts.poolSeatsKey] == .string(String(seats)))

    // `crumbs threads`: the census first, in text and in JSON.
    let text = try CLIProcess.run(["threads", "\(child.pid)", "--timeout", "60"])
    #expect(text.status == 0, "\(text.stderr)")
    let second = text.stdout.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
    #expect(second.hasPrefix("Pool: " + expected), "\(text.stdout.prefix(800))")
    let json = try CLIProcess.run(["threads", "\(child.pid)", "--json", "--timeout", "60"])
    #expect(json.status == 0, "\(json.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
    let pool = try #require(object["crumbs.pool_census"] as? [String: Any], "\(json.stdout.prefix(800))")
    #expect((pool["text"] as? String)?.hasPrefix(expected) == true, "\(pool)")
    #expect(pool["blocked"] as? Int == seats && pool["seats_per_pool"] as? Int == seats, "\(pool)")
    let entries = (pool["threads"] as? [[String: Any]] ?? []).filter { $0["state"] as? String == "blocked" }
    #expect(entries.count == seats, "\(pool)")
    for entry in entries {
      #expect(entry["app_frame"] as? String == "censusBlockedOnSemaphore(_:)", "\(entry)")
      #expect(entry["call"] as? String == "DispatchSemaphore.wait", "\(entry)")
      #expect(entry["system_call.name"] as? String == "futex", "\(entry)")
      #expect(entry["thread.name"] as? String == "oot.default-qos", "\(entry)")
    }

    child.signal(SIGUSR1)
    #expect(child.value(after: "hang-ended concurrency-pool ", seconds: 60) != nil)
    #expect(child.readLines(until: "done", seconds: 60).last == "done")
  }

  @Test func theCensusReadsTheFramesOfPoolThreads() {
    // What the frames of a libdispatch worker say, as the capture symbolicates them.
    func frame(_ function: String?, _ module: String) -> CrashReport.Frame {
      CrashReport.Frame(index: 0, address: "0x1", module: module, function: function)
    }
    let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    let dispatch = "/opt/swift/usr/lib/swift/linux/libdispatch.so"
    let concurrency = "/opt/swift/usr/lib/swift/linux/libswift_Concurrency.so"
    let app = "/srv/app/Server"
    let blocked = CrashReport.Thread(
      id: 11, name: "oot.default-qos", state: .captured, crashed: false,
      frames: [
        frame(nil, libc), frame("_dispatch_sema4_wait", dispatch),
        frame("_dispatch_semaphore_wait_slow", dispatch),
        frame("ImageCache.load()", app), frame("swift_job_run", concurrency),
        frame("_dispatch_worker_thread", dispatch), frame("crumbs__thread_trampoline", app),
      ])
    let sleeping = CrashReport.Thread(
      id: 12, name: "oot.default-qos", state: .captured, crashed: false,
      frames: [
        frame("clock_nanosleep", libc), frame("usleep", libc), frame("Report.render()", app),
        frame("swift_job_run", concurrency), frame("_dispatch_worker_thread", dispatch),
      ])
    let idle = CrashReport.Thread(
      id: 13, name: "oot.default-qos", state: .captured, crashed: false,
      frames: [
        frame(nil, libc), frame("_dispatch_sema4_timedwait", dispatch),
        frame("_dispatch_worker_thread", dispatch),
        frame("crumbs__thread_trampoline", app),
      ])
    let running = CrashReport.Thread(
      id: 14, name: "oot.default-qos", state: .captured, crashed: false,
      frames: [
        frame("Math.spin()", app), frame("swift_job_run", concurrency),
        frame("_dispatch_worker_thread", dispatch),
      ])
    let other = CrashReport.Thread(
      id: 15, name: "-qos.overcommit", state: .captured, crashed: false, frames: [frame("epoll_wait", libc)])
    var waits = ThreadWaits(threads: [])
    for (tid, call) in [(11, "futex"), (12, "clock_nanosleep"), (13, "futex"), (15, "epoll_wait")] {
      var wait = ThreadWait(threadID: UInt32(tid))
      wait.systemCall = 1
      wait.systemCallName = call
      waits.threads.append(wait)
    }
    let census = PoolCensus.take(threads: [blocked, sleeping, idle, running, other], waits: waits, seats: 4)
    #expect(
      census?.text
        == "2 of 4 pool seats blocked: 1 in `ImageCache.load()` (DispatchSemaphore.wait), 1 in `Report.render()` (usleep); 1 running; 1 idle pool thread"
    )
    #expect(census?.seats.map(\.state) == [.blocked, .blocked, .idle, .running])
    #expect(
      census?.blockedText([11], duration: "40 s")
        == "1 of 4 pool seats blocked for 40 s in `ImageCache.load()` (DispatchSemaphore.wait)")
    // No pool thread: no census.
    #expect(PoolCensus.take(threads: [other], waits: waits, seats: 4) == nil)
    #expect(DispatchPools.pool(ofThreadNamed: "-qos.overcommit") == nil)
    #expect(DispatchPools.pool(ofThreadNamed: "r-initiated-qos") == "user-initiated")
    #expect(DispatchPools.pool(ofThreadNamed: "DispatchWorker") == DispatchPools.unknownQuality)
  }
}
