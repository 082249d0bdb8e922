// crumbs_crash_testing.h — test-only entry points into the crash handler. Nothing in the
// product calls them; they exist so tests can reach paths a healthy process never takes.
#ifndef CRUMBS_CRASH_TESTING_H
#define CRUMBS_CRASH_TESTING_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Tests only: from now on the handler faults (SIGSEGV) right after it starts the record, to
/// exercise the crash-inside-the-handler path (a PARTIAL record, death by the original signal).
/// Call before the crash, from an ordinary thread. Not signal-safe to call; affects the handler.
void crumbs_crash_testing_fault_inside_handler(bool enabled);

/// Tests only: the thread capture sends its signal to every thread, even one whose blocked
/// mask says it cannot answer, so that thread makes the handler wait for the deadline (the
/// path of a thread that is not scheduled in time). Call before the crash.
void crumbs_crash_testing_ask_blocked_threads(bool enabled);

/// Tests only: the guard page below alternate stack `index` (0 ... pool count) of the pool the
/// crash handler reserved, NULL before it is reserved. A store there must fault.
void *crumbs_crash_testing_altstack_guard(unsigned index);

#ifdef __cplusplus
}
#endif

#endif
