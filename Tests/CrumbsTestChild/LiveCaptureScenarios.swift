import Crumbs
import CrumbsSignalPath
import CrumbsSignalPathTesting
import CrumbsTestChildC
import Dispatch
import Foundation

// Live thread capture scenarios: every thread's stack taken while the process runs on
// (LiveThreadCapture), from a child whose threads wait in known functions.
//   live-capture DIR              ring + crash handler (as the crash scenarios set up), then
//                                 CRUMBS_TEST_THREADS (default 8) "blocker-NN" threads blocked
//                                 in read() in crumbs_test_blocked_NN, "masked" (every signal
//                                 blocked), "like-dispatch" (blocks what Dispatch's workers
//                                 block), "cond-waiter" in pthread_cond_wait, "echo" in a read
//                                 loop, a Dispatch worker "dispatch-parked" in
//                                 LiveCaptureWorkload.parkedOnDispatchQueue and a task's thread
//                                 "task-parked" in LiveCaptureWorkload.parkedInTask; takes two
//                                 captures in a row (LiveCaptureWorkload.captureTwice), writes
//                                 each as DIR/snapshot-N.json (the ThreadSnapshot) and
//                                 DIR/threads-N.json (the report's threads, symbolicated by the
//                                 live process), prints "captured N THREADS LONGEST_PAUSE_NS
//                                 CAPTURE_NS"; then "echo ok" once the echo thread, captured
//                                 twice, still answers; then "done", and exits 0.
//   live-capture-uninstalled      no crash handler: prints "error not-installed" (the typed
//                                 error) and "message TEXT", exits 0.
//   live-capture-meets-crash DIR  ring + crash handler, 10 blockers, and a thread "crasher"
//                                 that no capture signal reaches; prints "crashing", then takes
//                                 a live capture that, once its first thread is parked, tells
//                                 the crasher to crash and waits until the crash has started
//                                 (crumbs_crash_testing_live_capture_meets_crash); prints
//                                 "live-captured N" when it returns, and parks the main thread:
//                                 the crash ends the process.
//   uninstall-meets-crash DIR     ring + crash handler, 10 blockers and a thread "closer" that
//                                 uninstalls the crash handler when the crash, holding the
//                                 capture and about to ask the threads, tells it to
//                                 (crumbs_crash_testing_uninstall_meets_crash); prints
//                                 "crashing", then the main thread crashes.
//   live-capture-host-calls DIR   ring + crash handler, then threads blocked in sleep(3),
//                                 nanosleep, poll, epoll_wait and read ("hc-*", each in its own
//                                 crumbs_test_host_* function) and one spinning ("hc-spin");
//                                 once each blocking thread is inside its call, one capture
//                                 (DIR/snapshot-1.json, DIR/threads-1.json), "captured N
//                                 SIGNALS READ", then the calls' own results as the threads
//                                 print them ("host sleep returned 0 after 3001 ms", …), "done".
//   live-capture-seccomp DIR      the same with "sc-strict" (strict seccomp, blocked in read),
//                                 "sc-filter" (a SECCOMP_RET_KILL_PROCESS filter, spinning) and
//                                 "hc-spin"; the process must survive the capture.
//   seccomp-threads-crash DIR     ring + crash handler, the same seccomp threads and "hc-spin",
//                                 then the main thread crashes (a null store).
// The all-threads crash scenario (CrashScenarios.swift) takes a live capture before it crashes
// with CRUMBS_TEST_LIVE_FIRST=1 (takeLiveCaptureFirst).
#if canImport(Glibc)
  import Glibc
#endif

