// ReadinessTests.swift — the previous sessions' work (processing, delivery, libcurl) never
// competes with the app becoming ready (issue 37): a real child whose previous session crashed,
// seen from inside that work (its delegate's shouldProcess runs on the work's thread, and reads
// the thread's nice value from /proc/thread-self/stat):
//   - with appIsReady() held back (and a delay of 600 s), nothing is processed in the first
//     3 s; once the app says it is ready, the work runs on "crumbs.previous" at nice 19, for a
//     user who is not root too;
//   - hasCrashedInLastSession starts it at once, at the caller's priority (no deadlock, no wait
//     for the delay);
//   - a program that never says it is ready gets it after previousSessionsDelay, at nice 19.
// Every wait is on a line of the child or its exit, bounded with a wide margin.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ReadinessTests {
  /// A Crumbs directory whose last session crashed.
  func crashedDirectory() throws -> TestDirectory {
    let directory = TestDirectory()
    let crashed = try ChildProcess(ChildProcess.testChild, ["client-crash-at-once", directory.path])
    crashed.wait(seconds: 120)
    #expect(crashed.terminatingSignal == SIGSEGV)
    return directory
  }

  @Test func thePreviousSessionsWaitForTheAppAndThenRunAtTheLowestPriority() throws {
    let directory = try crashedDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-previous-when-ready", directory.path, "ready"])
    let base = try #require(child.value(after: "base ", seconds: 120))
    #expect(base != "19", "the test runs at nice 19 already: nothing to tell")
    // Old code processed them at once, beside the app's start.
    #expect(child.value(after: "early ", seconds: 120) == "false")
    // This session's own start-up work (session file, machine facts, automatic breadcrumbs)
    // yields to the app as well: its thread is at nice 19 before the app is ready. Old code did
    // it at the app's priority, taking 2–3 ms of a one-CPU container's only CPU.
    #expect(child.value(after: "start-up nice=", seconds: 120) == "19")
    #expect(child.value(after: "processed ", seconds: 300) == "ready=true nice=19 thread=crumbs.previous")
    #expect(child.wait(seconds: 120) == 0)
  }

  /// Raising one's own thread's nice value needs no privilege: the same as a user who is not
  /// root (made once, idempotently; skipped, saying so, when the tests do not run as root).
  @Test func theLowestPriorityNeedsNoPrivilege() throws {
    guard getuid() == 0 else {
      print("skipped theLowestPriorityNeedsNoPrivilege: needs root (a second user)")
      return
    }
    let name = "crumbs-test-other"
    if getpwnam(name) == nil {
      let made = try Subprocess.run(
        "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        timeoutMilliseconds: 60_000)
      // Another test process may have made it at the same moment (exit 9: the name exists).
      try #require(made.exitStatus == 0 || made.exitStatus == 9, "useradd: \(made.exitStatus ?? -1)")
    }
    let user = try #require(getpwnam(name)).pointee
    let directory = TestDirectory()
    try #require(chown(directory.path, user.pw_uid, user.pw_gid) == 0)
    let asUser = [
      "--reuid=\(user.pw_uid)", "--regid=\(user.pw_gid)", "--clear-groups", "--", ChildProcess.testChild,
    ]
    let crumbs = directory.file("crumbs")
    let crashed = try ChildProcess("/usr/bin/setpriv", asUser + ["client-crash-at-once", crumbs])
    crashed.wait(seconds: 120)
    #expect(crashed.terminatingSignal == SIGSEGV)
    let child = try ChildProcess(
      "/usr/bin/setpriv", asUser + ["client-previous-when-ready", crumbs, "ready"])
    #expect(child.value(after: "early ", seconds: 120) == "false")
    #expect(child.value(after: "processed ", seconds: 300) == "ready=true nice=19 thread=crumbs.previous")
    #expect(child.wait(seconds: 120) == 0)
  }

  @Test func aWaiterStartsThemAtOnceAtItsOwnPriority() throws {
    let directory = try crashedDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-previous-when-ready", directory.path, "waiter"])
    let base = try #require(child.value(after: "base ", seconds: 120))
    #expect(
      child.value(after: "processed ", seconds: 300) == "ready=false nice=\(base) thread=crumbs.previous")
    // Within hasCrashedInLastSession's own bound (10 s), not after the 600 s delay.
    #expect(child.value(after: "crashed ", seconds: 300) == "true")
    #expect(child.wait(seconds: 120) == 0)
  }

  @Test func aProgramThatNeverSaysItIsReadyGetsThemAfterTheDelay() throws {
    let directory = try crashedDirectory()
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-previous-when-ready", directory.path, "delay"])
    _ = try #require(child.value(after: "base ", seconds: 120))
    #expect(child.value(after: "processed ", seconds: 300) == "ready=false nice=19 thread=crumbs.previous")
    #expect(child.wait(seconds: 120) == 0)
  }
}
