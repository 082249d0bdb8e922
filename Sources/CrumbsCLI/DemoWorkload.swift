import Crumbs

// The demo child's pretend app: threads serving requests and leaving breadcrumbs.
#if canImport(Glibc)
  import Glibc
#endif

/// Worker threads that append realistic breadcrumbs until the process dies.
final class DemoWorkload: @unchecked Sendable {
  private var appended = 0
  private var lock = pthread_mutex_t()

  static func start(threads: Int) -> DemoWorkload {
    let workload = DemoWorkload()
    pthread_mutex_init(&workload.lock, nil)
    for worker in 0..<threads {
      let context = Unmanaged.passRetained(WorkerContext(workload: workload, worker: worker)).toOpaque()
      var thread = pthread_t()
      pthread_create(
        &thread, nil,
        { raw in
          let context = Unmanaged<WorkerContext>.fromOpaque(raw!).takeRetainedValue()
          context.workload.serve(worker: context.worker)
          return nil
        }, context)
      pthread_detach(thread)
    }
    return workload
  }

  private func serve(worker: Int) {
    let routes = ["/v1/cart", "/v1/catalog/42", "/v1/user/profile", "/v1/recommendations"]
    var request = 0
    while true {
      let route = routes[(request + worker) % routes.count]
      let status = request % 17 == 5 ? "503" : "200"
      addBreadcrumb(
        "GET \(route) → \(status)", level: status == "200" ? .debug : .warning, type: .http,
        attributes: ["http.route": route, "http.status_code": status, "worker": String(worker)])
      if request % 5 == 0 {
        addBreadcrumb(
          "cache miss for \(route)", level: .debug, type: .log, attributes: ["worker": String(worker)])
      }
      request += 1
      pthread_mutex_lock(&lock)
      appended += request % 5 == 1 ? 2 : 1
      pthread_mutex_unlock(&lock)
      usleep(200)
    }
  }

  /// Blocks until the workers have appended at least `count` breadcrumbs.
  func waitUntil(appended count: Int) {
    while true {
      pthread_mutex_lock(&lock)
      let done = appended >= count
      pthread_mutex_unlock(&lock)
      if done { return }
      usleep(1_000)
    }
  }
}

private final class WorkerContext {
  let workload: DemoWorkload
  let worker: Int
  init(workload: DemoWorkload, worker: Int) {
    self.workload = workload
    self.worker = worker
  }
}
