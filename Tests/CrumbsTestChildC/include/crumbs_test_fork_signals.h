// Test-only: fork() from a signal handler, with every allocation made during the fork counted
// (crumbs_test_fork_signals.c interposes malloc and its siblings in the test child).
#ifndef CRUMBS_TEST_FORK_SIGNALS_H
#define CRUMBS_TEST_FORK_SIGNALS_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Raises SIGUSR1 `count` times; its handler forks a child that _exits(0) at once and waits
/// for it. Returns the allocations the forking thread made inside fork() in the parent (the
/// fork handlers included), summed over every fork; -1 when the handler could not be set.
int64_t crumbs_test_fork_from_signal_handler(int count);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_TEST_FORK_SIGNALS_H