let liveCaptureScenarios: [String: @Sendable ([String]) -> Int32] = [
  "live-capture": { arguments in
    guard setUp(arguments) else { return 70 }
    let count = getenv("CRUMBS_TEST_THREADS").flatMap { Int32(String(cString: $0)) } ?? 8
    print("threads \(crumbs_test_start_blocked_threads(count, 1))")
    guard crumbs_test_start_condition_waiter() == 0, crumbs_test_start_echo() == 0 else {
      print("error cannot start threads")
      return 1
    }
    DispatchQueue.global().async { LiveCaptureWorkload.parkedOnDispatchQueue() }
    Task.detached { await LiveCaptureWorkload.parkedInTask() }
    guard crumbs_test_wait_for_parked(2) == 0 else {
      print("error parked threads did not start")
      return 1
    }
    let status = LiveCaptureWorkload.captureTwice(directory: arguments[0])
    guard status == 0 else { return status }
    print("echo \(crumbs_test_echo(30_000) == 0 ? "ok" : "failed")")
    print("done")
    return 0
  },
  "live-capture-host-calls": { arguments in
    guard setUp(arguments) else { return 70 }
    return LiveCaptureWorkload.captureHostCalls(directory: arguments[0], seccomp: false)
  },
  "live-capture-seccomp": { arguments in
    guard setUp(arguments) else { return 70 }
    return LiveCaptureWorkload.captureHostCalls(directory: arguments[0], seccomp: true)
  },
  "seccomp-threads-crash": crashing { _ in
    print("started \(crumbs_test_start_host_calls(1))")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
  },
  "live-capture-uninstalled": { _ in
    do throws(LiveThreadCaptureError) {
      _ = try LiveThreadCapture.capture()
      print("captured")
      return 1
    } catch {
      print("error \(error == .notInstalled ? "not-installed" : "other")")
      print("message \(error)")
      return 0
    }
  },
  "uninstall-meets-crash": crashing { _ in
    print("threads \(crumbs_test_start_blocked_threads(10, 0))")
    var descriptors: [Int32] = [-1, -1]
    guard pipe(&descriptors) == 0 else {
      print("error cannot make the pipe")
      return
    }
    let told = descriptors[0]
    Thread.detachNewThread {
      crumbs_test_set_thread_name("closer")
      var byte: UInt8 = 0
      guard read(told, &byte, 1) == 1 else { return }
      CrashHandler.uninstall()
    }
    crumbs_crash_testing_uninstall_meets_crash(descriptors[1])
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
  },
  "live-capture-meets-crash": crashing { _ in
    print("threads \(crumbs_test_start_blocked_threads(10, 0))")
    var descriptors: [Int32] = [-1, -1]
    guard pipe(&descriptors) == 0, crumbs_test_start_crasher(descriptors[0]) == 0 else {
      print("error cannot start the crasher")
      return
    }
    crumbs_crash_testing_live_capture_meets_crash(descriptors[1])
    crumbs_crash_testing_live_capture_signals_blocked(true)  // the meeting waits for a parked thread
    print("crashing")
    fflush(nil)
    do {
      let snapshot = try LiveThreadCapture.capture()
      print("live-captured \(snapshot.table.threads.count)")
    } catch {
      print("live-error \(error)")
    }
    fflush(nil)
    crumbs_test_park_in_read(nil)
  },
]

