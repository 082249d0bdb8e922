import Crumbs
import CrumbsTestChildC

// Consent scenarios: apps whose configuration carries a consent handler.
#if canImport(Glibc)
  import Glibc
#endif

let consentScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-consent-crash DIR: starts a client whose configuration has a consent handler (that
  // answers `.dontSend`; it is never asked: nothing is delivered here), adds the breadcrumb
  // "about to crash", prints "session SESSION" then "crashing", and dereferences null.
  "client-consent-crash": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.consent = { _ in .dontSend }
    guard let client = startClient(configuration) else { return 1 }
    return crashThroughNull(client)
  }
]
