import Crumbs
import CrumbsTestChildC

// Session scenarios: what a CrumbsClient leaves for the next launch when the process exits soon
// after start, starts a second client, sets metadata and crashes, or loses a crash signal to
// another handler. Each takes the Crumbs directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let sessionScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-quick-exit DIR: pinned to one CPU, so the client's background thread gets no time
  // before main returns; starts a client (default configuration, app version "1.0"), adds one
  // breadcrumb and returns 0 at once.
  "client-quick-exit": { arguments in
    guard let directory = arguments.first else { return 64 }
    guard crumbs_test_pin_to_one_cpu() == 0 else {
      print("error cannot pin: errno \(errno)")
      return 1
    }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.appVersion = "1.0"
    guard let client = startClient(configuration) else { return 1 }
    client.addBreadcrumb("one")
    return 0
  },

  // client-start-twice DIR: starts a client, then another; prints "second-start ok" or
  // "second-start error DESCRIPTION", then "crashing", and dereferences null.
  "client-start-twice": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    guard let first = startClient(configuration) else { return 1 }
    first.addBreadcrumb("first client started")
    do {
      let second = try CrumbsClient.start(configuration)
      second.addBreadcrumb("second client started")
      print("second-start ok")
    } catch {
      print("second-start error \(error)")
    }
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },

  // client-metadata DIR: starts a client with app version "1.0", sets the attribute
  // region=eu-west-1, attaches DIR/app.log ("last log line\n"), prints "crashing" and
  // dereferences null.
  "client-metadata": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.appVersion = "1.0"
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    client.setAttribute("eu-west-1", forKey: "region")
    let log = directory + "/app.log"
    guard let file = fopen(log, "w") else { return 1 }
    fputs("last log line\n", file)
    fclose(file)
    client.addAttachment(path: log)
    client.addBreadcrumb("about to crash")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },
]

/// Starts a client (shared), or prints the error and returns nil.
private func startClient(_ configuration: CrumbsConfiguration) -> CrumbsClient? {
  do {
    return try CrumbsClient.start(configuration)
  } catch {
    print("error \(error)")
    fflush(nil)
    return nil
  }
}
