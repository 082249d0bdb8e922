import Crumbs

// Termination message scenarios: a CrumbsClient started with `terminationMessagePath` crashes
// through a named Swift function of this executable, so the line the handler writes can be
// checked for the signal, that function and the report id.
//   termination-crash DIR   (path from CRUMBS_TEST_TERMINATION_PATH, "none" for nil, unset for
//                            the default; kind from CRUMBS_TEST_CRASH_KIND, a CrashKind raw value)
// Prints "problems …" (the client's, "none" when empty), then "crashing".
#if canImport(Glibc)
  import Glibc
#endif

let terminationMessageScenarios: [String: @Sendable ([String]) -> Int32] = [
  "termination-crash": { arguments in
    guard let directory = arguments.first else { return 64 }
    let kindName = getenv("CRUMBS_TEST_CRASH_KIND").map { String(cString: $0) } ?? "null-deref"
    guard let kind = CrashKind(rawValue: kindName) else {
      print("error unknown kind \(kindName)")
      return 64
    }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.answersThreadDumps = false
    configuration.environment = [:]
    if let path = getenv("CRUMBS_TEST_TERMINATION_PATH").map({ String(cString: $0) }) {
      configuration.terminationMessagePath = path == "none" ? nil : path
    }
    do {
      let client = try CrumbsClient.start(configuration, shared: false)
      print("problems \(client.problems.isEmpty ? "none" : client.problems.joined(separator: " | "))")
    } catch {
      print("error \(error)")
      return 1
    }
    print("crashing")
    fflush(nil)
    TerminationWorkload.parseInvoice(kind)
    print("did not crash")
    fflush(nil)
    return 71
  }
]

/// The app's own function the line must name: it crashes through Crumbs' `generateTestCrash`,
/// whose frames (Crumbs' code, linked into this executable) the handler skips.
enum TerminationWorkload {
  @inline(never) static func parseInvoice(_ kind: CrashKind) {
    addBreadcrumb("parsing invoice", level: .info)
    generateTestCrash(kind: kind)
  }
}
