import Crumbs

// Redaction scenarios (issue 25): an app that records secrets, reports a non-fatal error and
// dies, for the next launch (or `crumbs collect`) to report without them.
#if canImport(Glibc)
  import Glibc
#endif

let redactionScenarios: [String: @Sendable ([String]) -> Int32] = [
  // redaction-crash DIR: starts a client (redaction: the defaults; Redaction.off when
  // CRUMBS_TEST_REDACTION is `off`; the defaults and 40 keys of 30 bytes, over what the crash
  // handler keeps, when it is `many-keys`; its termination message goes to DIR/termination-log),
  // sets the attribute db.password=hunter2, adds the breadcrumb "login token=abc123" with
  // attributes password=hunter2, stores a non-fatal report "request failed: Authorization:
  // Bearer xyzSECRET" (api_key=abc123), prints "session ID" then "crashing", and dies in
  // fatalError with CRUMBS_TEST_FATAL_MESSAGE, else "Authorization: Bearer xyzSECRET".
  "redaction-crash": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.terminationMessagePath = directory + "/termination-log"
    switch getenv("CRUMBS_TEST_REDACTION").map({ String(cString: $0) }) {
    case "off": configuration.redaction = .off
    case "many-keys":
      configuration.redaction.keys =
        Redaction.defaultKeys + (0..<40).map { "x-internal-credential-field-\($0 + 10)" }
    default: break
    }
    let fatalMessage =
      getenv("CRUMBS_TEST_FATAL_MESSAGE").map { String(cString: $0) } ?? "Authorization: Bearer xyzSECRET"
    guard let client = startClient(configuration) else { return 1 }
    client.setAttribute("hunter2", forKey: "db.password")
    client.addBreadcrumb("login token=abc123", level: .info, type: .http, attributes: ["password": "hunter2"])
    guard
      client.send(
        message: "request failed: Authorization: Bearer xyzSECRET", attributes: ["api_key": "abc123"])
        != nil
    else {
      print("error no non-fatal report")
      return 1
    }
    print("session \(client.sessionID)")
    print("crashing")
    fflush(nil)
    fatalError(fatalMessage)
  },
  // pattern-crash DIR PATTERN: starts a client whose only value pattern is PATTERN (no
  // termination message), writes its session file (an attribute), adds the breadcrumbs "hostile " + 200 × "a" (no match for a pattern
  // ending in `Q$`: a backtracking matcher tries every split of the a's) and "match " + 50 × "b"
  // + "Q", prints "crashing" and dies in fatalError. Nothing in the app applies the pattern: the
  // processor (`crumbs collect`) does.
  "pattern-crash": { arguments in
    guard arguments.count == 2 else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.terminationMessagePath = nil
    configuration.redaction.valuePatterns = [arguments[1]]
    guard let client = startClient(configuration) else { return 1 }
    // The session file (with the pattern) is written by the background work after start, or at
    // once by an attribute: without it the processor would apply its own rules, and a crash
    // that beat the background work (a loaded machine) would test nothing.
    client.setAttribute("pattern-crash", forKey: "scenario")
    addBreadcrumb("hostile " + String(repeating: "a", count: 200), level: .info)
    addBreadcrumb("match " + String(repeating: "b", count: 50) + "Q", level: .info)
    print("crashing")
    fflush(nil)
    fatalError("pattern-crash")
  },
]
