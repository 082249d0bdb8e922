// main.swift — a Vapor 4 server with Crumbs, as an app would write it; what ExampleServerTests
// starts, crashes, kills and starts again. Configured by its environment:
//
//   CRUMBS_DIRECTORY, CRUMBS_OTLP_ENDPOINT, …   the client's (CrumbsConfiguration())
//   CRUMBS_MIDDLEWARE=crumbs (default)           CrumbsMiddleware puts each request in the ledger
//   CRUMBS_MIDDLEWARE=tracer                     Vapor's own TracingMiddleware, with CrumbsTracer
//                                                (wrapping NoOpTracer) as the tracer
//   CRUMBS_MIDDLEWARE=none                       no request is put there
//   PORT (default 8080; 0: the kernel's pick) on 127.0.0.1
//
// Routes: GET /health, GET /held/:id (answers only when the process ends: a request in flight),
// GET /crash/:id (a fault in a route). Once it listens it prints "listening on 127.0.0.1:PORT".

import Crumbs
import CrumbsTracing
import CrumbsVapor
import Instrumentation
import Tracing
import Vapor

let environment = ProcessInfo.processInfo.environment
// Started before the routes are built: a crash while the app sets up is already recorded.
let crumbs = try CrumbsClient.start(CrumbsConfiguration())

let app = try await Application.make(Environment(name: "production", arguments: ["serve"]))
app.logger.logLevel = .warning
app.http.server.configuration.hostname = "127.0.0.1"
app.http.server.configuration.port = environment["PORT"].flatMap(Int.init) ?? 8080
switch environment["CRUMBS_MIDDLEWARE"] ?? "crumbs" {
case "crumbs":
  app.middleware.use(CrumbsMiddleware(client: crumbs))
case "tracer":
  // swift-otel's tracer would go where NoOpTracer is: then the spans' ids are the callers'.
  InstrumentationSystem.bootstrap(CrumbsTracer(wrapping: NoOpTracer(), client: crumbs))
  app.middleware.use(TracingMiddleware())
default:
  break
}

app.get("health") { _ in "ok\n" }
app.get("held", ":id") { request -> String in
  // In flight until the process ends: what a death cuts short. The line tells a test it is.
  say("held \(request.parameters.get("id") ?? "?")")
  try await Task.sleep(for: .seconds(24 * 3600))
  return "released\n"
}
app.get("crash", ":id") { _ -> String in
  // A real fault in a route: what the next launch reports.
  let pointer = UnsafeMutablePointer<Int>(bitPattern: 8)!
  pointer.pointee = 1
  return "unreachable\n"
}

try await app.startup()
crumbs.appIsReady()
let port = app.http.server.shared.localAddress?.port ?? -1
say("listening on 127.0.0.1:\(port)")
try await app.running?.onStop.get()
try await app.asyncShutdown()
crumbs.close()

/// Writes `line` to stdout at once (a test reads it through a pipe, where print buffers).
func say(_ line: String) {
  var text = line + "\n"
  text.withUTF8 { bytes in _ = write(1, bytes.baseAddress, bytes.count) }
}
