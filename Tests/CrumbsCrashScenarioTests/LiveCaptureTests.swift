// LiveCaptureTests.swift — every thread's stack while the process lives on (issue 23): the crash
// handler's thread capture taken from an ordinary thread (LiveThreadCapture).
//
// A real child parks named threads in known functions (read on a pipe, pthread_cond_wait, a
// Dispatch worker, a task's thread), captures itself twice in a row and writes what it got; each
// thread must be listed with its name and its own function (symbolicated by the child, as a hang
// report is), and the child must run on (a captured thread still answers) and exit 0. Without the
// crash handler the capture is a typed error. And the crash path still captures every thread
// right after a live capture, when the capture itself faults (the crash takes it over), and when
// another thread crashes while the capture holds the threads (the crash waits for it).

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Live thread capture", .serialized)
struct LiveCaptureTests {
  @Test(
    "a child captures its own threads twice: each named, each in its own function, and it runs on",
    arguments: [false, true])
  func childCapturesItself(release: Bool) throws {
    let variant = ChildVariant(release: release, backtracer: false)
    guard let executable = variant.executable else {
      print("skipped live-capture [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let child = try Subprocess(
      executable, ["live-capture", directory.path],
      environment: variant.environment.merging(roomToAnswer) { $1 },
      standardError: .file(directory.file("stderr.txt")))
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait(seconds: 60)
    let context = "live-capture [\(variant)]: \(lines.joined(separator: " | "))"
    #expect(child.exitCode == 0, "\(context)")
    #expect(lines.contains("echo ok"), "a captured thread runs on: \(context)")
    #expect(lines.filter { $0.hasPrefix("captured ") }.count == 2, "\(context)")
    let callerID = try #require(lines.first { $0.hasPrefix("thread ") }.map { String($0.dropFirst(7)) })

    for round in 1...2 {
      let snapshot = try JSONDecoder().decode(
        ThreadSnapshot.self,
        from: Data(contentsOf: URL(fileURLWithPath: directory.file("snapshot-\(round).json"))))
      let threads = try JSONDecoder().decode(
        [CrashReport.Thread].self,
        from: Data(contentsOf: URL(fileURLWithPath: directory.file("threads-\(round).json"))))
      let table = snapshot.table
      let where_ = "round \(round), \(context)"
      #expect(String(snapshot.callerID) == callerID, "\(where_)")
      #expect(table.threads.first?.state == .requesting && table.threads.first?.id == snapshot.callerID)
      #expect(table.threads.dropFirst().allSatisfy { $0.state != .requesting })
      // 8 blockers, masked, like-dispatch, cond-waiter, echo, the Dispatch worker, the task's
      // thread and the caller (and whatever threads the runtimes keep).
      #expect(table.threads.count >= 15, "\(table.threads.map(\.name)): \(where_)")
      #expect(table.seen == UInt32(table.threads.count))
      // Every thread of the child's own is captured in time: each blocks in a system call, so
      // each is walked where it blocks, without a signal — "masked" (every signal blocked) too.
      // A runtime's thread caught starting (glibc starts a thread with every signal blocked)
      // cannot answer a signal: seen under load, a Dispatch worker "-qos.overcommit".
      #expect(!table.deadlinePassed, "\(where_)")
      let ours = Set(
        ["masked", "like-dispatch", "cond-waiter", "echo", "dispatch-parked", "task-parked"]
          + (0..<8).map { "blocker-0\($0)" })
      #expect(
        table.threads.filter { $0.state != .captured && ours.contains($0.name) }.map(\.name) == [],
        "\(table.threads.filter { $0.state != .captured }.map(\.name)): \(where_)")
      // Each of ours that got no signal was walked where it blocks ("masked" can be captured no
      // other way); one caught before its call (it announces itself just before) was asked.
      #expect(
        table.threads.filter { ours.contains($0.name) && $0.askedWith == nil }.allSatisfy {
          $0.notSignalled?.contains(.inSystemCall) == true
        }, "\(where_)")
      #expect(
        table.threads.filter { ours.contains($0.name) && $0.notSignalled?.contains(.inSystemCall) == true }
          .count
          >= 8, "\(where_)")
      // The process runs on: nobody ended, nobody held for a core.
      #expect(!table.threadsEnded && !table.threadsKeptForDump)
      // Each thread asked with a signal was parked, and the longest of those pauses is the
      // snapshot's; one walked where it blocks was never parked.
      let captured = table.threads.filter { $0.state == .captured }
      #expect(
        captured.allSatisfy { (($0.pausedNanoseconds ?? 0) > 0) == ($0.askedWith != nil) }, "\(where_)")
      #expect((captured.compactMap(\.pausedNanoseconds).max() ?? 0) == snapshot.longestPauseNanoseconds)
      #expect(snapshot.longestPauseNanoseconds <= table.captureNanoseconds)
      #expect(
        snapshot.modules.first?.path.hasSuffix("CrumbsTestChild") == true,
        "\(snapshot.modules.first?.path ?? "")")

      // The report's threads, as the child's own symbolicator named them.
      #expect(threads.count == table.threads.count)
      #expect(threads.first?.state == .requesting && threads.first?.crashed == false)
      #expect(threads.allSatisfy { !$0.crashed })
      func functions(_ name: String, top: Int = 10) -> [String] {
        threads.first { $0.name == name }?.framesBelowCaptureHandler.prefix(top).compactMap(\.function) ?? []
      }
      let requesting = threads.first?.frames.prefix(12).compactMap(\.function) ?? []
      #expect(requesting.contains { $0.contains("captureTwice") }, "\(requesting)")
      for index in 0..<8 {
        let name = "blocker-0\(index)"
        let thread = threads.first { $0.name == name }
        #expect(thread?.state == .captured, "\(name): \(where_)")
        let top = functions(name, top: 5).first { $0.hasPrefix("crumbs_test_blocked_") }
        #expect(top == "crumbs_test_blocked_0\(index)", "\(name): \(functions(name))")
      }
      #expect(threads.first { $0.name == "masked" }?.state == .captured)
      let dispatchLike = table.threads.first { $0.name == "like-dispatch" }
      #expect(dispatchLike?.state == .captured)
      #expect(functions("like-dispatch", top: 5).contains("crumbs_test_blocked_like_dispatch"))
      // Deep in glibc without frame pointers: CFI finds the caller.
      #expect(
        functions("cond-waiter").contains("crumbs_test_waiting_on_condition"), "\(functions("cond-waiter"))")
      #expect(functions("echo").contains("crumbs_test_echo_loop"), "\(functions("echo"))")
      // Dispatch's workers block the capture signal; blocked in read, they need none.
      for (name, function) in [
        ("dispatch-parked", "parkedOnDispatchQueue"), ("task-parked", "parkedInTask"),
      ] {
        let thread = table.threads.first { $0.name == name }
        #expect(thread?.state == .captured, "\(name): \(where_)")
        #expect(functions(name).contains { $0.contains(function) }, "\(name): \(functions(name))")
      }
    }
  }

  /// Runs `scenario` (live-capture-host-calls or live-capture-seccomp) in `variant`: its lines,
  /// exit code, the snapshot and the report's threads it wrote (nil when it wrote none).
  func runHostCalls(_ scenario: String, variant: ChildVariant, executable: String) throws -> (
    lines: [String], exitCode: Int32?, context: String, snapshot: ThreadSnapshot?,
    threads: [CrashReport.Thread]?
  ) {
    let directory = TestDirectory()
    let child = try Subprocess(
      executable, [scenario, directory.path],
      environment: variant.environment.merging(roomToAnswer) { $1 },
      standardError: .file(directory.file("stderr.txt")))
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait(seconds: 60)
    let stderr = (try? String(contentsOfFile: directory.file("stderr.txt"), encoding: .utf8)) ?? ""
    let context =
      "\(scenario) [\(variant)]: exit \(child.exitCode.map(String.init) ?? "?") signal "
      + "\(child.terminatingSignal.map(String.init) ?? "-"): \(lines.joined(separator: " | ")) | stderr \(stderr.suffix(400))"
    let snapshot = try? JSONDecoder().decode(
      ThreadSnapshot.self, from: Data(contentsOf: URL(fileURLWithPath: directory.file("snapshot-1.json"))))
    let threads = try? JSONDecoder().decode(
      [CrashReport.Thread].self,
      from: Data(contentsOf: URL(fileURLWithPath: directory.file("threads-1.json"))))
    return (lines, child.exitCode, context, snapshot, threads)
  }

  @Test(
    "a live capture does not interrupt threads blocked in sleep, nanosleep, poll, epoll_wait or read, and walks each where it blocks",
    arguments: [false, true])
  func blockedCallsAreNotInterrupted(release: Bool) throws {
    // Issue 35, case 12. Each thread announces itself on a pipe and the child waits until
    // /proc/self/task/<tid>/syscall shows it inside its call before it captures; the calls then
    // finish on their own (the sleeps after 3 s, the waits once a byte is written after the
    // capture). The capture used to signal every thread: sleep returned with seconds left,
    // nanosleep, poll and epoll_wait failed with EINTR (SA_RESTART never restarts them).
    let variant = ChildVariant(release: release, backtracer: false)
    guard let executable = variant.executable else {
      print("skipped live-capture-host-calls [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let run = try runHostCalls("live-capture-host-calls", variant: variant, executable: executable)
    let context = run.context
    #expect(run.exitCode == 0, "\(context)")
    func result(_ prefix: String) -> [String] {
      run.lines.first { $0.hasPrefix(prefix) }?.split(separator: " ").map(String.init) ?? []
    }
    // Each call returned what it would have without the capture.
    let sleep = result("host sleep ")
    #expect(sleep.count == 7 && sleep[3] == "0" && (Int(sleep[5]) ?? 0) >= 3000, "sleep: \(context)")
    let nanosleep = result("host nanosleep ")
    #expect(
      nanosleep.count == 9 && nanosleep[3] == "0" && nanosleep[5] == "0" && (Int(nanosleep[7]) ?? 0) >= 3000,
      "nanosleep: \(context)")
    #expect(run.lines.contains("host poll returned 1 errno 0 revents 1"), "poll: \(context)")
    #expect(run.lines.contains("host epoll_wait returned 1 errno 0"), "epoll_wait: \(context)")
    #expect(run.lines.contains("host read returned 1 errno 0 byte x"), "read: \(context)")
    #expect(run.lines.contains("host spin went on"), "\(context)")

    // And each blocked thread was still walked, where it blocks, without a signal.
    let snapshot = try #require(run.snapshot, "\(context)")
    let threads = try #require(run.threads, "\(context)")
    for (name, function) in [
      ("hc-sleep", "crumbs_test_host_sleeping"), ("hc-nanosleep", "crumbs_test_host_nanosleeping"),
      ("hc-poll", "crumbs_test_host_polling"), ("hc-epoll", "crumbs_test_host_epolling"),
      ("hc-read", "crumbs_test_host_reading"),
    ] {
      let entry = snapshot.table.threads.first { $0.name == name }
      #expect(entry?.state == .captured && entry?.askedWith == nil, "\(name): \(String(describing: entry))")
      #expect(
        entry?.notSignalled?.contains(.inSystemCall) == true && entry?.blockedSystemCall != nil, "\(name)")
      #expect(entry?.pausedNanoseconds == nil, "\(name): never parked")
      let report = threads.first { $0.name == name }
      let functions = report?.frames.prefix(12).compactMap(\.function) ?? []
      #expect(functions.contains(function), "\(name): \(functions)")
      #expect(report?.notSignalled == ["in_system_call"], "\(name)")
    }
    // The running thread is the one still asked with a signal.
    let spinner = snapshot.table.threads.first { $0.name == "hc-spin" }
    #expect(spinner?.state == .captured && spinner?.askedWith != nil, "\(String(describing: spinner))")
    let spinning = threads.first { $0.name == "hc-spin" }?.framesBelowCaptureHandler.prefix(8).compactMap(
      \.function)
    #expect(spinning?.contains("crumbs_test_host_spinning") == true, "\(spinning ?? [])")
    #expect((snapshot.signalsSent ?? 0) >= 1 && (snapshot.readWithoutSignal ?? 0) >= 5, "\(context)")
  }

  @Test(
    "a live capture never signals a thread under seccomp: the process lives, the thread is listed as not signalled and why",
    arguments: [false, true])
  func seccompThreadsAreNotSignalled(release: Bool) throws {
    // Issue 35, case 11. "sc-strict" is in strict seccomp (read, write, exit, sigreturn only),
    // blocked in read; "sc-filter" has a SECCOMP_RET_KILL_PROCESS filter and spins. The capture
    // used to signal both: the handler's first system call killed the strict thread (SIGKILL)
    // and, on the filtered one, the whole process (SIGSYS).
    let variant = ChildVariant(release: release, backtracer: false)
    guard let executable = variant.executable else {
      print("skipped live-capture-seccomp [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let run = try runHostCalls("live-capture-seccomp", variant: variant, executable: executable)
    let context = run.context
    #expect(run.exitCode == 0 && run.lines.contains("done"), "the process lives: \(context)")
    #expect(run.lines.contains("host strict read returned 1 byte x"), "the strict thread lives: \(context)")
    #expect(run.lines.contains("host filter went on"), "\(context)")
    #expect(run.lines.contains("results 3"), "\(context)")
    let snapshot = try #require(run.snapshot, "\(context)")
    let threads = try #require(run.threads, "\(context)")
    // Blocked in read: walked where it blocks, never signalled.
    let strict = snapshot.table.threads.first { $0.name == "sc-strict" }
    #expect(strict?.state == .captured && strict?.askedWith == nil, "\(String(describing: strict))")
    #expect(strict?.notSignalled == [.seccomp, .inSystemCall], "\(String(describing: strict))")
    let strictFunctions =
      threads.first { $0.name == "sc-strict" }?.frames.prefix(12).compactMap(\.function) ?? []
    #expect(strictFunctions.contains("crumbs_test_seccomp_strict_waiting"), "\(strictFunctions)")
    // Running: not asked, and why.
    let filtered = snapshot.table.threads.first { $0.name == "sc-filter" }
    #expect(filtered?.state == .notAsked && filtered?.askedWith == nil, "\(String(describing: filtered))")
    #expect(filtered?.notSignalled == .seccomp, "\(String(describing: filtered))")
    let report = threads.first { $0.name == "sc-filter" }
    #expect(
      report?.state == .notAsked && report?.notSignalled == ["seccomp"], "\(String(describing: report))")
  }

  @Test("without the crash handler a capture is a typed error, not a trap")
  func notInstalled() throws {
    let child = try Subprocess(ChildProcess.testChild, ["live-capture-uninstalled"])
    let lines = child.readLines(until: "\u{0}never", seconds: 60)
    child.wait(seconds: 60)
    #expect(child.exitCode == 0, "\(lines)")
    #expect(lines.first == "error not-installed", "\(lines)")
    #expect(lines.contains("message cannot capture threads: the crash handler is not installed"), "\(lines)")
  }
}

