// Test-only: threads that wait on each other in known ways, for the wait-for graph of a live
// capture (crumbs_test_waits.c). Each role runs on the calling thread and never returns.
#ifndef CRUMBS_TEST_WAITS_H
#define CRUMBS_TEST_WAITS_H

#include <stdint.h>

enum {
  /// Locks mutex 0, meets the other deadlock role at a barrier, then locks mutex 1.
  CRUMBS_TEST_ROLE_DEADLOCK_FIRST,
  /// Locks mutex 1, meets the first at the barrier, then locks mutex 0.
  CRUMBS_TEST_ROLE_DEADLOCK_SECOND,
  /// Locks mutex 2, then sleeps in nanosleep (10 minutes at a time, forever).
  CRUMBS_TEST_ROLE_CHAIN_HOLDER,
  /// Once the holder holds mutex 2, locks it.
  CRUMBS_TEST_ROLE_CHAIN_WAITER,
  /// Waits on a semaphore nobody posts.
  CRUMBS_TEST_ROLE_SEMAPHORE,
  /// Waits on a condition variable nobody signals (its mutex released while it waits).
  CRUMBS_TEST_ROLE_CONDITION,
  CRUMBS_TEST_ROLES
};

/// Runs `role` on the calling thread; never returns.
void crumbs_test_wait_role(int role);

/// The kernel tid of the thread running `role` (0 before it started).
uint32_t crumbs_test_wait_role_tid(int role);

/// The address of what `role` ends up waiting on (a mutex, the semaphore, the condition
/// variable); 0 for the holder, which sleeps.
uint64_t crumbs_test_wait_role_object(int role);

/// Waits (bounded by 30 s, by looking at /proc/self/task/TID/syscall) until the thread of
/// `role` is inside the system call it blocks in (futex, or nanosleep for the holder).
/// Returns 0, or -1 when it was not seen there in time.
int crumbs_test_wait_until_blocked(int role);

/// Locks of the lock-graph scenario, each by its index (0 or 1 for rwlocks, 0 to 2 for mutexes
/// and condition variables): glibc's own calls on statically initialised objects.
void crumbs_test_rwlock_write(int index);
void crumbs_test_rwlock_read(int index);
void crumbs_test_lock_mutex(int index);
/// Locks mutex `index` + 1 and waits on condition variable `index` with it until
/// `crumbs_test_cond_signal(index)` set its predicate; returns with the mutex held.
void crumbs_test_cond_wait(int index);
/// Sets condition variable `index`'s predicate and signals it; the caller holds mutex
/// `index` + 1 (the waiter then needs it back).
void crumbs_test_cond_signal(int index);
/// Two threads meet here (a pthread barrier of 2).
void crumbs_test_lock_barrier(void);
/// The address of lock `index` of a kind: 'r' rwlock, 'm' mutex, 'c' condition variable.
uint64_t crumbs_test_lock_address(char kind, int index);
/// Waits (bounded by 30 s) until thread `tid` is blocked in a futex wait on an address in
/// [low, high), or, with `low` 0, in nanosleep/clock_nanosleep. Returns 0, or -1 when not seen
/// there in time.
int crumbs_test_wait_until_blocked_on(uint32_t tid, uint64_t low, uint64_t high);

#endif
