import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

// Signal breadcrumbs and lifecycle: real children receive real signals; the app's own handling
// (its handlers, SIG_IGN, SIGCHLD reaping, death by SIGTERM) is unchanged, the ring tells what
// happened, and the next launch tells an unhandled SIGTERM from a crash and from a clean exit.
#if canImport(Glibc)
  import Glibc
#endif

/// Runs the processor until it has seen one session (bounded): a child spawned by a parallel
/// test holds a copy of a ring's flock from its fork until its exec.
private func nextLaunch(_ directory: String, reports: String) throws -> PostMortemOutcome {
  let rings = try RingDirectory(path: directory)
  let store = try ReportStore(directory: reports)
  var outcome = PostMortemProcessor(directory: rings, store: store).run()
  let deadline = ChildProcess.now() + 10
  while outcome.sessions.isEmpty, ChildProcess.now() < deadline {
    usleep(10_000)
    outcome = PostMortemProcessor(directory: rings, store: store).run()
  }
  return outcome
}

/// Reads the ring until `condition` holds (bounded), returning its breadcrumbs.
private func waitForBreadcrumbs(_ path: String, until condition: ([Breadcrumb]) -> Bool) -> [Breadcrumb] {
  let deadline = ChildProcess.now() + 20
  var crumbs: [Breadcrumb] = []
  repeat {
    crumbs = (try? RingReader.read(file: path))?.breadcrumbs ?? []
    if condition(crumbs) { return crumbs }
    usleep(5_000)
  } while ChildProcess.now() < deadline
  return crumbs
}

private func attribute(_ crumb: Breadcrumb?, _ key: String) -> String? {
  crumb?.attributes.first { $0.key == key }?.value
}

private func isAlive(_ pid: pid_t) -> Bool {
  var status: Int32 = 0
  return waitpid(pid, &status, WNOHANG) == 0
}

@Suite struct SignalBreadcrumbTests {
  @Test func appHandlersStillRunIgnoredStaysIgnoredAndAHandledSIGTERMIsACleanExit() throws {
    let directory = TestDirectory()
    let rings = directory.path + "/rings"
    let child = try ChildProcess(ChildProcess.testChild, ["signals-app", rings])
    let ringPath = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")

    // The app's SA_SIGINFO handler still runs, with the siginfo the kernel gave.
    child.signal(SIGUSR1)
    #expect(child.readLine() == "app SIGUSR1 from \(getpid())")

    // SIG_IGN stays ignored: recorded, and the process lives on.
    child.signal(SIGHUP)
    let afterHangUp = waitForBreadcrumbs(ringPath) { $0.contains { $0.message == "SIGHUP received" } }
    let hangUp = afterHangUp.first { $0.message == "SIGHUP received" }
    #expect(attribute(hangUp, "action") == "ignored")
    #expect(isAlive(child.pid))

    // SIGCHLD with the default action: recorded, and waitpid still reaps the app's own child.
    child.signal(SIGUSR2)
    #expect(child.readLine() == "reaped 7")

    // The app's SIGTERM handler asks main to return: a clean exit.
    child.signal(SIGTERM)
    #expect(child.readLine() == "exiting")
    child.wait()
    #expect(child.exitCode == 0)

    let contents = try RingReader.read(file: ringPath)
    #expect(contents.header.state == .clean)
    let crumbs = contents.breadcrumbs
    let usr1 = crumbs.first { $0.message == "SIGUSR1 received" }
    #expect(usr1?.type == .system)
    #expect(usr1?.level == .info)
    #expect(usr1?.fromSignalHandler == true)
    #expect(attribute(usr1, "signal") == "SIGUSR1")
    #expect(attribute(usr1, "signal.number") == String(SIGUSR1))
    #expect(attribute(usr1, "action") == "handler")
    #expect(attribute(usr1, "signal.code") == "SI_USER")
    #expect(attribute(usr1, "sender.pid") == String(getpid()))
    #expect(attribute(usr1, "sender.uid") == String(getuid()))
    let chld = crumbs.first { $0.message == "SIGCHLD received" }
    #expect(attribute(chld, "action") == "default-ignored")
    #expect(attribute(chld, "signal.code") == "CLD_EXITED")
    #expect(attribute(chld, "child.status") == "7")
    let term = crumbs.first { $0.message == "SIGTERM received" }
    #expect(term?.level == .warning)
    #expect(attribute(term, "action") == "handler")

    // Lifecycle: the start, the app's own point, the exit with its status.
    let start = crumbs.first { attribute($0, "lifecycle") == "start" }
    #expect(start?.message == "process started")
    #expect(attribute(start, "pid") == String(child.pid))
    #expect(attribute(start, "ppid") == String(getpid()))
    #expect(attribute(start, "version") == "9.8.7")
    #expect(attribute(start, "arguments") == "3")
    #expect(attribute(start, "executable")?.hasSuffix("CrumbsTestChild") == true)
    let reload = crumbs.first { attribute($0, "lifecycle") == "config.reload" }
    #expect(reload?.type == .configuration)
    #expect(attribute(reload, "config.file") == "/etc/app.toml")
    let exit = crumbs.last
    #expect(exit?.message == "process exiting")
    #expect(attribute(exit, "exit.status") == "0")

    // The next launch: a clean session, nothing to report.
    let outcome = try nextLaunch(rings, reports: directory.path + "/reports")
    #expect(outcome.lastSession?.end == .clean)
    #expect(outcome.reports.isEmpty)
    #expect(!outcome.hasCrashedInLastSession)
  }

