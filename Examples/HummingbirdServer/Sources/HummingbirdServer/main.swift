// main.swift — a Hummingbird 2 server with Crumbs, as an app would write it; also what
// Benchmarks/server-bench.py measures and ExampleServerTests starts, crashes, kills and starts
// again. One binary, the variant chosen at run time:
//
//   BENCH_VARIANT=none          no Crumbs at all: the client is never started
//   BENCH_VARIANT=client        CrumbsService in the server's service group (the default);
//                               its configuration comes from the environment
//                               (CRUMBS_DIRECTORY, CRUMBS_OTLP_ENDPOINT, …)
//   BENCH_VARIANT=breadcrumbs   the client, and a breadcrumb at each request's start and end,
//                               with the request's run-time method and path
//   BENCH_VARIANT=ledger        the client, and CrumbsMiddleware: each request in the in-flight
//                               ledger under its route template, with its traceparent's trace id
//   BENCH_VARIANT=traced        the client, and Hummingbird's own TracingMiddleware with the
//                               default tracer (NoOpTracer, none bootstrapped)
//   BENCH_VARIANT=bootstrapped  the client, and Hummingbird's own TracingMiddleware with
//                               NoOpTracer bootstrapped, where an app bootstraps swift-otel's
//                               tracer: `tracer` less CrumbsTracer
//   BENCH_VARIANT=tracer        the client, and Hummingbird's own TracingMiddleware with
//                               CrumbsTracer (wrapping NoOpTracer) as the tracer: the ledger fed
//                               with no Crumbs code in the router
//   BENCH_VARIANT=otel          the client, and TracingMiddleware with swift-otel's tracer
//                               bootstrapped (every span sampled and batched; exported over
//                               OTLP/HTTP to CRUMBS_OTLP_ENDPOINT only with
//                               BENCH_OTEL_EXPORT=otlp): a traced server as most apps run one
//                               (built with CRUMBS_BENCH_OTEL=1 only; see Package.swift)
//   BENCH_VARIANT=otel-tracer   the same, with CrumbsTracer wrapping swift-otel's tracer
//
// Routes: GET /hello (a cheap answer), GET /health, GET /held/:id (answers only when the
// process ends: a request in flight), GET /crash and /crash/:id (a crash in a route, for the next
// launch to report). PORT (default 8080; 0: the kernel's pick) on 127.0.0.1; once it listens it
// prints "listening on 127.0.0.1:PORT (variant)".

import Crumbs
import CrumbsHummingbird
import CrumbsServiceLifecycle
import CrumbsTracing
import Hummingbird
import Instrumentation
import Logging
import ServiceLifecycle
import Tracing

#if canImport(Glibc)
  import Glibc
#endif
#if BENCH_OTEL
  import OTel
#endif

enum Variant: String {
  case none, client, breadcrumbs, ledger, traced, bootstrapped, tracer
  case otel, otelTracer = "otel-tracer"
}

/// Two breadcrumbs a request, with its run-time method and path, the way an app writes them.
struct BreadcrumbMiddleware<Context: RequestContext>: RouterMiddleware {
  let client: CrumbsClient

  func handle(
    _ request: Request, context: Context, next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    client.addBreadcrumb("\(request.method) \(request.uri.path)", type: .http)
    let response = try await next(request, context)
    client.addBreadcrumb(
      "\(request.method) \(request.uri.path) answered", type: .http,
      attributes: ["http.response.status_code": "\(response.status.code)"])
    return response
  }
}

let environment = Environment()
let variant = Variant(rawValue: environment.get("BENCH_VARIANT") ?? "client") ?? .client
let port = environment.get("PORT").flatMap(Int.init) ?? 8080

// Started before the router is built: a crash while the app sets up is already recorded.
let crumbs: CrumbsService? =
  variant == .none
  ? nil
  : try CrumbsService(CrumbsConfiguration(directory: environment.get("CRUMBS_DIRECTORY") ?? "crumbs"))

