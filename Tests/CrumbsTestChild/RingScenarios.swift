import Crumbs
import CrumbsTestChildC

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
  },

  // ring-start-loop DIR GATE COUNT: waits at the start gate GATE, then COUNT times does what a
  // starting process does with its Crumbs directory: creates its ring, claims (and finishes)
  // the rings of gone writers, closes its ring. Prints "error DESCRIPTION" for each ring it
  // could not create and "done CREATED CLAIMED" at the end.
  "ring-start-loop": { arguments in
    guard arguments.count == 3, let count = Int(arguments[2]) else {
      print("usage: ring-start-loop DIR GATE COUNT")
      return 64
    }
    guard crumbs_test_wait_at_gate(arguments[1]) == 0 else {
      print("error gate: errno \(errno)")
      return 1
    }
    do {
      let directory = try RingDirectory(path: arguments[0])
      var options = RingOptions()
      options.slotCount = 64
      var (created, claimedCount) = (0, 0)
      for _ in 0..<count {
        do {
          let ring = try directory.createRing(options: options)
          created += 1
          for claimed in directory.claimLeftovers(excluding: ring.sessionID).claimed {
            claimedCount += 1
            claimed.finish()
          }
          ring.close()
        } catch {
          print("error \(error)")
        }
      }
      print("done \(created) \(claimedCount)")
      return 0
    } catch {
      print("error \(error)")
      return 1
    }
  },
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
