// crumbs_signal_watch.c — noticing, when it happens, that another library sets the action of a
// signal the crash handler took, by standing in front of libc's sigaction(), signal() and
// siginterrupt() (the same way crumbs_thread_start.c stands in front of pthread_create).
//
// Why: a library that installs its own SIGSEGV handler after Crumbs (a JVM, a second crash
// reporter, swift-service-lifecycle for its signals) takes crashes away from the crash record.
// The client checks for that now and then (CrashHandler.replacedSignals(), every 2 s and at
// exit), but a crash right after the replacement came before any check, and the next launch
// could not say why the crash left no record. Seen here, the change is written at once into
// the crash record's `replaced_signals` (a mapped file: it survives any death), and cleared
// when Crumbs takes the signal back. The check stays as the fallback for what this misses:
// raw rt_sigaction system calls, bsd_signal/sysv_signal/sigset, and musl (not compiled there).
//
// It is also how the handler learns that a handler given the first chance at a fault gave up
// (crumbs_crash_handler.c): setting SIG_DFL for the signal while we call it means the fault
// will kill the process, and the crash is recorded before it raises the signal or returns.
//
// Entry points (libc's names, found before libc's by the dynamic linker, and by the static
// linker over static glibc's weak definitions; shared libraries reach ours only for the names
// the executable exports, which docs/platform-facts.md lists — `sigaction` is, `signal` is not):
//   sigaction     libc's (or a sanitizer's interceptor), then crumbs__crash_note_action
//   signal        glibc's BSD semantics over sigaction: SA_RESTART unless siginterrupt said
//                 otherwise, the signal blocked in its own handler
//   siginterrupt  glibc's: SA_RESTART cleared or set in the current action, remembered for signal
//
// ASYNC-SIGNAL-SAFE, as sigaction and signal are: __sigaction (libc's, exported by libc.so.6
// since GLIBC_2.2.5 and defined in libc.a), getpid and syscall(SYS_gettid) through
// crumbs__crash_note_action, atomics. No malloc, no locks. Compiled for glibc only.

#define _GNU_SOURCE
#include "crumbs_crash_internal.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>

#if defined(__GLIBC__)

extern int __sigaction(int, const struct sigaction *, struct sigaction *);

// A sanitizer's interceptor, when one is linked (weak: NULL otherwise); see crumbs_thread_start.c.
extern int ___interceptor_sigaction(int, const struct sigaction *, struct sigaction *)
    __attribute__((weak));
extern int __interceptor_sigaction(int, const struct sigaction *, struct sigaction *)
    __attribute__((weak));

/// Signals siginterrupt() made interruptible: signal() then leaves SA_RESTART off.
static uint8_t crumbs__interrupting[_NSIG];

static int crumbs__next_sigaction(int signal_number, const struct sigaction *action,
                                  struct sigaction *old_action) {
  if (___interceptor_sigaction != NULL) return ___interceptor_sigaction(signal_number, action, old_action);
  if (__interceptor_sigaction != NULL) return __interceptor_sigaction(signal_number, action, old_action);
  return __sigaction(signal_number, action, old_action);
}

int sigaction(int signal_number, const struct sigaction *action, struct sigaction *old_action) {
  int result = crumbs__next_sigaction(signal_number, action, old_action);
  if (result == 0 && action != NULL) {
    int saved_errno = errno;
    crumbs__crash_note_action(signal_number, action);
    errno = saved_errno;
  }
  return result;
}

sighandler_t signal(int signal_number, sighandler_t handler) {
  if (signal_number <= 0 || signal_number >= _NSIG || handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction action, old_action;
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, signal_number);
  action.sa_flags = __atomic_load_n(&crumbs__interrupting[signal_number], __ATOMIC_RELAXED) ? 0 : SA_RESTART;
  if (sigaction(signal_number, &action, &old_action) < 0) return SIG_ERR;
  return old_action.sa_handler;
}

int siginterrupt(int signal_number, int interrupt) {
  if (signal_number <= 0 || signal_number >= _NSIG) {
    errno = EINVAL;
    return -1;
  }
  struct sigaction action;
  if (sigaction(signal_number, NULL, &action) < 0) return -1;
  __atomic_store_n(&crumbs__interrupting[signal_number], interrupt ? 1 : 0, __ATOMIC_RELAXED);
  if (interrupt) {
    action.sa_flags &= ~SA_RESTART;
  } else {
    action.sa_flags |= SA_RESTART;
  }
  return sigaction(signal_number, &action, NULL);
}

#endif
