// crumbs_signal_breadcrumbs.h — signals that do not crash (SIGTERM, SIGINT, SIGHUP, SIGUSR1,
// SIGUSR2, SIGPIPE, SIGCHLD, ...) become breadcrumbs, without changing what the app does with them.
//
// Why C: the breadcrumb is appended from inside the signal handler, where the Swift runtime must
// not run (the signal may interrupt malloc or a Swift lock on this very thread).
//
// Entry points, in call order:
//   crumbs_signal_breadcrumbs_install     save each signal's current action, take the signal
//   [signal] crumbs__signal_breadcrumb    append, then do exactly what the saved action says:
//                                         call the app's handler, stay ignored, or (SIG_DFL of a
//                                         terminating signal) mark the ring TERMINATED_BY_SIGNAL,
//                                         restore SIG_DFL and re-raise, so the process still
//                                         dies by that signal
//   crumbs_signal_breadcrumbs_uninstall   give back every saved action still replaced by ours
//   crumbs_exit_hook_install              on exit(): a "process exiting" breadcrumb, ring CLEAN
//
// The fatal signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS, SIGQUIT) belong to
// the crash handler, and job-control stops (SIGTSTP, SIGTTIN, SIGTTOU), SIGKILL and SIGSTOP
// cannot be chained honestly: install refuses them.
//
// SIGNAL SAFETY: crumbs__signal_breadcrumb (the handler) is async-signal-safe; see the .c file
// for the libc it calls. install/uninstall/exit-hook install are set-up code: not signal-safe,
// not thread-safe against each other (the Swift wrapper serializes them).

#ifndef CRUMBS_SIGNAL_BREADCRUMBS_H
#define CRUMBS_SIGNAL_BREADCRUMBS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Errors of crumbs_signal_breadcrumbs_install (0 is success).
enum {
  CRUMBS_SIGNAL_BREADCRUMBS_OK = 0,
  /// A signal in the mask is one install refuses (see above); nothing was installed.
  CRUMBS_SIGNAL_BREADCRUMBS_REFUSED_SIGNAL = 1,
  /// sigaction failed (errno is set); signals installed before it stay installed.
  CRUMBS_SIGNAL_BREADCRUMBS_SIGACTION_FAILED = 2,
};

/// Takes every signal of `signal_mask` (bit 1 << signo, signo 1...63) that is not ours yet,
/// saving its current action to chain to. `per_second_limit` caps breadcrumbs per signal per
/// second (0: 20); the rest are counted and the next recorded one says how many were skipped.
/// A terminating signal is always recorded. Returns a CRUMBS_SIGNAL_BREADCRUMBS_* code; on
/// REFUSED_SIGNAL, `*refused` (when not NULL) is the first refused signal. Not signal-safe.
int crumbs_signal_breadcrumbs_install(uint64_t signal_mask, uint32_t per_second_limit, int *refused);

/// Restores the saved action of every signal whose current action is still ours (one the app
/// replaced since is left alone). Not signal-safe.
void crumbs_signal_breadcrumbs_uninstall(void);

/// The last SIGTERM, SIGINT or SIGHUP recorded whose action was not to terminate (the app
/// handled or ignored it: a graceful shutdown under a ServiceGroup), or 0. The app can end its
/// session as stopped by it (`CrumbsClient.close(endingAs:)`). Safe to call from a signal handler.
int crumbs_signal_breadcrumbs_last_termination_request(void);

/// Notes a stop request seen outside the handler (a Dispatch signal source took the signal
/// first: a ServiceGroup's signalfd can consume it before any handler runs). Returns false when
/// it was already the last request noted (the handler saw it too). Safe to call from a signal
/// handler.
bool crumbs_signal_breadcrumbs_note_termination_request(int signo);

/// The file (library or executable, as the loader names it) holding the app's handler for
/// `signo` — behind ours when signal breadcrumbs are installed on it, else the current one —
/// or NULL for SIG_DFL, SIG_IGN, or an address no loaded file holds. Not signal-safe (dladdr).
const char *crumbs_signal_breadcrumbs_app_handler_image(int signo);

/// The signals currently installed, as a mask. Safe to call from a signal handler.
uint64_t crumbs_signal_breadcrumbs_installed_mask(void);

/// Whether install would refuse `signo`. Pure; safe anywhere.
bool crumbs_signal_breadcrumbs_refuses(int signo);

/// Registers (once) an on_exit hook that, while enabled, appends a "process exiting" breadcrumb
/// with the exit status to the installed ring and marks that ring CLEAN (unless it is already
/// CRASHED or TERMINATED_BY_SIGNAL, or the ring's header names another process: a forked child
/// never ends its parent's session). `enabled` false keeps the hook registered but inert
/// (on_exit hooks cannot be removed). Returns false when on_exit failed. Not signal-safe.
/// musl has no on_exit: there it is an atexit hook, and the breadcrumb has no exit status.
bool crumbs_exit_hook_install(bool enabled);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_SIGNAL_BREADCRUMBS_H
