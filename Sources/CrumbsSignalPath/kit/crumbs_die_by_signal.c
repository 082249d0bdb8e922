// crumbs_die_by_signal.c — end the process by a signal (see crumbs_die_by_signal.h).
//
// ASYNC-SIGNAL-SAFE: everything in this file. libc calls: memset, sigaction (libc's own, past
// any interposer: crumbs__libc_sigaction, crumbs_libc_sigaction.h), sigemptyset, sigaddset,
// sigprocmask, getpid, syscall(SYS_gettid), syscall(SYS_tgkill). No malloc, no locks, no stdio.

#define _GNU_SOURCE
#include "kit/crumbs_die_by_signal.h"
#include "kit/crumbs_libc_sigaction.h"

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void crumbs__die_by_signal_set_default(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  // libc's: an interposer (libjsig) could keep the action it saved instead of SIG_DFL.
  crumbs__libc_sigaction(signal_number, &action, NULL);
}

void crumbs__die_by_signal(int signal_number) {
  crumbs__die_by_signal_set_default(signal_number);
  // Raised first, unblocked second: while a handler runs its own signal may be blocked (no
  // SA_NODEFER), and then it stays pending until the unblock delivers it; when it is not
  // blocked, tgkill delivers it at once. Either way the default action happens in here.
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), signal_number);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal_number);
  sigprocmask(SIG_UNBLOCK, &unblock, NULL);
}
