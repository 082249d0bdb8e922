import Crumbs
import CrumbsTestChildC

// Attribute scenarios: typed attributes, the user and the grouping hint, sent live and reported
// by the next launch.
#if canImport(Glibc)
  import Glibc
#endif

let attributeScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-typed-attributes DIR SERVER: a client (app version "1.0") delivering to SERVER's
  // OTLP endpoint and to its Backtrace submission URL (SERVER/post?format=json&token=t); waits
  // for its start-up work (an earlier crash is reported then), sets the attributes
  // feature.beta=true (Bool), cart.items=3 (Int), cart.weight_kg=4.0 and cart.total=2.5
  // (Double), region=eu-west-1 (String) and the user "user-42" (after setting and clearing
  // "someone-else"), sends a non-fatal message "card declined", flushes (up to 60 s) and prints
  // "sent yes" when it went out and nothing is pending (else "sent no"), then prints "crashing" and dereferences null —
  // at the same place each run, so two runs are two crashes of one bug.
  "client-typed-attributes": { arguments in
    guard arguments.count == 2 else { return 64 }
    let (directory, server) = (arguments[0], arguments[1])
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.appVersion = "1.0"
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.destinations = [
      .otlp(endpoint: server), .backtraceSubmissionURL(server + "/post?format=json&token=t"),
    ]
    guard let client = startClient(configuration) else { return 1 }
    client.waitForPreviousSessions()
    client.setAttribute(true, forKey: "feature.beta")
    client.setAttribute(3, forKey: "cart.items")
    client.setAttribute(4.0, forKey: "cart.weight_kg")
    client.setAttribute(2.5, forKey: "cart.total")
    client.setAttribute("eu-west-1", forKey: "region")
    client.setUser(id: "someone-else")
    client.setUser(id: nil)
    client.setUser(id: "user-42")
    guard let report = client.send(message: "card declined") else { return 1 }
    let sent = flushedAndSent(report, client) && client.store.list(.pending).reports.isEmpty
    print("sent \(sent ? "yes" : "no")")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  }
]