let router = Router()
if variant == .breadcrumbs, let crumbs {
  router.add(middleware: BreadcrumbMiddleware(client: crumbs.client))
}
if variant == .tracer, let crumbs {
  // swift-otel's tracer would go where NoOpTracer is: then the spans' ids are the callers'.
  InstrumentationSystem.bootstrap(CrumbsTracer(wrapping: NoOpTracer(), client: crumbs.client))
  router.add(middleware: TracingMiddleware())
}
if variant == .traced {
  router.add(middleware: TracingMiddleware())
}
if variant == .bootstrapped {
  InstrumentationSystem.bootstrap(NoOpTracer())
  router.add(middleware: TracingMiddleware())
}
var services: [any Service] = crumbs.map { [$0] } ?? []
if variant == .otel || variant == .otelTracer {
  #if BENCH_OTEL
    var configuration = OTel.Configuration.default
    configuration.serviceName = "HummingbirdServer"
    configuration.logs.enabled = false
    configuration.metrics.enabled = false
    // Every span sampled, processed and batched as swift-otel does by default; sent nowhere
    // unless BENCH_OTEL_EXPORT=otlp: an export costs the same with or without CrumbsTracer, and
    // the bench's loopback collector would take the machine's CPUs from the servers.
    if environment.get("BENCH_OTEL_EXPORT") == "otlp" {
      configuration.traces.exporter = .otlp
      configuration.traces.otlpExporter.protocol = .httpProtobuf
      configuration.traces.otlpExporter.endpoint =
        environment.get("CRUMBS_OTLP_ENDPOINT") ?? "http://127.0.0.1:4318"
    } else {
      configuration.traces.exporter = .none
    }
    let otel = try OTel.makeTracingBackend(configuration: configuration)
    if variant == .otelTracer, let crumbs {
      InstrumentationSystem.bootstrap(CrumbsTracer(wrapping: otel.factory, client: crumbs.client))
    } else {
      InstrumentationSystem.bootstrap(otel.factory)
    }
    router.add(middleware: TracingMiddleware())
    services.append(otel.service)
  #else
    say("the \(variant.rawValue) variant needs swift-otel: build with CRUMBS_BENCH_OTEL=1")
    exit(2)
  #endif
}
// A group's middleware runs once the route is known, so CrumbsMiddleware names each request by
// its template (`GET /crash/:id`), even one that never returns.
let routes = router.group()
if variant == .ledger, let crumbs {
  routes.add(middleware: CrumbsMiddleware(client: crumbs.client))
}
routes.get("hello") { _, _ in "Hello\n" }
routes.get("health") { _, _ in "ok\n" }
routes.get("held/:id") { _, context -> String in
  // In flight until the process ends: what a death cuts short. The line tells a test it is.
  say("held \(context.parameters.get("id") ?? "?")")
  try await Task.sleep(for: .seconds(24 * 3600))
  return "released\n"
}
@Sendable func crash(_ request: Request, _ context: BasicRequestContext) -> String {
  // A real fault in a route: what the next launch reports.
  let pointer = UnsafeMutablePointer<Int>(bitPattern: 8)!
  pointer.pointee = 1
  return "unreachable\n"
}
routes.get("crash", use: crash)
routes.get("crash/:id", use: crash)

var logger = Logger(label: "HummingbirdServer")
logger.logLevel = .warning
let app = Application(
  router: router,
  configuration: .init(address: .hostname("127.0.0.1", port: port)),
  services: services,
  onServerRunning: { channel in
    // It listens: now the previous sessions' work may run (CrumbsService's run, which the group
    // starts before the server binds, would say so too; the first call counts).
    crumbs?.client.appIsReady()
    say("listening on 127.0.0.1:\(channel.localAddress?.port ?? port) (\(variant.rawValue))")
  },
  logger: logger
)
try await app.runService()

/// Writes `line` to stdout at once (a test reads it through a pipe, where print buffers).
func say(_ line: String) {
  var text = line + "\n"
  text.withUTF8 { bytes in _ = write(1, bytes.baseAddress, bytes.count) }
}
