// ReadinessTests.swift — the previous sessions' work (processing, delivery, libcurl) never
// competes with the app becoming ready (issue 37): a real child whose previous session crashed,
// seen from inside that work (its delegate's shouldProcess runs on the work's thread, and reads
// the thread's nice value from /proc/thread-self/stat):
//   - with appIsReady() held back (and a delay of 600 s), nothing is processed in the first
//     3 s; once the app says it is ready, the work runs on "crumbs.previous" at nice 19;
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
