// SignalChainTests.swift — Crumbs' sigaction and signal stand in front of the next definition
// (crumbs_signal_watch.c), not in its place: a library preloaded with LD_PRELOAD sees every call
// (HotSpot's libjsig.so depends on it to keep a JVM's handlers), and libc's signal state has one
// truth, so siginterrupt() and signal() agree whichever module calls which. Real children of
// the test child (Tests/CrumbsTestChild/SignalChainScenarios.swift), a real preloaded library
// and a real dlopened one, both compiled here with the system's cc.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Signal chain")
struct SignalChainTests {
  @Test(
    "an LD_PRELOAD interposer sees every sigaction and signal after install, and keeps a signal it claimed",
    arguments: [false, true])
  func preloadedInterposerSeesEveryCall(backtracer: Bool) throws {
    let directory = TestDirectory()
    let interposer = try compileSharedLibrary(interposerSource, named: "signal_interposer", in: directory)
    let library = try compileSharedLibrary(signalUserSource, named: "signal_user", in: directory)
    let log = directory.file("interposer.log")
    let run = try runCrashScenario(
      "signal-chain", variant: ChildVariant(release: false, backtracer: backtracer), directory: directory,
      environment: [
        "LD_PRELOAD": interposer, "CRUMBS_TEST_INTERPOSER_LOG": log, "CRUMBS_TEST_SIGNAL_LIBRARY": library,
      ])
    #expect(run.exitCode == 0, "\(run.status) \(run.lines) \(run.stderr)")
    #expect(run.lines.last == "done", "\(run.lines)")
    let seen = Set(
      (try? Syscall.readFile(log)).map { String(decoding: $0, as: UTF8.self) }?.split(separator: "\n")
        .map(String.init) ?? [])
    // Each call after install reached the interposer, through Crumbs' sigaction and signal:
    // Crumbs' own install (SIGSEGV: with the backtracer off nothing else sets it; with it on the
    // runtime sets it before main, where the interposer may or may not see it), the app's
    // sigaction and signal, a library's sigaction.
    for call in [
      "sigaction \(SIGSEGV) set", "sigaction \(SIGUSR2) set", "signal \(SIGWINCH) set",
      "sigaction \(SIGURG) set",
    ] {
      #expect(seen.contains(call), "the interposer did not see \(call): \(seen.sorted())")
    }
    // The claimed signal (a JVM's, through libjsig) kept the interposer's handler: the library's
    // sigaction only became the action it chains to, and both ran.
    #expect(run.facts["claimed-ran"] == "1", "the claiming interposer lost its handler: \(run.lines)")
    #expect(run.facts["library-ran"] == "1", "\(run.lines)")
    // Through signal() too, a crash signal set by someone else is written into the record.
    #expect(run.facts["replaced"] == "\(SIGBUS)", "\(run.lines)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.replacedSignals == [SIGBUS])
  }

  @Test(
    "a signal an interposer claimed before install keeps its handler, and its crash is recorded through it")
  func claimedCrashSignal() throws {
    let directory = TestDirectory()
    let interposer = try compileSharedLibrary(interposerSource, named: "signal_interposer", in: directory)
    let run = try runCrashScenario(
      "claimed-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["LD_PRELOAD": interposer])
    // Crumbs' install reached the interposer, which kept its own handler in the kernel (as
    // libjsig keeps a JVM's) and chains to Crumbs' for a fault it does not own.
    #expect(run.facts["kernel-handler"] == "interposer", "\(run.lines) \(run.stderr)")
    #expect(run.signal == SIGSEGV, "\(run.status) \(run.lines)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete)
    #expect(record.signal.number == SIGSEGV)
    #expect(record.signal.faultAddress == 0)
  }

  /// The library is loaded with dlopen as usual (its calls reach the executable's definitions,
  /// which the linker exports since libc.so defines the same names) or with RTLD_DEEPBIND (its
  /// calls reach libc's first). In the latter, a second copy of libc's set of interrupting
  /// signals (Crumbs kept one) disagreed with libc's, and the read restarted for ever.
  @Test(
    "siginterrupt then signal leaves the signal interrupting, whichever of the app and a library calls which",
    arguments: ["app", "library"], [false, true])
  func siginterruptHasOneTruth(interruptedBy: String, deepBind: Bool) throws {
    let directory = TestDirectory()
    let library = try compileSharedLibrary(signalUserSource, named: "signal_user", in: directory)
    var environment = [
      "SWIFT_BACKTRACE": "enable=no", "CRUMBS_TEST_SIGNAL_LIBRARY": library,
      "CRUMBS_TEST_INTERRUPT_BY": interruptedBy,
    ]
    if deepBind { environment["CRUMBS_TEST_DEEPBIND"] = "1" }
    let child = try Subprocess(
      ChildProcess.testChild, ["interrupting-alarm", directory.path], environment: environment,
      standardError: .file(directory.file("stderr.txt")))
    let restart = child.value(after: "restart ", seconds: 60)
    #expect(restart == "0", "SA_RESTART is set: a read the alarm should interrupt restarts")
    // alarm(1) then a read nobody answers: EINTR within a second or two. 60 s is the margin of a
    // busy machine; a read that restarts for ever never prints, and the child is killed.
    let read = child.value(after: "read ", seconds: 60)
    child.wait(seconds: 10)
    #expect(
      read == "-1 errno \(EINTR)", "the read was not interrupted within 60 s (status \(child.status ?? -1))")
  }
}

