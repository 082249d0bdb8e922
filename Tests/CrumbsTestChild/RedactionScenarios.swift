import Crumbs

// Redaction scenarios (issue 25): an app that records secrets, reports a non-fatal error and
// dies, for the next launch (or `crumbs collect`) to report without them.
#if canImport(Glibc)
  import Glibc
#endif

let redactionScenarios: [String: @Sendable ([String]) -> Int32] = [
  // redaction-crash DIR: starts a client (redaction: the defaults, or Redaction.off when
  // CRUMBS_TEST_REDACTION is `off`; its termination message goes to DIR/termination-log), sets the attribute db.password=hunter2, adds the breadcrumb "login
  // token=abc123" with attributes password=hunter2, stores a non-fatal report "request failed:
  // Authorization: Bearer xyzSECRET" (api_key=abc123), prints "session ID" then "crashing", and
  // dies in fatalError("Authorization: Bearer xyzSECRET").
  "redaction-crash": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.terminationMessagePath = directory + "/termination-log"
    if let mode = getenv("CRUMBS_TEST_REDACTION"), String(cString: mode) == "off" {
      configuration.redaction = .off
    }
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
    fatalError("Authorization: Bearer xyzSECRET")
  }
]