  @Test(arguments: [SIGTERM, SIGINT, SIGHUP, SIGUSR2])
  func anUnhandledTerminatingSignalStillKillsAndEndsTheSessionBySignal(_ signalNumber: Int32) throws {
    let directory = TestDirectory()
    let rings = directory.path + "/rings"
    let child = try ChildProcess(ChildProcess.testChild, ["signals-default", rings])
    let ringPath = try #require(child.value(after: "ring "))
    #expect(child.readLine() == "ready")
    child.signal(signalNumber)
    child.wait()
    // The exit status the shell and the supervisor see is unchanged.
    #expect(child.terminatingSignal == signalNumber)

    let contents = try RingReader.read(file: ringPath)
    #expect(contents.header.state == .terminatedBySignal)
    #expect(contents.header.endSignal == signalNumber)
    let last = contents.breadcrumbs.last
    #expect(last?.message == "\(SignalNames.name(signalNumber)) received")
    #expect(attribute(last, "action") == "terminates")
    #expect(last?.level == .warning)

    let outcome = try nextLaunch(rings, reports: directory.path + "/reports")
    #expect(outcome.lastSession?.end == .terminatedBySignal)
    #expect(outcome.lastSession?.endSignal == signalNumber)
    #expect(outcome.reports.isEmpty)  // not a crash
    #expect(!outcome.hasCrashedInLastSession)
  }

  /// The options keep their default unbuilt (see AutomaticBreadcrumbsOptions.signalChoice);
  /// what they say is unchanged: the default signals, nil, or the set given.
  @Test func optionsSignalsReadAsTheDefaultNilOrTheSetGiven() {
    var options = AutomaticBreadcrumbsOptions()
    #expect(options.signals == SignalBreadcrumbs.defaultSignals)
    options.signals = nil
    #expect(options.signals == nil)
    options.signals = [SIGUSR1]
    #expect(options.signals == [SIGUSR1])
    options.signals = []
    #expect(options.signals == [])
  }

  @Test func installRefusesTheCrashHandlersSignalsAndStops() {
    for signal in [
      SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS, SIGQUIT, SIGKILL, SIGSTOP, SIGTSTP,
    ] {
      #expect(throws: SignalBreadcrumbs.InstallError.refusedSignal(signal)) {
        try SignalBreadcrumbs.install(signals: [SIGTERM, signal])
      }
    }
    #expect(!SignalBreadcrumbs.installedSignals.contains(SIGTERM))
  }

  /// In this process, on SIGURG (nobody else here uses it), without raising it: the action is
  /// ours after install, with the app's SA_RESTART and mask, and the app's again after uninstall.
  @Test func installChainsWithTheAppsFlagsAndUninstallRestoresItsAction() throws {
    var app = sigaction()
    app.__sigaction_handler.sa_handler = { _ in }
    app.sa_flags = SA_RESTART
    sigemptyset(&app.sa_mask)
    sigaddset(&app.sa_mask, SIGWINCH)
    var saved = sigaction()
    sigaction(SIGURG, &app, &saved)
    defer { sigaction(SIGURG, &saved, nil) }

    try SignalBreadcrumbs.install(signals: [SIGURG])
    #expect(SignalBreadcrumbs.installedSignals.contains(SIGURG))
    var current = sigaction()
    sigaction(SIGURG, nil, &current)
    #expect(current.sa_flags & SA_SIGINFO != 0)
    #expect(current.sa_flags & SA_RESTART != 0)
    #expect(sigismember(&current.sa_mask, SIGWINCH) == 1)
    #expect(
      unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
        != unsafeBitCast(app.__sigaction_handler.sa_handler, to: Int.self))

    SignalBreadcrumbs.uninstall()
    #expect(!SignalBreadcrumbs.installedSignals.contains(SIGURG))
    sigaction(SIGURG, nil, &current)
    #expect(current.sa_flags & SA_SIGINFO == 0)
    #expect(
      unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
        == unsafeBitCast(app.__sigaction_handler.sa_handler, to: Int.self))
  }
}
