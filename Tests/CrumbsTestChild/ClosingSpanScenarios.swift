import Crumbs
import CrumbsTestChildC

// Closing-span scenarios: traced operations open when the process dies, for the spans the next
// launch sends over OTLP `/v1/traces`. Each takes the Crumbs directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let closingSpanScenarios: [String: @Sendable ([String]) -> Int32] = [
  // closing-spans DIR crash|kill: starts a client that redacts e-mail addresses; two threads
  // each begin a traced operation (one a child of a remote parent, with a `password` attribute
  // and an e-mail address in its name) and wait forever; an untraced one is held too, and a
  // traced one begun and ended. Prints "held" once they hold theirs. crash: the main thread
  // begins "POST /v1/crash" (traced), adds a breadcrumb in a child span of it (the crash
  // record's trace) and stores through null. kill: prints "ready" and waits for SIGKILL.
  "closing-spans": { arguments in
    guard arguments.count == 2 else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.redaction.valuePatterns = [Redaction.emailAddresses]
    guard let client = startClient(configuration) else { return 1 }
    client.beginOperation(
      "GET /v1/finished",
      trace: TraceContext(traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b9c7c989f97918e1")
    ).end()
    let held = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
    pthread_barrier_init(held, nil, 4)
    let barrier = BarrierBox(held)
    spawnThread {
      let trace = TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7")
      let order = client.beginOperation(
        "GET /v1/users/alice@example.com/orders", trace: trace, parentSpanID: "b7ad6b7169203331")
      order.setAttribute("url.path", "/v1/users/alice@example.com/orders")
      order.setAttribute("password", "hunter2")
      print("order-thread \(crumbs_test_gettid())")
      pthread_barrier_wait(barrier.pointer)
      while true { pause() }
    }
    spawnThread {
      let trace = TraceContext(traceID: "5bf92f3577b34da6a3ce929d0e0e4737", spanID: "10f067aa0ba902b8")
      _ = client.beginOperation("orders.export", kind: .job, trace: trace)
      pthread_barrier_wait(barrier.pointer)
      while true { pause() }
    }
    spawnThread {
      _ = client.beginOperation("untraced.job", kind: .job)
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
    let trace = TraceContext(traceID: "6bf92f3577b34da6a3ce929d0e0e4738", spanID: "20f067aa0ba902b9")
    _ = client.beginOperation("POST /v1/crash", trace: trace, parentSpanID: "c7ad6b7169203332")
    client.addBreadcrumb(
      "charging the card",
      attributes: ["trace_id": "6bf92f3577b34da6a3ce929d0e0e4738", "span_id": "30f067aa0ba902ba"])
    print("crash-thread \(crumbs_test_gettid())")
    return crashThroughNull(client)
  }
]