// With the crash scenarios of 100 threads (serialized with them: each wakes 100 threads).
extension ThreadCaptureTests {
  static let withoutBacktracer = [
    ChildVariant(release: false, backtracer: false), ChildVariant(release: true, backtracer: false),
  ]

  @Test("a crash right after a live capture still captures every thread", arguments: withoutBacktracer)
  func crashAfterLiveCapture(variant: ChildVariant) throws {
    guard
      let (run, record) = try checkEveryThread(
        variant: variant, block: "read", environment: ["CRUMBS_TEST_LIVE_FIRST": "1"])
    else { return }
    let table = try #require(record.threads)
    // The caller, 100 blockers, masked, like-dispatch; all but masked captured.
    let live = run.facts["live-captured"]?.split(separator: " ").compactMap { Int($0) } ?? []
    #expect(live.count == 2 && live[0] >= 103 && live[1] >= 101, "\(run.lines)")
    #expect(!table.waitedForLiveCapture && !table.tookOverLiveCapture && !table.liveCaptureBusy)
  }

  @Test(
    "a Dispatch-like thread still leaving the live capture's handler when the crash asks it still answers",
    arguments: withoutBacktracer)
  func slowLeaverAnswersTheCrash(variant: ChildVariant) throws {
    // "like-dispatch" (SIGPROF is the only signal it takes) stops on its way out of the live
    // capture's handler, once it has counted itself out, until the crash has asked every thread
    // (test hook, no timing): a loaded machine does the same by chance. While the kernel still
    // blocked SIGPROF for it there, the crash read both signals blocked and listed it as not
    // answering, without frames; checkEveryThread wants it captured, asked with SIGPROF.
    guard
      let (run, record) = try checkEveryThread(
        variant: variant, block: "read",
        environment: ["CRUMBS_TEST_LIVE_FIRST": "1", "CRUMBS_TEST_LIVE_SLOW_LEAVER": "1"])
    else { return }
    let table = try #require(record.threads)
    #expect(!table.tookOverLiveCapture, "flags \(table.flags): \(run.lines)")
  }