/// An LD_PRELOAD interposer of sigaction and signal, as HotSpot's libjsig.so is one: each call
/// it sees appends "FUNCTION SIGNAL set|query" to CRUMBS_TEST_INTERPOSER_LOG, and passes on to
/// the next definition (libc's). `crumbs_interposer_claim(signal)` installs its own handler for
/// the signal, as libjsig lets the JVM do; from then on a sigaction or signal for it only saves
/// the action asked for, which its handler calls after counting (libjsig's chaining).
/// `crumbs_interposer_claimed_ran()` says how many times that handler ran,
/// `crumbs_interposer_handler()` where it is.
let interposerSource = """
  #define _GNU_SOURCE
  #include <dlfcn.h>
  #include <fcntl.h>
  #include <signal.h>
  #include <stdint.h>
  #include <stdlib.h>
  #include <string.h>
  #include <unistd.h>

  typedef int (*sigaction_function)(int, const struct sigaction *, struct sigaction *);
  typedef sighandler_t (*signal_function)(int, sighandler_t);

  static struct sigaction chained[65];
  static int claimed[65];
  static volatile sig_atomic_t claimed_ran;

  static sigaction_function next_sigaction(void) {
    static sigaction_function next;
    if (next == NULL) next = (sigaction_function)dlsym(RTLD_NEXT, "sigaction");
    return next;
  }

  static signal_function next_signal(void) {
    static signal_function next;
    if (next == NULL) next = (signal_function)dlsym(RTLD_NEXT, "signal");
    return next;
  }

  static void note(const char *function, int signal_number, int sets) {
    const char *path = getenv("CRUMBS_TEST_INTERPOSER_LOG");
    if (path == NULL) return;
    char line[64];
    size_t used = strlen(function);
    memcpy(line, function, used);
    line[used++] = ' ';
    if (signal_number >= 10) line[used++] = (char)('0' + signal_number / 10 % 10);
    line[used++] = (char)('0' + signal_number % 10);
    const char *what = sets ? " set\\n" : " query\\n";
    memcpy(line + used, what, strlen(what));
    used += strlen(what);
    int descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (descriptor < 0) return;
    ssize_t written = write(descriptor, line, used);
    (void)written;
    close(descriptor);
  }

  static void claimed_handler(int signal_number, siginfo_t *info, void *context) {
    claimed_ran++;
    struct sigaction *next = &chained[signal_number];
    if (next->sa_flags & SA_SIGINFO) {
      next->sa_sigaction(signal_number, info, context);
    } else if (next->sa_handler != SIG_DFL && next->sa_handler != SIG_IGN) {
      next->sa_handler(signal_number);
    }
  }

  int crumbs_interposer_claim(int signal_number) {
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = claimed_handler;
    mine.sa_flags = SA_SIGINFO;
    sigemptyset(&mine.sa_mask);
    if (next_sigaction()(signal_number, &mine, &chained[signal_number]) != 0) return -1;
    claimed[signal_number] = 1;
    return 0;
  }

  int crumbs_interposer_claimed_ran(void) { return claimed_ran; }

  uintptr_t crumbs_interposer_handler(void) { return (uintptr_t)claimed_handler; }

  int sigaction(int signal_number, const struct sigaction *action, struct sigaction *old_action) {
    note("sigaction", signal_number, action != NULL);
    if (signal_number > 0 && signal_number < 65 && claimed[signal_number]) {
      struct sigaction saved = chained[signal_number];
      if (action != NULL) chained[signal_number] = *action;
      if (old_action != NULL) *old_action = saved;
      return 0;
    }
    return next_sigaction()(signal_number, action, old_action);
  }

  sighandler_t signal(int signal_number, sighandler_t handler) {
    note("signal", signal_number, 1);
    if (signal_number > 0 && signal_number < 65 && claimed[signal_number]) {
      sighandler_t saved = chained[signal_number].sa_handler;
      memset(&chained[signal_number], 0, sizeof chained[signal_number]);
      chained[signal_number].sa_handler = handler;
      return saved;
    }
    return next_signal()(signal_number, handler);
  }
  """

/// A library of the app that sets actions with its own libc calls (the test child loads it with
/// dlopen): sigaction (SA_RESTART) and signal of a handler that counts (and for SIGALRM arms
/// alarm(1) again), siginterrupt, and the count.
let signalUserSource = """
  #define _GNU_SOURCE
  #include <signal.h>
  #include <string.h>
  #include <unistd.h>

  static volatile sig_atomic_t ran;

  static void library_handler(int signal_number) {
    ran++;
    if (signal_number == SIGALRM) alarm(1);
  }

  int crumbs_signal_user_sigaction(int signal_number) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = library_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(signal_number, &action, NULL);
  }

  int crumbs_signal_user_signal(int signal_number) {
    return signal(signal_number, library_handler) == SIG_ERR ? -1 : 0;
  }

  #pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  int crumbs_signal_user_siginterrupt(int signal_number, int flag) {
    return siginterrupt(signal_number, flag);
  }

  int crumbs_signal_user_ran(void) { return ran; }
  """
