// crumbs_libc_sigaction.c — libc's own sigaction, past any interposer (see
// crumbs_libc_sigaction.h for who calls it and why).
//
// ASYNC-SIGNAL-SAFE: one call, to `__sigaction` (glibc) or `sigaction` (musl), or to a
// sanitizer's interceptor. No malloc, no locks.

#define _GNU_SOURCE
#include "kit/crumbs_libc_sigaction.h"

#include <stddef.h>

#if defined(__GLIBC__)

// libc.so.6 (GLIBC_2.2.5) and libc.a; <signal.h> does not declare it.
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

// A sanitizer's interceptor, when one is linked (weak: NULL otherwise); see crumbs_thread_start.c.
extern int ___interceptor_sigaction(int, const struct sigaction *, struct sigaction *) __attribute__((weak));
extern int __interceptor_sigaction(int, const struct sigaction *, struct sigaction *) __attribute__((weak));

int crumbs__libc_sigaction(int signal_number, const struct sigaction *action, struct sigaction *old_action) {
  if (___interceptor_sigaction != NULL) return ___interceptor_sigaction(signal_number, action, old_action);
  if (__interceptor_sigaction != NULL) return __interceptor_sigaction(signal_number, action, old_action);
  return __sigaction(signal_number, action, old_action);
}

#else

int crumbs__libc_sigaction(int signal_number, const struct sigaction *action, struct sigaction *old_action) {
  return sigaction(signal_number, action, old_action);
}

#endif
