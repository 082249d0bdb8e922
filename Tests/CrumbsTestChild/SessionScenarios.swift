import Crumbs
import CrumbsPlatform
import CrumbsTestChildC
import Dispatch

// Session scenarios: what a CrumbsClient leaves for the next launch when the process exits soon
// after start, starts a second client, sets metadata and crashes, or loses a crash signal to
// another handler. Each takes the Crumbs directory as its first argument.
#if canImport(Glibc)
  import Glibc
#endif

let sessionScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-relative-chdir BASE: holds the client's background work (see the next scenario),
  // changes to BASE, starts a client with the relative directory "crumbs", changes to
  // BASE/elsewhere (made here), sets the attribute "after.chdir" = "yes", prints "crashing" and
  // dereferences null.
  "client-relative-chdir": { arguments in
    guard let base = arguments.first else { return 64 }
    CrumbsClient.backgroundWorkWillStart.withLock {
      $0 = {
        let never = DispatchSemaphore(value: 0)
        never.wait()
      }
    }
    guard chdir(base) == 0, mkdir("elsewhere", 0o700) == 0 else {
      print("error cannot chdir or mkdir: errno \(errno)")
      return 1
    }
    var configuration = CrumbsConfiguration(directory: "crumbs")
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    guard chdir("elsewhere") == 0 else { return 1 }
    client.setAttribute("yes", forKey: "after.chdir")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },

  // client-crash-before-background DIR [redacting]: holds the client's background work before
  // it starts (so the background work writes no session file), starts a client (no automatic
  // breadcrumbs; OTEL_* from the environment), prints "start-ms X cpu-ms Y" and dereferences
  // null at once. redacting: the client redacts e-mail addresses, and a breadcrumb holds one.
  "client-crash-before-background": { arguments in
    guard let directory = arguments.first else { return 64 }
    let redacting = arguments.dropFirst().first == "redacting"
    CrumbsClient.backgroundWorkWillStart.withLock {
      $0 = {
        let never = DispatchSemaphore(value: 0)
        never.wait()
      }
    }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    if redacting { configuration.redaction.valuePatterns = [Redaction.emailAddresses] }
    let before = nanoseconds(CLOCK_MONOTONIC)
    let cpuBefore = nanoseconds(CLOCK_THREAD_CPUTIME_ID)
    guard let client = startClient(configuration) else { return 1 }
    if redacting { client.addBreadcrumb("mailing alice@example.com") }
    let cpu = nanoseconds(CLOCK_THREAD_CPUTIME_ID) - cpuBefore
    print("start-ms \(Double(nanoseconds(CLOCK_MONOTONIC) - before) / 1e6) cpu-ms \(Double(cpu) / 1e6)")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },

  // client-quick-exit DIR: pinned to one CPU, so the client's background thread gets no time
  // before main returns; starts a client (default configuration, app version "1.0"), adds one
  // breadcrumb and returns 0 at once.
  "client-quick-exit": { arguments in
    guard let directory = arguments.first else { return 64 }
    guard crumbs_test_pin_to_one_cpu() == 0 else {
      print("error cannot pin: errno \(errno)")
      return 1
    }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.appVersion = "1.0"
    guard let client = startClient(configuration) else { return 1 }
    client.addBreadcrumb("one")
    return 0
  },

  // client-cli-flush DIR URL SECONDS [async]: a short-lived CLI. Starts a client (no automatic
  // breadcrumbs) delivering OTLP to URL, reports a non-fatal message ("cli step failed"), calls
  // flush(timeout: SECONDS) (the async variant with "async") and prints
  // "flushed delivered=D pending=P timed-out=T busy=B" and "problem TEXT" for each of the
  // client's problems, then returns from main at once, as a CLI does: no close(), nothing else
  // waits.
  "client-cli-flush": { arguments in
    guard arguments.count >= 3, let seconds = Double(arguments[2]) else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.destinations = [.otlp(endpoint: arguments[1])]
    guard let client = startClient(configuration) else { return 1 }
    client.send(message: "cli step failed")
    let result: FlushResult
    if arguments.count == 4 && arguments[3] == "async" {
      let box = ResultBox()
      let done = DispatchSemaphore(value: 0)
      Task {
        box.result = await client.flush(timeout: seconds)
        done.signal()
      }
      done.wait()
      guard let value = box.result else { return 1 }
      result = value
    } else {
      result = client.flush(timeout: seconds)
    }
    print(
      "flushed delivered=\(result.delivered) pending=\(result.pending) timed-out=\(result.timedOut) "
        + "busy=\(result.storeBusy)")
    for problem in client.problems { print("problem \(problem)") }
    return 0
  },

  // client-tls-at-exit DIR URL: a short-lived CLI as above (delivering a non-fatal report to URL
  // and flushing, which loads libcurl), with an exit hook registered before anything else, as an
  // application's own would be. Exit hooks run last-registered first, so that hook runs after any
  // hook the libraries loaded since registered, while the uploader's thread may still be in a TLS
  // exchange. It prints "tls-at-exit usable" when OpenSSL (as libcurl loaded it) can still be
  // used there, "tls-at-exit cleaned-up" when its own exit hook already tore it down, and
  // "tls-at-exit absent" when no libcrypto.so.3 is loaded (a libcurl on another TLS library).
  "client-tls-at-exit": { arguments in
    guard arguments.count == 2 else { return 64 }
    atexit {
      var verdict = "absent"
      if let crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_NOLOAD),
        let symbol = dlsym(crypto, "OPENSSL_init_crypto")
      {
        let initialize = unsafeBitCast(
          symbol, to: (@convention(c) (UInt64, UnsafeRawPointer?) -> Int32).self)
        verdict = initialize(0, nil) == 1 ? "usable" : "cleaned-up"
      }
      print("tls-at-exit \(verdict)")
      fflush(nil)
    }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.destinations = [.otlp(endpoint: arguments[1])]
    guard let client = startClient(configuration) else { return 1 }
    client.send(message: "cli step failed")
    _ = client.flush(timeout: 120)
    return 0
  },

  // client-hostile-settings DIR URL: a client whose settings are out of every range (a request
  // timeout of infinity, retry intervals of 1e300 and infinity, NaN jitter and close timeout)
  // delivering OTLP to URL (the test's server refuses with 503): reports a non-fatal message,
  // flushes (60 s), prints "flushed delivered=D pending=P", "problem TEXT" for each problem,
  // closes and exits 0. A trap ends it by SIGILL instead.
  "client-hostile-settings": { arguments in
    guard arguments.count == 2 else { return 64 }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.destinations = [.otlp(endpoint: arguments[1])]
    configuration.requestTimeout = .infinity
    configuration.closeTimeout = .nan
    configuration.database.retryInterval = 1e300
    configuration.database.maxRetryInterval = .infinity
    configuration.database.jitter = .nan
    configuration.database.defaultRetryAfter = .infinity
    guard let client = startClient(configuration) else { return 1 }
    client.send(message: "settings out of range")
    let result = client.flush(timeout: 60)
    print("flushed delivered=\(result.delivered) pending=\(result.pending)")
    for problem in client.problems { print("problem \(problem)") }
    client.close()
    return 0
  },

  // client-start-at-gate DIR GATE: waits at the start gate GATE (StartGate), starts a client
  // (no automatic breadcrumbs), waits for its processing of earlier sessions (up to 120 s) and
  // prints "started N" (N: problems that processing met), or "error DESCRIPTION"; then closes
  // the client and returns 0.
  "client-start-at-gate": { arguments in
    guard arguments.count == 2 else { return 64 }
    guard crumbs_test_wait_at_gate(arguments[1]) == 0 else {
      print("error gate: errno \(errno)")
      return 1
    }
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    guard let outcome = client.waitForPreviousSessions(timeout: 120) else {
      print("error previous sessions not processed in 120 s")
      return 1
    }
    print("started \(outcome.problems.count) \(outcome.problems)")
    fflush(nil)
    client.close()
    return 0
  },

  // client-start-twice DIR: starts a client, then another; prints "second-start ok" or
  // "second-start error DESCRIPTION", then "crashing", and dereferences null.
  "client-start-twice": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    guard let first = startClient(configuration) else { return 1 }
    first.addBreadcrumb("first client started")
    do {
      let second = try CrumbsClient.start(configuration)
      second.addBreadcrumb("second client started")
      print("second-start ok")
    } catch {
      print("second-start error \(error)")
    }
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },

  // client-metadata DIR: starts a client with app version "1.0", sets the attribute
  // region=eu-west-1, attaches DIR/app.log ("last log line\n"), prints "crashing" and
  // dereferences null.
  "client-metadata": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.appVersion = "1.0"
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    client.setAttribute("eu-west-1", forKey: "region")
    let log = directory + "/app.log"
    guard let file = fopen(log, "w") else { return 1 }
    fputs("last log line\n", file)
    fclose(file)
    client.addAttachment(path: log)
    client.addBreadcrumb("about to crash")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },

  // client-otel-env DIR: a client configured by the OTEL_* variables of its environment alone
  // (the test sets them): waits for its start-up work, prints "problem TEXT" for each problem,
  // records a breadcrumb in a span (trace_id/span_id attributes) and sends a non-fatal report
  // in it, flushes (up to 60 s) until that report was delivered (prints "sent yes" or "sent no"),
  // then prints "crashing" and dereferences null on the same thread.
  "client-otel-env": { arguments in
    guard let directory = arguments.first else { return 64 }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.automaticBreadcrumbs = nil
    guard let client = startClient(configuration) else { return 1 }
    client.waitForPreviousSessions()
    for problem in client.problems { print("problem \(problem)") }
    let span = [
      "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "trace_flags": "1",
    ]
    client.addBreadcrumb(
      "handling request", attributes: BreadcrumbAttributes(span.map { ($0.key, $0.value) }))
    guard let report = client.send(message: "card declined", attributes: span) else { return 1 }
    print("sent \(flushedAndSent(report, client) ? "yes" : "no")")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },

  // client-env-only: a client configured in code by nothing at all (`CrumbsConfiguration()`,
  // automatic breadcrumbs and hang detection off): its directory, version and destination come
  // from the CRUMBS_* and OTEL_* variables the test gave this process. Prints "directory PATH"
  // (the one the client uses), "problem TEXT" for each problem, sends a non-fatal report,
  // flushes (up to 60 s) and prints "sent yes" or "sent no", then closes and exits 0. Without a
  // directory anywhere it prints "error TEXT" and exits 1.
  "client-env-only": { _ in
    var configuration = CrumbsConfiguration()
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    guard let client = startClient(configuration) else { return 1 }
    client.waitForPreviousSessions()
    print("directory \(client.configuration.directory)")
    for problem in client.problems { print("problem \(problem)") }
    guard let report = client.send(message: "configured by the environment") else { return 1 }
    print("sent \(flushedAndSent(report, client) ? "yes" : "no")")
    client.close()
    fflush(nil)
    return 0
  },

  // client-handler-replaced DIR crash|exit: starts a client (app version "1.0") and waits for
  // its background start-up work; then another handler takes a crash signal.
  //   crash: SIGSEGV is set back to SIG_DFL (a library that does not chain); with the memory
  //          monitor sampling every 100 ms, waits (bounded) until the session file next to the
  //          ring names SIGSEGV and prints "noticed yes" (or "noticed no"), then "crashing", and
  //          dereferences null: the process dies by SIGSEGV without a crash record.
  //   exit:  no automatic breadcrumbs; SIGABRT is set to SIG_IGN, then the process exits 0.
  //   at-once: no automatic breadcrumbs (no pass checks the handler); SIGSEGV is set back to
  //          SIG_DFL and null is dereferenced at once: no check ran between the two.
  "client-handler-replaced": { arguments in
    guard arguments.count == 2 else { return 64 }
    let directory = arguments[0]
    let crashes = arguments[1] == "crash"
    if arguments[1] == "at-once" {
      var configuration = CrumbsConfiguration(directory: directory)
      configuration.appVersion = "1.0"
      configuration.automaticBreadcrumbs = nil
      guard let client = startClient(configuration) else { return 1 }
      client.waitForPreviousSessions()
      signal(SIGSEGV, SIG_DFL)
      print("crashing")
      fflush(nil)
      crumbs_test_null_deref()
      return 71
    }
    var configuration = CrumbsConfiguration(directory: directory)
    configuration.appVersion = "1.0"
    if crashes {
      var automatic = AutomaticBreadcrumbsOptions()
      automatic.signals = nil
      var memory = MemoryPressureConfiguration()
      memory.samplingIntervalMilliseconds = 100
      automatic.memoryPressure = memory
      configuration.automaticBreadcrumbs = automatic
    } else {
      configuration.automaticBreadcrumbs = nil
    }
    guard let client = startClient(configuration) else { return 1 }
    client.waitForPreviousSessions()
    guard crashes else {
      signal(SIGABRT, SIG_IGN)
      print("exiting")
      fflush(nil)
      return 0
    }
    signal(SIGSEGV, SIG_DFL)
    let sessionFile = directory + "/rings/\(client.sessionID).session.json"
    let deadline = nanoseconds(CLOCK_MONOTONIC) + 30_000_000_000
    var noticed = false
    while !noticed && nanoseconds(CLOCK_MONOTONIC) < deadline {
      noticed = fileContains(sessionFile, "SIGSEGV")
      if !noticed { usleep(10_000) }
    }
    print("noticed \(noticed ? "yes" : "no")")
    print("crashing")
    fflush(nil)
    crumbs_test_null_deref()
    return 71
  },
]