  /// The all-threads crash after a live capture that faults while a thread is parked, with the
  /// test hooks `hooks` (CRUMBS_TEST_LIVE_* of takeLiveCaptureFirst) armed: checkEveryThread's
  /// checks, the crash took the capture over (a hook that never fired keeps the capture from
  /// faulting: no take-over), and it never waited its deadline (10 s here) for a thread.
  func checkTakeOver(variant: ChildVariant, hooks: [String] = []) throws {
    var environment = ["CRUMBS_TEST_LIVE_FIRST": "1", "CRUMBS_TEST_LIVE_FAULT": "1"]
    for hook in hooks { environment[hook] = "1" }
    guard let (run, record) = try checkEveryThread(variant: variant, block: "read", environment: environment)
    else { return }
    let table = try #require(record.threads)
    #expect(table.tookOverLiveCapture, "flags \(table.flags): \(run.lines)")
    #expect(record.handlerDurationNanoseconds < 5_000_000_000, "\(record.handlerDurationNanoseconds) ns")
    #expect(!run.lines.contains { $0.hasPrefix("live-captured") }, "the capture faulted: \(run.lines)")
  }

  @Test(
    "a crash inside a live capture, a thread parked: the crash releases it, takes over, captures every thread",
    arguments: withoutBacktracer)
  func crashInsideLiveCapture(variant: ChildVariant) throws {
    // The threads the capture had parked are let go at once: parked, they could answer only
    // when their park limit passed, and the handler would wait its deadline for them.
    try checkTakeOver(variant: variant)
  }

