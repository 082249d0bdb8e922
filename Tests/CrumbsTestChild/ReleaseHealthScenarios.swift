import Crumbs
import CrumbsTestChildC

// Release-health scenarios: launches of one app under a given version, which end clean or by a
// crash, or deliver what earlier launches left. Each takes the version and the Crumbs directory.
#if canImport(Glibc)
  import Glibc
#endif

let releaseHealthScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-release VERSION DIR clean|crash|deliver [URL]: starts a client (no automatic
  // breadcrumbs) with appVersion VERSION, prints "session ID", then:
  //   clean    closes it and exits 0;
  //   crash    prints "crashing" and dereferences null;
  //   deliver  (OTLP to URL) waits for the previous sessions, flushes (120 s), prints
  //            "flushed delivered=D", closes it and exits 0.
  "client-release": { arguments in
    guard arguments.count >= 3 else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[1])
    configuration.appVersion = arguments[0]
    configuration.automaticBreadcrumbs = nil
    if arguments[2] == "deliver" {
      guard arguments.count == 4 else { return 64 }
      configuration.destinations = [.otlp(endpoint: arguments[3])]
    }
    guard let client = startClient(configuration) else { return 1 }
    print("session \(client.sessionID)")
    fflush(nil)
    switch arguments[2] {
    case "crash":
      print("crashing")
      fflush(nil)
      crumbs_test_null_deref()
      return 71
    case "deliver":
      client.waitForPreviousSessions(timeout: 120)
      let result = client.flush(timeout: 120)
      print("flushed delivered=\(result.delivered)")
      fflush(nil)
    default:
      break
    }
    client.close()
    return 0
  }
]