/// Carries an async result to a waiting thread (written before the semaphore is signalled).
private final class ResultBox: @unchecked Sendable {
  var result: FlushResult?
}

/// Starts a client (shared), or prints the error and returns nil (every scenario table's).
func startClient(_ configuration: CrumbsConfiguration) -> CrumbsClient? {
  do {
    return try CrumbsClient.start(configuration)
  } catch {
    print("error \(error)")
    fflush(nil)
    return nil
  }
}

/// The end of every "client crashes" scenario: "about to crash" in the trail, "session ID" and
/// "crashing" printed, then a null store. Returns only if the store did not crash (exit 71).
func crashThroughNull(_ client: CrumbsClient) -> Int32 {
  client.addBreadcrumb("about to crash")
  print("session \(client.sessionID)")
  print("crashing")
  fflush(nil)
  crumbs_test_null_deref()
  return 71
}

/// Whether `report` went out: one flush (a delivery pass already running in this process is
/// waited for), up to 60 s.
func flushedAndSent(_ report: StoredReport, _ client: CrumbsClient) -> Bool {
  client.flush(timeout: 60)
  return client.store.list(.sent).reports.contains { $0.report.id == report.report.id }
}

private func fileContains(_ path: String, _ text: String) -> Bool {
  (try? Syscall.readFile(path)).map { String(decoding: $0, as: UTF8.self).contains(text) } ?? false
}