  @Test(
    "a thread answering the live capture just after the crash took it over does not park: the crash does not wait for it",
    arguments: withoutBacktracer)
  func lateAnswerAfterTakeOver(variant: ChildVariant) throws {
    // The thread stops inside the capture handler just short of its answer and gives it once
    // the crash has released the capture's parked threads (test hook, no timing): a loaded
    // machine does the same by chance. Parked for a capture nobody would release any more, it
    // kept the crash waiting for it to leave the handler for the whole deadline.
    try checkTakeOver(variant: variant, hooks: ["CRUMBS_TEST_LIVE_LATE_ANSWER"])
  }

  @Test(
    "a live capture's request that reaches its thread only after the crash took the capture over does not cost the crash that thread",
    arguments: withoutBacktracer)
  func staleRequestAfterTakeOver(variant: ChildVariant) throws {
    // "like-dispatch" (SIGPROF is the only signal it takes) gets the live capture's SIGPROF only
    // once the crash has taken the capture over and waited for the handler's leavers; the request
    // is stale then, and the thread is still inside the handler turning it away when the crash
    // asks it (test hooks, no timing: a loaded machine does the same by chance). Inside, the
    // kernel blocks SIGPROF for it: the crash read both signals blocked and listed it as not
    // answering, without frames (seen in CI runs as a flaky crashInsideLiveCapture). Now the
    // crash asks it again once it has left; checkEveryThread wants it captured, asked with SIGPROF.
    try checkTakeOver(variant: variant, hooks: ["CRUMBS_TEST_LIVE_STALE_REQUEST"])
  }

