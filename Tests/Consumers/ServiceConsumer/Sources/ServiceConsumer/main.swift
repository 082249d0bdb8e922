// A server under ServiceGroup with Crumbs as one of its services.
//
//   ServiceConsumer serve DIR     runs until SIGTERM; prints "ring PATH" (this session's ring),
//                                 then "ready" once the group watches its signals and every
//                                 service runs, and "stopped" when the group has ended
//   ServiceConsumer inspect DIR   starts Crumbs once more and prints how each earlier session
//                                 ended, one line each: "<end> <signal name or ->"
//   ServiceConsumer report DIR URL   issue 25's API as an app writes it: a delegate and a consent
//                                 handler (answering .always) in the configuration, typed
//                                 attributes, a user, a breadcrumb willSend removes ("internal
//                                 only"), secrets in a breadcrumb and an attribute; sends one
//                                 non-fatal report to URL's OTLP endpoint, flushes, prints
//                                 "pending N" (what is left to send)
import Crumbs
import CrumbsServiceLifecycle
import Logging
import ServiceLifecycle

#if canImport(Glibc)
  import Glibc
#endif

/// Writes one line to stdout at once (a pipe to the test: print() would hold it in a buffer).
func say(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

/// The app's hooks: a breadcrumb it never sends.
final class Hooks: CrumbsClientDelegate {
  func willSend(_ draft: ReportDraft) -> ReportDraft? {
    var draft = draft
    draft.breadcrumbs.removeAll { $0.message == "internal only" }
    return draft
  }
}

/// The server's own work: here, only waiting for the end.
struct Server: Service {
  let crumbs: CrumbsService

  func run() async throws {
    await crumbs.waitUntilWatching()
    addBreadcrumb("server running", type: .system)
    say("ready")
    try? await gracefulShutdown()
    addBreadcrumb("server stopped", type: .system)
  }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
  print("usage: ServiceConsumer serve|inspect DIR | report DIR URL")
  exit(2)
}
var configuration = CrumbsConfiguration(directory: arguments[2])
configuration.appName = "service-consumer"
configuration.appVersion = "1.2.3"

switch arguments[1] {
case "serve":
  let crumbs = try CrumbsService(configuration)
  say("ring \(crumbs.client.ring.path)")
  let group = ServiceGroup(
    services: [crumbs, Server(crumbs: crumbs)], gracefulShutdownSignals: [.sigterm],
    logger: Logger(label: "service-consumer"))
  try await group.run()
  say("stopped")
case "inspect":
  let client = try CrumbsClient.start(configuration)
  let previous = await client.previousSessions
  for session in previous.sessions {
    print(session.end.rawValue, session.endSignal.map { SignalNames.name($0) } ?? "-")
  }
  client.close()
case "report" where arguments.count == 4:
  configuration.destinations = [.otlp(endpoint: arguments[3])]
  configuration.delegate = Hooks()
  configuration.consent = { _ in .always }
  let client = try CrumbsClient.start(configuration)
  client.setAttribute(true, forKey: "feature.beta")
  client.setAttribute(3, forKey: "cart.items")
  client.setUser(id: "acct-7")
  client.addBreadcrumb("internal only")
  client.addBreadcrumb("login token=abc123", attributes: ["password": "hunter2"])
  _ = client.send(message: "checkout failed", attributes: ["api_key": "abc123"])
  // Delivered by the start-up pass or by the flush: nothing left pending either way.
  print("pending \(client.flush(timeout: 120).pending)")
  client.close()
default:
  print("unknown command \(arguments[1])")
  exit(2)
}
