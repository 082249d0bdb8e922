// Test-only: threads parked in known functions, for thread dumps of a live process (`crumbs
// threads PID`, CrumbsClient.captureThreads). Why C: functions that neither inline nor fold, with
// names a dump can be checked against, blocked where a real server's threads block.

#ifndef CRUMBS_TEST_PARKED_H
#define CRUMBS_TEST_PARKED_H

#ifdef __cplusplus
extern "C" {
#endif

/// Starts two threads and returns once both are about to block (0), or -1 when one could not be
/// started: "parked-reader", in crumbs_test_parked_reader, blocked in read() on a pipe nobody
/// writes; "parked-waiter", in crumbs_test_parked_waiter, blocked in pthread_cond_wait on a
/// condition nobody signals. They stay there until the process exits.
int crumbs_test_start_parked_threads(void);

/// The function "parked-reader" blocks in (never returns while the process runs).
int crumbs_test_parked_reader(int descriptor);
/// The function "parked-waiter" blocks in (never returns while the process runs).
int crumbs_test_parked_waiter(int tag);

#ifdef __cplusplus
}
#endif

#endif
