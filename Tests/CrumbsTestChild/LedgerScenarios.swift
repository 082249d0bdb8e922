import Crumbs
import CrumbsTestChildC

// In-flight ledger scenarios: operations open when the process dies. Each takes the Crumbs
// directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let ledgerScenarios: [String: @Sendable ([String]) -> Int32] = [
  // ledger-death DIR crash|kill: starts a client; two threads each begin an operation (one with
  // a trace and attributes) and wait forever; one operation begun and ended; prints "held"
  // once both threads hold theirs. crash: the main thread begins "POST /v1/crash" and stores
  // through null. kill: prints "ready" and waits for the test's SIGKILL.
  "ledger-death": { arguments in
    guard arguments.count == 2 else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    guard let client = startClient(configuration) else { return 1 }
    client.beginOperation("GET /v1/finished").end()
    let held = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
    pthread_barrier_init(held, nil, 3)
    let barrier = BarrierBox(held)
    spawnThread {
      let trace = TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7")
      let order = client.beginOperation("GET /v1/orders/:id", trace: trace, parentSpanID: "b7ad6b7169203331")
      order.setAttribute("url.path", "/v1/orders/" + String(getpid() % 1000))
      print("order-thread \(crumbs_test_gettid())")
      pthread_barrier_wait(barrier.pointer)
      while true { pause() }
    }
    spawnThread {
      _ = client.beginOperation("orders.export", kind: .job)
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
    _ = client.beginOperation("POST /v1/crash")
    print("crash-thread \(crumbs_test_gettid())")
    return crashThroughNull(client)
  }
]
