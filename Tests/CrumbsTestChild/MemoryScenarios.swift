import Crumbs
import CrumbsPlatform
import CrumbsReports

// Memory scenarios: what a process keeps mapped once the client delivered what the previous
// session left. Each takes the Crumbs directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let memoryScenarios: [String: @Sendable ([String]) -> Int32] = [
  // after-delivery DIR none|client|client-forget URL: with `client`, starts a client delivering
  // OTLP to URL, waits for the previous sessions and one flush (120 s) and prints "flushed
  // delivered=D" with what ParsedModuleCache keeps (`client-forget` then frees that and trims);
  // with `none`, starts nothing. Then prints "ready" and waits to be killed, so the test (or a
  // measurement) reads /proc/PID/maps and smaps of a process that stays as it is.
  "after-delivery": { arguments in
    guard arguments.count >= 2 else { return 64 }
    var client: CrumbsClient?
    if arguments[1].hasPrefix("client") {
      guard arguments.count == 3 else { return 64 }
      var configuration = CrumbsConfiguration(directory: arguments[0])
      configuration.destinations = [.otlp(endpoint: arguments[2])]
      guard let started = startClient(configuration) else { return 1 }
      started.waitForPreviousSessions(timeout: 120)
      let result = started.flush(timeout: 120)
      let kept = ParsedModuleCache.shared.usage
      print("flushed delivered=\(result.delivered) parsed-modules=\(kept.entries) bytes=\(kept.bytes)")
      if arguments[1] == "client-forget" {
        Symbolicator.forgetParsedModules()
        Syscall.returnFreeMemory()
      }
      client = started
    }
    print("ready")
    fflush(nil)
    while true {
      pause()
      withExtendedLifetime(client) {}
    }
  }
]