  @Test(
    "an uninstall that meets a crash on another thread leaves it the capture's signals and its record file"
  )
  func uninstallMeetsCrash() throws {
    // The crash holds the capture and has listed the threads when "closer" uninstalls the crash
    // handler (test hook: the crash tells it, then waits until the uninstall has dealt with the
    // capture's signals; no timing). Uninstall gave the real-time capture signal back to SIG_DFL,
    // so the crash's request killed the process with it, and it unlinked the record file the
    // crash was writing: no report at all. Now the capture's signals stay ours while a crash
    // holds the capture, and a record that holds a crash is kept.
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "uninstall-meets-crash", variant: ChildVariant(release: false, backtracer: false),
      directory: directory, environment: roomToAnswer)
    let context = run.lines.joined(separator: " | ")
    #expect(run.signal == SIGSEGV, "\(context)")
    let record = try CrashRecord.read(file: try #require(run.recordPath, "no record file: \(context)"))
    #expect(record.status == .complete)
    let table = try #require(record.threads)
    #expect(!table.signalTaken, "flags \(table.flags)")
    for index in 0..<10 {
      let blocker = table.threads.first { $0.name == "blocker-0\(index)" }
      #expect(blocker?.state == .captured && blocker?.askedWith == table.captureSignal, "blocker-0\(index)")
    }
  }

