import Crumbs
import CrumbsPlatform
import Synchronization

// The demo child's pretend app: threads serving requests and leaving breadcrumbs.
#if canImport(Glibc)
  import Glibc
#endif

/// Worker threads that append realistic breadcrumbs until the process dies.
final class DemoWorkload: Sendable {
  private let appended = Mutex(0)

  static func start(threads: Int) -> DemoWorkload {
    let workload = DemoWorkload()
    for worker in 0..<threads {
      try? BackgroundThread.start(name: "demo.worker\(worker)") { workload.serve(worker: worker) }
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
      appended.withLock { $0 += request % 5 == 1 ? 2 : 1 }
      usleep(200)
    }
  }

  /// Blocks until the workers have appended at least `count` breadcrumbs.
  func waitUntil(appended count: Int) {
    while appended.withLock({ $0 }) < count { usleep(1_000) }
  }
}
