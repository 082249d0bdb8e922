// crumbs_signal_watch.c — notices, when it happens, that another library sets the action of a
// signal the crash handler took, by standing in front of libc's sigaction() and signal(), and
// passes every call on to the definition that would have run without Crumbs.
// Design (why, the next definition, static link): docs/crash-capture.md#noticing-a-replaced-handler
//
// Entry points (libc's names, exported from the executable):
//   crumbs__find_next_definitions  constructor before main: the next sigaction and signal
//   sigaction   the next sigaction, then crumbs__crash_note_action with the action asked for
//   signal      the next signal (glibc's BSD signal), then crumbs__crash_note_action
// Crumbs' code in signal handlers calls libc's own instead (kit/crumbs_libc_sigaction.h).
//
// ASYNC-SIGNAL-SAFE: sigaction and signal call the next definition through a pointer stored
// before main, or libc's own (crumbs__libc_sigaction, bsd_signal: both async-signal-safe); then
// memset, getpid and syscall(SYS_gettid) through crumbs__crash_note_action; atomics. No malloc,
// no locks, no dlsym. Whether the next definition is signal-safe is its own business. The
// constructor is NOT SIGNAL-SAFE (dlsym) and runs once, before main. Compiled for glibc only.

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
extern int ___interceptor_sigaction(int, const struct sigaction *, struct sigaction *) __attribute__((weak));
extern int __interceptor_sigaction(int, const struct sigaction *, struct sigaction *) __attribute__((weak));
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
