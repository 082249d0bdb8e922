import Crumbs
import CrumbsTestChildC
import Dispatch

// Crash-loop scenarios: one launch of an app in a crash loop. Each takes the Crumbs directory
// first and prints `client.crashLoop` as the first thing after `start` returns, before any other
// call: "loop none", or "loop count=N first=NS last=NS signature=TEXT" ("signature=" empty when
// the sessions differ), then "session ID" (its own) and "problem TEXT" for each of the client's
// problems at that moment.
#if canImport(Glibc)
  import Glibc
#endif

let crashLoopScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-loop DIR MODE: MODE is
  //   segv | fpe    holds the background work (the previous sessions stay unprocessed, as in a
  //                 launch that dies at once), then dereferences null / divides by zero
  //   clean         holds the background work, returns 0
  //   wait-term     with automatic breadcrumbs (their signal hooks mark a SIGTERM end), waits
  //                 likewise, prints "processed N", then raises SIGTERM (the app has no handler)
  //   wait-clean    waits for the previous sessions to be processed, sends a non-fatal message
  //                 ("after a loop"), prints "processed N" (sessions processed) and returns 0
  //   wait-segv     waits likewise, prints "processed N", then dereferences null
  //   time          holds the background work, prints "start-ms A find-ms B" (wall time of
  //                 `start`; median of 21 more `CrashLoop.find` calls, what `start` spent on
  //                 the loop) and returns 0
  "client-loop": { arguments in
    guard arguments.count == 2 else { return 64 }
    let mode = arguments[1]
    if !mode.hasPrefix("wait-") {
      CrumbsClient.backgroundWorkWillStart.withLock {
        $0 = {
          let never = DispatchSemaphore(value: 0)
          never.wait()
        }
      }
    }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    if mode != "wait-term" { configuration.automaticBreadcrumbs = nil }
    let before = nanoseconds(CLOCK_MONOTONIC)
    guard let client = startClient(configuration) else { return 1 }
    let loop = client.crashLoop
    let startNanoseconds = nanoseconds(CLOCK_MONOTONIC) - before
    if let loop {
      print(
        "loop count=\(loop.count) first=\(loop.firstStartedWallNanoseconds) "
          + "last=\(loop.lastStartedWallNanoseconds) signature=\(loop.signature ?? "")")
    } else {
      print("loop none")
    }
    print("session \(client.sessionID)")
    for problem in client.problems { print("problem \(problem)") }
    fflush(nil)
    if mode.hasPrefix("wait-") {
      let outcome = client.waitForPreviousSessions(timeout: 300)
      if mode == "wait-clean" { client.send(message: "after a loop") }
      print("processed \(outcome?.sessions.count ?? -1)")
      for problem in client.problems { print("problem \(problem)") }
      fflush(nil)
    }
    switch mode {
    case "segv", "wait-segv": crumbs_test_null_deref()
    case "fpe": print("quotient \(crumbs_test_int_divide(1, 0))")
    case "wait-term": raise(SIGTERM)
    case "clean", "wait-clean": return 0
    case "time":
      guard let directory = try? RingDirectory(path: client.configuration.directory) else { return 1 }
      let finds = (0..<21).map { _ in
        let start = nanoseconds(CLOCK_MONOTONIC)
        _ = CrashLoop.find(directory: directory, excluding: client.sessionID)
        return nanoseconds(CLOCK_MONOTONIC) - start
      }.sorted()
      print("start-ms \(Double(startNanoseconds) / 1e6) find-ms \(Double(finds[10]) / 1e6)")
      return 0
    default: return 64
    }
    return 71
  }
]
