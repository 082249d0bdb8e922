// crumbs_signal_watch.c — noticing, when it happens, that another library sets the action of a
// signal the crash handler took, by standing in front of libc's sigaction() and signal() (the
// same way crumbs_thread_start.c stands in front of pthread_create), and passing every call on
// to the definition that would have run without us.
//
// Why: a library that installs its own SIGSEGV handler after Crumbs (a JVM, a second crash
// reporter, swift-service-lifecycle for its signals) takes crashes away from the crash record.
// The client checks for that now and then (CrashHandler.replacedSignals(), every 2 s and at
// exit), but a crash right after the replacement came before any check, and the next launch
// could not say why the crash left no record. Seen here, the change is written at once into
// the crash record's `replaced_signals` (a mapped file: it survives any death), and cleared
// when Crumbs takes the signal back. The check stays as the fallback for what this misses:
// raw rt_sigaction system calls, bsd_signal/sysv_signal/sigset, a library loaded with
// RTLD_DEEPBIND (its calls reach its own libc first), and musl (not compiled there).
//
// It is also how the handler learns that a handler given the first chance at a fault gave up
// (crumbs_crash_handler.c): setting SIG_DFL for the signal while we call it means the fault
// will kill the process, and the crash is recorded before it raises the signal or returns.
//
// Entry points (libc's names, found before libc's by the dynamic linker, and by the static
// linker over static glibc's weak definitions; the linker exports both from the executable,
// since libc.so defines the same names, so a shared library's calls reach ours too:
// docs/platform-facts.md):
//   sigaction     the next sigaction, then crumbs__crash_note_action with the action asked for
//   signal        the next signal (glibc's is BSD signal: SA_RESTART unless siginterrupt() made
//                 the signal interrupting, the signal blocked in its own handler), then
//                 crumbs__crash_note_action with the handler asked for
// Crumbs' code in signal handlers calls libc's own instead (crumbs_libc_sigaction.h).
//
// The next definition. In a dynamic link it is whatever comes after the executable in the
// search order: a library preloaded with LD_PRELOAD (HotSpot's libjsig.so, a sandbox, a tracer),
// else libc. Found with dlsym(RTLD_NEXT), so such an interposer sees every call that reaches
// ours — the app's, the libraries', Crumbs' own installs — as it would without Crumbs. libjsig
// depends on it: once the JVM installed its handlers it keeps them, and saves the action a later
// caller sets as the one the JVM chains to; a call that went to libc under it would take a
// signal away from the JVM (its implicit null checks and safepoint polls would then crash).
// No second copy of libc's signal state is kept here: siginterrupt() is not ours, and glibc's
// siginterrupt and signal share libc's own set of interrupting signals, so a siginterrupt and a
// signal agree whichever module calls which.
//
// When it is found: once, by a constructor that runs before main (crumbs__find_next_definitions),
// never inside sigaction or signal. dlsym is not async-signal-safe (the loader's lock; it may
// allocate, and an interposed malloc may itself call sigaction), and sigaction and signal must
// stay callable from a signal handler. Until then — calls from other libraries' constructors,
// which run before the executable's (the Swift runtime's backtracer installs its handlers
// there), and a call made while dlsym runs (from inside it, or on another thread) — ours calls
// libc's directly (crumbs__libc_sigaction; `bsd_signal`, glibc's signal under its other name): a
// preloaded interposer does not see those few, as it saw none before. A sanitizer's interceptor
// (linked into the executable, where RTLD_NEXT would skip it; see crumbs_thread_start.c) is the
// next definition whenever one is linked; it finds libc's (or a preloaded one) by its own dlsym.
//
// Static links (glibc's libc.a; `swiftc -static-executable`): there is no next definition, and
// dlsym(RTLD_NEXT) would find nothing (it is not called there). The next sigaction is libc.a's
// `__sigaction` (its `sigaction` is a weak alias, replaced by ours); the next signal is
// `bsd_signal`, a weak alias of libc.a's `__bsd_signal` in the object that also holds libc's set
// of interrupting signals, which libc.a's own `siginterrupt` updates. The strong reference to
// `bsd_signal` pulls that object into a static link; the weak reference to `__bsd_signal`, which
// libc.so does not export, is how a static link is told from a dynamic one.
//
// Crumbs' own calls: its installs (crumbs_crash_install.c, the thread capture's and the thread
// dump's signals) go through ours like any library's, so an interposer sees them; what runs in a
// signal handler (dying by a signal, "is our handler the one the kernel calls", taking SIGPROF
// for a capture) calls crumbs__libc_sigaction instead (crumbs_libc_sigaction.h says why).
//
// ASYNC-SIGNAL-SAFE on our side: sigaction and signal call the next definition through a
// pointer stored before main, or libc's own (crumbs__libc_sigaction, `bsd_signal`: both
// async-signal-safe); then memset, and getpid and syscall(SYS_gettid) through
// crumbs__crash_note_action; atomics. No malloc, no locks, no dlsym. Whether the next definition
// is signal-safe is its own business (libc's is; libjsig's takes a mutex). The constructor is
// NOT SIGNAL-SAFE (dlsym) and runs once, before main. Compiled for glibc only: on musl nothing
// of ours stands in front of libc (the client's periodic check covers it).

