// Test-only: a thread that would serve one more request after a crash, and a handler chained
// after Crumbs' crash handler that asks it to, from inside the crash. Why C: the handler runs in
// a signal handler, between the crash record and the death.

#ifndef CRUMBS_TEST_AFTER_CRASH_H
#define CRUMBS_TEST_AFTER_CRASH_H

#ifdef __cplusplus
extern "C" {
#endif

/// Starts thread "late-worker", blocked in read() on a request pipe, and returns once it is
/// about to block (0; -1 when it could not be started). Given a byte, it writes "served" on
/// stdout and a byte on a reply pipe. Then installs a SIGSEGV handler over the current action
/// (the Swift runtime's backtracer, or SIG_DFL) — call it before Crumbs' crash handler is
/// installed, which then chains to it after the record. That handler does what the Swift
/// runtime's backtracer does while the process dies: sets SIG_DFL for the six crash signals it
/// handles, then takes `wait_ms` (symbolicating, for the backtracer); meanwhile it writes the
/// request byte and watches for the reply, then writes "after-crash served" or "after-crash
/// not-served" on stdout, calls the action it replaced (if a handler) and returns.
int crumbs_test_start_late_worker(int wait_ms);

#ifdef __cplusplus
}
#endif

#endif