  @Test(
    "a crash never signals a thread under seccomp: the record is complete, the blocked one walked where it waits"
  )
  func crashLeavesSeccompThreadsAlone() throws {
    // Issue 35, case 11, at crash time: the crash's capture signalled "sc-filter" too (a
    // SECCOMP_RET_KILL_PROCESS filter), whose first system call in the handler ended the process
    // by SIGSYS before the record was finished. Now it is not asked; "sc-strict", blocked in read
    // in strict mode, is walked where it blocks without a signal.
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "seccomp-threads-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: roomToAnswer)
    let context = run.lines.joined(separator: " | ")
    #expect(run.signal == SIGSEGV, "\(context)")
    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(record.status == .complete)
    let table = try #require(record.threads)
    let filtered = table.threads.first { $0.name == "sc-filter" }
    #expect(
      filtered?.state == .notAsked && filtered?.notSignalled == .seccomp, "\(String(describing: filtered))")
    let strict = table.threads.first { $0.name == "sc-strict" }
    #expect(
      strict?.state == .captured && strict?.askedWith == nil
        && strict?.notSignalled == [.seccomp, .inSystemCall],
      "\(String(describing: strict))")
    #expect((strict?.frames.count ?? 0) >= 2, "\(String(describing: strict))")
    // The running thread without seccomp is asked as before.
    let spinner = table.threads.first { $0.name == "hc-spin" }
    #expect(spinner?.state == .captured && spinner?.askedWith != nil, "\(String(describing: spinner))")
  }

  @Test(
    "a crash on another thread while a live capture holds the threads waits for it, then captures every thread"
  )
  func crashMeetsLiveCapture() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "live-capture-meets-crash", variant: ChildVariant(release: false, backtracer: false),
      directory: directory,
      environment: roomToAnswer)
    let context = run.lines.joined(separator: " | ")
    #expect(run.signal == SIGSEGV, "\(context)")
    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(record.status == .complete)
    let table = try #require(record.threads)
    #expect(
      table.waitedForLiveCapture && !table.liveCaptureBusy && !table.tookOverLiveCapture,
      "flags \(table.flags)")
    #expect(table.threads.first?.state == .crashing && table.threads.first?.name == "crasher")
    #expect(!table.deadlinePassed && table.noAnswer == 0, "\(table.threads.map { "\($0.name) \($0.state)" })")
    for index in 0..<10 {
      #expect(table.threads.first { $0.name == "blocker-0\(index)" }?.state == .captured, "blocker-0\(index)")
    }
    // The thread that took the live capture, parked afterwards, answers the crash's.
    #expect(table.threads.first { String($0.id) == run.facts["thread"] }?.state == .captured)
  }
}