#define _GNU_SOURCE
#include "crash/crumbs_crash.h"
#include "kit/crumbs_libc_sigaction.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>

#if defined(__GLIBC__)

#include <dlfcn.h>
#include <string.h>

typedef int (*crumbs__sigaction_function)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*crumbs__signal_function)(int, sighandler_t);

// libc's own signal (see above). `bsd_signal`: the same function as glibc's `signal` (libc.so.6
// GLIBC_2.2.5, libc.a), which <signal.h> declares only for old X/Open. `__bsd_signal`: libc.a
// only (weak: NULL in a dynamic link).
extern sighandler_t bsd_signal(int, sighandler_t);
extern sighandler_t __bsd_signal(int, sighandler_t) __attribute__((weak));

// A sanitizer's interceptors, when one is linked (weak: NULL otherwise); see crumbs_thread_start.c.
// With one, crumbs__libc_sigaction calls its sigaction interceptor.
extern int ___interceptor_sigaction(int, const struct sigaction *, struct sigaction *)
    __attribute__((weak));
extern int __interceptor_sigaction(int, const struct sigaction *, struct sigaction *)
    __attribute__((weak));
extern sighandler_t ___interceptor_signal(int, sighandler_t) __attribute__((weak));
extern sighandler_t __interceptor_signal(int, sighandler_t) __attribute__((weak));

/// The next definitions after the executable's, stored by the constructor in a dynamic link
/// (atomic: read on any thread, in signal handlers too); NULL before it ran, in a static link,
/// and with a sanitizer (whose interceptors come first).
static crumbs__sigaction_function crumbs__next_sigaction_found;
static crumbs__signal_function crumbs__next_signal_found;

static int crumbs__next_sigaction(int signal_number, const struct sigaction *action,
                                  struct sigaction *old_action) {
  crumbs__sigaction_function next = __atomic_load_n(&crumbs__next_sigaction_found, __ATOMIC_ACQUIRE);
  if (next != NULL) return next(signal_number, action, old_action);
  return crumbs__libc_sigaction(signal_number, action, old_action);
}

static sighandler_t crumbs__next_signal(int signal_number, sighandler_t handler) {
  if (___interceptor_signal != NULL) return ___interceptor_signal(signal_number, handler);
  if (__interceptor_signal != NULL) return __interceptor_signal(signal_number, handler);
  crumbs__signal_function next = __atomic_load_n(&crumbs__next_signal_found, __ATOMIC_ACQUIRE);
  if (next != NULL) return next(signal_number, handler);
  return bsd_signal(signal_number, handler);
}

/// Finds the next sigaction and signal (see "When it is found" above). NOT SIGNAL-SAFE (dlsym);
/// runs once, before main, first of the executable's constructors.
__attribute__((constructor(101))) static void crumbs__find_next_definitions(void) {
  // Binds `__sigaction` now, so a signal handler's first call takes no lazy binding.
  struct sigaction probe;
  (void)crumbs__libc_sigaction(SIGSEGV, NULL, &probe);
  if (__bsd_signal != NULL) return; // a static link: libc's are the next ones
  bool sanitized = ___interceptor_sigaction != NULL || __interceptor_sigaction != NULL;
  void *symbol = sanitized ? NULL : dlsym(RTLD_NEXT, "sigaction");
  if (symbol != NULL) {
    crumbs__sigaction_function found;
    memcpy(&found, &symbol, sizeof found);
    if (found != sigaction) __atomic_store_n(&crumbs__next_sigaction_found, found, __ATOMIC_RELEASE);
  }
  symbol = dlsym(RTLD_NEXT, "signal");
  if (symbol != NULL) {
    crumbs__signal_function found;
    memcpy(&found, &symbol, sizeof found);
    if (found != signal) __atomic_store_n(&crumbs__next_signal_found, found, __ATOMIC_RELEASE);
  }
}

int sigaction(int signal_number, const struct sigaction *action, struct sigaction *old_action) {
  // A copy: `old_action` may be the same memory as `action`, rewritten by the call.
  struct sigaction asked;
  if (action != NULL) asked = *action;
  int result = crumbs__next_sigaction(signal_number, action, old_action);
  if (result == 0 && action != NULL) {
    int saved_errno = errno;
    crumbs__crash_note_action(signal_number, &asked);
    errno = saved_errno;
  }
  return result;
}

sighandler_t signal(int signal_number, sighandler_t handler) {
  sighandler_t previous = crumbs__next_signal(signal_number, handler);
  if (previous != SIG_ERR) {
    int saved_errno = errno;
    // What note_action looks at: the handler (no SA_SIGINFO), as the next signal set it.
    struct sigaction asked;
    memset(&asked, 0, sizeof asked);
    asked.sa_handler = handler;
    crumbs__crash_note_action(signal_number, &asked);
    errno = saved_errno;
  }
  return previous;
}

#endif
