import Crumbs
import CrumbsTestChildC

// Report scenarios: crash through named Swift functions, so the next launch's report can be
// checked for the function that trapped and its callers.
//   report-crash DIR   (kind from CRUMBS_TEST_CRASH_KIND, a CrashKind raw value)
//   report-inlined-crash DIR   (a fault in a function forced inline)
// Prints what the crash scenarios print (ring, record, thread, last-breadcrumb, crashing).
#if canImport(Glibc)
  import Glibc
#endif

let reportScenarios: [String: @Sendable ([String]) -> Int32] = [
  // read-then-probe-malloc ring|elf FILE PROBE_BYTES: reads FILE as a next launch does (a ring
  // with RingReader.read(file:), a module's symbols with ELFImage.read(path:)), prints
  // "read N" (breadcrumbs or symbols), then whether malloc still serves a block of PROBE_BYTES
  // with a mapping of its own: "maps-own-block yes|no".
  "read-then-probe-malloc": { arguments in
    guard arguments.count == 3, ["ring", "elf"].contains(arguments[0]), let probe = Int(arguments[2]) else {
      print("usage: read-then-probe-malloc ring|elf FILE PROBE_BYTES")
      return 64
    }
    do {
      let count =
        arguments[0] == "ring"
        ? try RingReader.read(file: arguments[1]).breadcrumbs.count
        : try ELFImage.read(path: arguments[1]).symbolCount
      print("read \(count)")
    } catch {
      print("error \(error)")
      return 1
    }
    print("maps-own-block \(crumbs_test_malloc_maps_block(probe) == 1 ? "yes" : "no")")
    return 0
  },

  // client-debugger DIR: starts a CrumbsClient with allowsAttachingDebugger = false and prints
  // "crash-handler installed" or "crash-handler absent" (absent when a tracer is attached).
  "client-debugger": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    configuration.allowsAttachingDebugger = false
    do {
      let client = try CrumbsClient.start(configuration, shared: false)
      print("crash-handler \(CrashHandler.isInstalled ? "installed" : "absent")")
      client.close()
      return 0
    } catch {
      print("error \(error)")
      return 1
    }
  },
  "report-crash": crashing { _ in
    let name = getenv("CRUMBS_TEST_CRASH_KIND").map { String(cString: $0) } ?? "null-deref"
    guard let kind = CrashKind(rawValue: name) else {
      print("error unknown kind \(name)")
      return
    }
    armAndFlush()
    ReportWorkload.checkout(kind)
  },
  // report-inlined-crash DIR: dies of SIGSEGV inside a function forced inline
  // (`InlinedWorkload.store`, inlined in a release build, a call of its own in a debug one),
  // called by an ordinary app function (`InlinedWorkload.record`) called by another
  // (`InlinedWorkload.enter`). The lines a report must name are marked `// line-of:` below.
  "report-inlined-crash": crashing { arguments in
    armAndFlush()
    // An address no page holds, that the optimizer cannot see: 8 bytes per argument.
    InlinedWorkload.enter(UInt(8 * (arguments.count + 1)))
  },
]

/// The calls of `report-inlined-crash`.
enum InlinedWorkload {
  @inline(never) static func enter(_ address: UInt) {
    addBreadcrumb("entering", level: .info, type: .user)
    record(address)  // line-of: enter calls record
    print("unreachable: enter")
  }

  @inline(never) static func record(_ address: UInt) {
    addBreadcrumb("recording", level: .info, type: .user)
    store(Int(address), at: address)  // line-of: record calls store
    print("unreachable: record")
  }

  @inline(__always) static func store(_ value: Int, at address: UInt) {
    // The report's source lines must not carry this: password: hunter2-in-source // line-of: a secret
    UnsafeMutablePointer<Int>(bitPattern: address)!.pointee = value  // line-of: store faults
  }
}

/// Three named callers between the scenario and the crash. Each does something different
/// (a distinct breadcrumb), so a release build cannot merge them into one function.
enum ReportWorkload {
  @inline(never) static func checkout(_ kind: CrashKind) {
    addBreadcrumb("checkout started", level: .info, type: .navigation, attributes: ["screen": "checkout"])
    pay(kind)
    print("unreachable: checkout")
  }

  @inline(never) static func pay(_ kind: CrashKind) {
    addBreadcrumb("paying", level: .info, type: .user, attributes: ["button": "pay"])
    charge(kind)
    print("unreachable: pay")
  }

  @inline(never) static func charge(_ kind: CrashKind) {
    addBreadcrumb("charging card", level: .info, type: .http, attributes: ["http.route": "/v1/charge"])
    generateTestCrash(kind: kind)
  }
}
