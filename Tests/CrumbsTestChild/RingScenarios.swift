import Crumbs

// Ring scenarios: processes that append until the test kills them.
#if canImport(Glibc)
  import Glibc
#endif

/// Scenarios that exercise the ring from a separate process.
let ringScenarios: [String: @Sendable ([String]) -> Int32] = [
  // append-forever DIR THREADS SLOTS: creates a ring of about SLOTS slots in DIR, prints
  // "ring PATH" and "ready", then THREADS threads append "t=I n=N" (attributes t, n) until the
  // process is killed.
  "append-forever": { arguments in
    guard arguments.count == 3, let threads = Int(arguments[1]), let slots = Int(arguments[2]) else {
      print("usage: append-forever DIR THREADS SLOTS")
      return 64
    }
    do {
      var options = RingOptions()
      options.slotCount = slots
      let ring = try RingDirectory(path: arguments[0]).createRing(options: options)
      ring.install()
      print("ring \(ring.path)")
      print("ready")
      fflush(nil)
      for thread in 0..<threads {
        spawnThread {
          var counter = 0
          let level: BreadcrumbLevel = thread == 0 ? .warning : .info
          while true {
            addBreadcrumb(
              "t=\(thread) n=\(counter)", level: level, type: .manual,
              attributes: ["t": String(thread), "n": String(counter)])
            counter += 1
          }
        }
      }
      while true { pause() }
    } catch {
      print("error \(error)")
      return 1
    }
  }
]

final class ThreadBody: @unchecked Sendable {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a detached thread running `body`.
func spawnThread(_ body: @escaping @Sendable () -> Void) {
  let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
  var thread = pthread_t()
  pthread_create(
    &thread, nil,
    { context in
      Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
      return nil
    }, context)
  pthread_detach(thread)
}
