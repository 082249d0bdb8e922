import Crumbs
import CrumbsPlatform
import CrumbsTestChildC

// Hang scenarios (issue 23, "killed while hung"): a process whose watchdog recorded a hang in its
// ring header, for the test to kill, stop or crash. The hang is written as the client's watchdog
// writes it (BreadcrumbRing.recordHang, then refreshHang), from this one thread.
#if canImport(Glibc)
  import Glibc
#endif

/// Scenarios around a hang going on.
let hangRecordScenarios: [String: @Sendable ([String]) -> Int32] = [
  // hang-recorded DIR WATCH FRAMES THEN: creates and installs a ring in DIR, with signal
  // breadcrumbs (a SIGTERM then ends the session as terminated by it), records that WATCH has
  // been stalled in FRAMES since 40 s ago and was last seen stalled 31 s after that, prints
  // "ring PATH" and "since NS", and then:
  //   THEN=wait     prints "hung" and waits to be killed
  //   THEN=cleared  clears the hang (it ended), prints "cleared" and waits to be killed
  "hang-recorded": { arguments in
    guard arguments.count == 4, ["wait", "cleared"].contains(arguments[3]) else {
      print("usage: hang-recorded DIR WATCH FRAMES wait|cleared")
      return 64
    }
    do {
      let ring = try RingDirectory(path: arguments[0]).createRing()
      ring.install()
      try SignalBreadcrumbs.install()
      addBreadcrumb("request started", level: .info, type: .http)
      let since = recordHang(ring, watch: arguments[1], frames: arguments[2])
      print("ring \(ring.path)")
      print("since \(since)")
      if arguments[3] == "cleared" {
        ring.clearHang()
        addBreadcrumb("hang ended", level: .info, type: .system)
        print("cleared")
      } else {
        print("hung")
      }
      fflush(nil)
      while true { pause() }
    } catch {
      print("error \(error)")
      return 1
    }
  },

  // hang-then-crash DIR: the crash scenarios' set-up (ring, crash handler), a hang of
  // "request-loop" in "RequestLoop.spin() ← main" recorded as hang-recorded records it,
  // "since NS", then a null dereference ("crashing" first).
  "hang-then-crash": crashing { _ in
    guard let ring = installedRing.value else { return }
    print("since \(recordHang(ring, watch: "request-loop", frames: "RequestLoop.spin() ← main"))")
    armAndFlush()
    crumbs_test_null_deref()
  },
]

/// Records in `ring` a hang of `watch` in `frames` that began 40 s ago and was last seen 31 s
/// after it began (so the report's duration is exact); returns its start (wall ns).
private func recordHang(_ ring: BreadcrumbRing, watch: String, frames: String) -> UInt64 {
  let since = SystemClock.wallNanoseconds() - 40_000_000_000
  ring.recordHang(watch: watch, sinceWallNanoseconds: since, frames: frames)
  ring.refreshHang(seenWallNanoseconds: since + 31_000_000_000)
  return since
}
