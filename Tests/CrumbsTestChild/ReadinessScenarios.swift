import Crumbs
import CrumbsPlatform
import Dispatch
import Synchronization

// Readiness scenarios: when the previous sessions' work runs, and at what priority, as seen from
// inside that work (the delegate's shouldProcess runs on its thread).
#if canImport(Glibc)
  import Glibc
#endif

let readinessScenarios: [String: @Sendable ([String]) -> Int32] = [
  // client-previous-when-ready DIR MODE: starts a client over DIR (where an earlier session
  // crashed) whose delegate prints, from the first report it is asked about, "processed
  // ready=<whether appIsReady was called> nice=<its thread's nice value> thread=<its name>",
  // read from /proc/thread-self. First prints "base <this thread's nice value>". MODE:
  //   ready   waits up to 3 s for the work to start on its own (previousSessionsDelay 600), prints
  //           "early true|false"; then "start-up nice=<N>": the nice value of the thread of
  //           start's own work ("crumbs.start") once it is 19 (at most 60 s), else as it is then;
  //           then calls appIsReady() and waits for the work
  //   waiter  asks hasCrashedInLastSession at once (previousSessionsDelay 600), prints
  //           "crashed true|false"
  //   delay   previousSessionsDelay 0.2, nothing else: waits for the work
  "client-previous-when-ready": { arguments in
    guard arguments.count == 2 else { return 64 }
    let mode = arguments[1]
    let probe = ReadinessProbe()
    var configuration = CrumbsConfiguration(directory: arguments[0])
    configuration.automaticBreadcrumbs = nil
    configuration.hangs = nil
    configuration.previousSessionsDelay = mode == "delay" ? 0.2 : 600
    configuration.delegate = probe
    print("base \(ReadinessProbe.threadNiceValue().map(String.init) ?? "?")")
    fflush(nil)
    guard let client = startClient(configuration) else { return 1 }
    switch mode {
    case "ready":
      let early = probe.processed.wait(timeout: .now() + 3) == .success
      print("early \(early)")
      fflush(nil)
      if early { probe.processed.signal() }
      print("start-up nice=\(ReadinessProbe.startThreadNiceValue(waitingUpTo: 60).map(String.init) ?? "?")")
      fflush(nil)
      probe.ready.withLock { $0 = true }
      client.appIsReady()
    case "waiter":
      print("crashed \(client.hasCrashedInLastSession)")
      fflush(nil)
    case "delay":
      break
    default:
      return 64
    }
    guard probe.processed.wait(timeout: .now() + 120) == .success else {
      print("error the previous session was never processed")
      return 1
    }
    fflush(nil)
    return 0
  }
]

/// The delegate of client-previous-when-ready: reports the thread it is first called on.
private final class ReadinessProbe: CrumbsClientDelegate {
  let ready = Mutex(false)
  let processed = DispatchSemaphore(value: 0)
  private let told = Mutex(false)

  func shouldProcess(_ report: CrashReport) -> Bool {
    let first = told.withLock { told in
      defer { told = true }
      return !told
    }
    if first {
      let comm = (try? Syscall.readFile("/proc/thread-self/comm")).map { String(decoding: $0, as: UTF8.self) }
      let name = comm?.split(separator: "\n").first.map(String.init) ?? "?"
      let nice = Self.threadNiceValue().map(String.init) ?? "?"
      print("processed ready=\(ready.withLock { $0 }) nice=\(nice) thread=\(name)")
      fflush(nil)
      processed.signal()
    }
    return true
  }

  /// The nice value of this process's thread named "crumbs.start", polled until it is 19 or
  /// `seconds` have passed; nil when there is no such thread.
  static func startThreadNiceValue(waitingUpTo seconds: Double) -> Int? {
    let tasks = (try? Syscall.directoryEntries("/proc/self/task")) ?? []
    guard
      let task = tasks.first(where: { task in
        let comm = (try? Syscall.readFile("/proc/self/task/\(task)/comm")) ?? []
        return String(decoding: comm, as: UTF8.self).hasPrefix("crumbs.start")
      })
    else { return nil }
    let deadline = DispatchTime.now() + seconds
    var nice = threadNiceValue(stat: "/proc/self/task/\(task)/stat")
    while nice != 19 && DispatchTime.now() < deadline {
      usleep(1000)
      nice = threadNiceValue(stat: "/proc/self/task/\(task)/stat")
    }
    return nice
  }

  /// A thread's nice value: field 19 of its stat file (by default the calling thread's).
  static func threadNiceValue(stat path: String = "/proc/thread-self/stat") -> Int? {
    guard let bytes = try? Syscall.readFile(path) else { return nil }
    let text = String(decoding: bytes, as: UTF8.self)
    // After the name, which may hold spaces and parentheses: from the last ")" on, field 3 is
    // the first.
    guard let end = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: end)...].split(separator: " ")
    return fields.count > 16 ? Int(fields[16]) : nil
  }
}
