// crumbs_signal_names.h — the one table of signal names ("SIGSEGV") and si_code names
// ("SEGV_MAPERR", "SI_USER"): for the crash record and its fatal breadcrumb, for signal
// breadcrumbs, and (through `SignalNames`) for Swift reports and the CLI.
//
// Why C: the crash handler and the signal-breadcrumb handler name signals inside signal
// handlers; Swift reads the same table so that a report and a breadcrumb never disagree.
//
// Entry points:
//   crumbs_signal_name        "SIGSEGV", or NULL for a signal without a fixed name
//   crumbs_signal_name_text   the same into a buffer, "SIG34" for one without a name
//   crumbs_signal_code_name   "SEGV_MAPERR", "SI_TKILL", "CLD_EXITED"…, or NULL when unknown
//
// Coverage: every standard Linux signal (1…31; real-time signals have no fixed name); the
// si_codes any process may see (SI_USER, SI_KERNEL, SI_QUEUE, SI_TIMER, SI_MESGQ, SI_ASYNCIO,
// SI_SIGIO, SI_TKILL) and those of SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS and SIGCHLD.
//
// SIGNAL SAFETY: every function is async-signal-safe (static strings, no libc calls).

#ifndef CRUMBS_SIGNAL_NAMES_H
#define CRUMBS_SIGNAL_NAMES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The name of `signal_number` ("SIGSEGV"), or NULL when it has none (0, real-time signals,
/// out of range). Safe to call from a signal handler.
const char *crumbs_signal_name(int signal_number);

/// Writes the name of `signal_number`, or "SIG" and its number when it has none ("SIG34"), into
/// `buffer` (`capacity` bytes, cut to fit, NUL-terminated). Returns the length written. Safe to
/// call from a signal handler.
size_t crumbs_signal_name_text(int signal_number, char *buffer, size_t capacity);

/// The name of si_code `code` for `signal_number` ("SEGV_MAPERR", "SI_USER"), or NULL when
/// unknown. Codes sent by processes (≤ 0) and SI_KERNEL mean the same for every signal; the
/// positive ones are per signal. Safe to call from a signal handler.
const char *crumbs_signal_code_name(int signal_number, int code);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_SIGNAL_NAMES_H
