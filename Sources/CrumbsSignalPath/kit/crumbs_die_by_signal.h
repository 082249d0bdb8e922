// crumbs_die_by_signal.h — end the process by a signal, as it would have ended without us.
// Internal to CrumbsSignalPath (the crash handler and the signal-breadcrumb handler share it).
//
// Both handlers finish the same way: the signal's action back to SIG_DFL, the signal raised again
// on the thread that got it and unblocked, so the kernel ends the process with the exit status
// (and core dump) the signal would have given had Crumbs not been installed.
//
// Entry points:
//   crumbs__die_by_signal_set_default   only restore SIG_DFL (a fault that re-executes on return
//                                       meets it by itself)
//   crumbs__die_by_signal               restore SIG_DFL, raise on this thread, unblock
//
// SIGNAL SAFETY: both are async-signal-safe. libc calls: memset, sigaction (libc's own:
// crumbs__libc_sigaction), sigemptyset,
// sigaddset, sigprocmask, getpid, syscall(SYS_gettid), syscall(SYS_tgkill).

#ifndef CRUMBS_DIE_BY_SIGNAL_H
#define CRUMBS_DIE_BY_SIGNAL_H

/// Sets the action of `signal_number` to SIG_DFL (empty mask, no flags). Safe to call from a
/// signal handler.
void crumbs__die_by_signal_set_default(int signal_number);

/// Sets SIG_DFL for `signal_number`, sends it to this thread (tgkill: not to whichever thread the
/// kernel would pick for a process-wide kill) and unblocks it, so it is delivered before this
/// returns. Returns only when that did not end the process: a signal whose default action is
/// to ignore it (SIGCHLD, SIGURG…), or a process the kernel protects from its own SIG_DFL
/// signals (the init process of a PID namespace). Each caller decides what happens then. Safe
/// to call from a signal handler; preserves nothing (callers restore errno).
void crumbs__die_by_signal(int signal_number);

#endif // CRUMBS_DIE_BY_SIGNAL_H