/// CRUMBS_TEST_LIVE_FIRST=1: a live capture before the crash ("live-captured N CAPTURED", or
/// "live-error TEXT"); with CRUMBS_TEST_LIVE_FAULT=1 the capture itself faults while a thread is
/// parked (so "crashing" is printed first), and the crash takes the capture over; with
/// CRUMBS_TEST_LIVE_LATE_ANSWER=1 too, one thread's answer to the capture comes right after the
/// take-over (crumbs_crash_testing_late_answer_to_live_capture); with
/// CRUMBS_TEST_LIVE_SLOW_LEAVER=1, the thread it asks with SIGPROF is still on its way out of
/// the capture handler when the crash asks it (crumbs_crash_testing_slow_leaver_of_live_capture);
/// with CRUMBS_TEST_LIVE_STALE_REQUEST=1 (and the fault), the capture's SIGPROF reaches its thread
/// only once the crash has taken the capture over, and the thread is still turning it away when
/// the crash asks it (crumbs_crash_testing_stale_request_to_live_capture).
func takeLiveCaptureFirst() {
  guard getenv("CRUMBS_TEST_LIVE_FIRST") != nil else { return }
  let fault = getenv("CRUMBS_TEST_LIVE_FAULT") != nil
  crumbs_crash_testing_fault_inside_live_capture(fault)
  crumbs_crash_testing_late_answer_to_live_capture(getenv("CRUMBS_TEST_LIVE_LATE_ANSWER") != nil)
  crumbs_crash_testing_slow_leaver_of_live_capture(getenv("CRUMBS_TEST_LIVE_SLOW_LEAVER") != nil)
  crumbs_crash_testing_stale_request_to_live_capture(getenv("CRUMBS_TEST_LIVE_STALE_REQUEST") != nil)
  // The hooks stop threads the capture parked: the blocked ones must be signalled to park.
  crumbs_crash_testing_live_capture_signals_blocked(
    ["CRUMBS_TEST_LIVE_FAULT", "CRUMBS_TEST_LIVE_SLOW_LEAVER", "CRUMBS_TEST_LIVE_STALE_REQUEST"].contains {
      (name: String) in getenv(name) != nil
    })
  if fault {
    print("crashing")
    fflush(nil)
  }
  do {
    let snapshot = try LiveThreadCapture.capture()
    print("live-captured \(snapshot.table.threads.count) \(snapshot.table.captured)")
  } catch {
    print("live-error \(error)")
  }
}

enum LiveCaptureWorkload {
  @inline(never) static func parkedOnDispatchQueue() {
    crumbs_test_park_in_read("dispatch-parked")
    print("unreachable: dispatch-parked")
  }

  @inline(never) static func parkedInTask() async {
    crumbs_test_park_in_read("task-parked")
    print("unreachable: task-parked")
  }

  /// The host-call threads (crumbs_test_start_host_calls), one capture while they block or
  /// spin, written out as `captureTwice` writes its first; then the threads' own results.
  @inline(never) static func captureHostCalls(directory: String, seccomp: Bool) -> Int32 {
    let started = crumbs_test_start_host_calls(seccomp ? 1 : 0)
    guard started > 0 else {
      print("error cannot start the host-call threads")
      return 1
    }
    print("started \(started)")
    fflush(nil)
    do {
      let snapshot = try LiveThreadCapture.capture()
      let threads = CrashReportBuilder.threads(
        of: snapshot, symbolicator: LiveSymbolicator(options: Symbolicator.Options()))
      let encoder = JSONEncoder()
      try encoder.encode(snapshot).write(to: URL(fileURLWithPath: "\(directory)/snapshot-1.json"))
      try encoder.encode(threads).write(to: URL(fileURLWithPath: "\(directory)/threads-1.json"))
      print(
        "captured \(snapshot.table.threads.count) \(snapshot.signalsSent ?? 0) \(snapshot.readWithoutSignal ?? 0)"
      )
    } catch {
      print("error \(error)")
      return 1
    }
    fflush(nil)
    print("results \(crumbs_test_finish_host_calls(started))")
    print("done")
    return 0
  }

  /// Two captures in a row, each written out; 0, or the exit status of a failure.
  @inline(never) static func captureTwice(directory: String) -> Int32 {
    let symbolicator = LiveSymbolicator(options: Symbolicator.Options())
    let encoder = JSONEncoder()
    for round in 1...2 {
      do {
        let snapshot = try LiveThreadCapture.capture()
        let threads = CrashReportBuilder.threads(of: snapshot, symbolicator: symbolicator)
        try encoder.encode(snapshot).write(to: URL(fileURLWithPath: "\(directory)/snapshot-\(round).json"))
        try encoder.encode(threads).write(to: URL(fileURLWithPath: "\(directory)/threads-\(round).json"))
        print(
          "captured \(round) \(snapshot.table.threads.count) \(snapshot.longestPauseNanoseconds) "
            + "\(snapshot.table.captureNanoseconds)")
      } catch {
        print("error \(error)")
        return 1
      }
    }
    return 0
  }
}
