import Crumbs
import CrumbsTestChildC
import CrumbsTracing
import Tracing

// CrumbsTracer scenarios: spans open when the process dies. Each takes the Crumbs directory as
// its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let tracerScenarios: [String: @Sendable ([String]) -> Int32] = [
  // tracer-death DIR crash|kill: starts a client and a CrumbsTracer over NoOpTracer recording
  // server and consumer spans. One server span is started and ended; a thread holds a server
  // span (its route and user given as span attributes) and another a consumer span, each
  // printing "span NAME TRACE-ID SPAN-ID"; an internal span (not recorded) is left open; prints
  // "held" once both threads hold theirs. crash: the main thread starts "POST /v1/crash" and
  // stores through null. kill: prints "ready" and waits for the test's SIGKILL.
  "tracer-death": { arguments in
    guard arguments.count == 2 else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    guard let client = startClient(configuration) else { return 1 }
    let tracer = CrumbsTracer(wrapping: NoOpTracer(), client: client, kinds: [.server, .consumer])
    tracer.startSpan("GET /v1/finished", context: .topLevel, ofKind: .server).end()
    _ = tracer.startSpan("cache.lookup", context: .topLevel, ofKind: .internal)
    @Sendable func announce(_ span: CrumbsSpan<NoOpTracer.NoOpSpan>, _ name: String) {
      let trace = span.operation?.trace
      print("span \(name) \(trace?.traceID ?? "-") \(trace?.spanID ?? "-")")
    }
    let held = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
    pthread_barrier_init(held, nil, 3)
    let barrier = BarrierBox(held)
    spawnThread {
      let span = tracer.startSpan("HTTP GET route not found", context: .topLevel, ofKind: .server)
      span.updateAttributes { attributes in
        attributes["http.request.method"] = "GET"
        attributes["url.path"] = "/v1/orders/42"
        attributes["enduser.id"] = "user-7"
      }
      announce(span, "order")
      pthread_barrier_wait(barrier.pointer)
      while true { pause() }
    }
    spawnThread {
      announce(tracer.startSpan("orders process", context: .topLevel, ofKind: .consumer), "consumer")
      pthread_barrier_wait(barrier.pointer)
      while true { pause() }
    }
    pthread_barrier_wait(held)
    print("held")
    if arguments[1] == "kill" {
      print("ready")
      fflush(nil)
      while true { pause() }
    }
    announce(tracer.startSpan("POST /v1/crash", context: .topLevel, ofKind: .server), "crash")
    return crashThroughNull(client)
  }
]
