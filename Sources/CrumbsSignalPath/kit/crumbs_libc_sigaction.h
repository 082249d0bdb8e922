// crumbs_libc_sigaction.h — libc's sigaction, reached directly, for Crumbs' own code that may
// run in a signal handler. Internal to CrumbsSignalPath (crumbs_libc_sigaction.c defines it).
//
// Everyone else's sigaction() — the app's, every library's, Crumbs' own installs — goes through
// ours (crumbs_signal_watch.c) to the next definition, which may be an LD_PRELOAD interposer such
// as HotSpot's libjsig.so. That one need not be async-signal-safe (libjsig's takes a mutex), and
// it may answer with what it saved instead of what the kernel does (libjsig keeps the JVM's
// handlers installed and reports the action a later caller asked for). Code inside a signal
// handler must neither block on an interposer's lock nor be told a story: ending the process
// needs SIG_DFL really set, and "is our handler the one the kernel calls" needs the kernel's
// answer. That code calls crumbs__libc_sigaction, which also does not tell the signal watch.

#ifndef CRUMBS_LIBC_SIGACTION_H
#define CRUMBS_LIBC_SIGACTION_H

#include <signal.h>

/// sigaction() of libc itself (glibc: `__sigaction`, exported by libc.so.6 and defined in libc.a,
/// or a sanitizer's interceptor when one is linked; musl: `sigaction`, which nothing of ours
/// stands in front of there), past any interposer. Safe to call from a signal handler.
int crumbs__libc_sigaction(int signal_number, const struct sigaction *action, struct sigaction *old_action);

#endif // CRUMBS_LIBC_SIGACTION_H
