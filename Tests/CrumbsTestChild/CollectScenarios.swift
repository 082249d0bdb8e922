import Crumbs
import CrumbsTestChildC

// Collector scenarios: apps that `crumbs collect` watches from outside. Each takes the Crumbs
// directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let collectScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-wait DIR: starts a client (no automatic breadcrumbs), adds the breadcrumb "waiting",
  // prints "ready SESSION" and waits for a signal forever (a test SIGKILLs it).
  "client-wait": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    client.addBreadcrumb("waiting")
    print("ready \(client.sessionID)")
    fflush(nil)
    while true { pause() }
  },

  // client-crash DIR: starts a client (no automatic breadcrumbs), adds the breadcrumb "about to
  // crash", prints "crashing SESSION" then "crashing", and dereferences null.
  "client-crash": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    return crashThroughNull(client)
  },
]
