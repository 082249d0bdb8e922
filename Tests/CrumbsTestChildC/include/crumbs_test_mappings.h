// Test-only C helpers for the mapping cost of alternate stacks (crumbs_test_mappings.c): many
// threads that stay alive at once, what each one's alternate stack is, and the process's
// mapping count. Why C: the threads must do nothing but wait (a Swift thread may allocate, take
// locks or map memory of its own), so the mappings counted are the threads' and Crumbs'.
#ifndef CRUMBS_TEST_MAPPINGS_H
#define CRUMBS_TEST_MAPPINGS_H
#include <stdint.h>

/// Lines of /proc/self/maps (one a mapping), or -1 (errno set).
long crumbs_test_count_mappings(void);

/// What the threads of one crumbs_test_hold_threads call had as alternate stacks.
typedef struct crumbs_test_held_stacks {
  uint32_t started;  // threads started (fewer than asked when pthread_create failed)
  int32_t error;     // pthread_create's error for the first thread that could not start, else 0
  uint32_t with_one; // threads with an enabled alternate stack of at least `size` bytes
  uint32_t distinct; // different ss_sp among those
  uint32_t reused;   // of those, how many an earlier call's threads had (0 on the first call)
} crumbs_test_held_stacks;

/// Starts up to `count` threads (256 KiB stacks) and returns once each has begun its start
/// routine, read its alternate stack and parked on a condition variable: they all hold their
/// stacks at once. Fills *held. Only one group at a time.
void crumbs_test_hold_threads(uint32_t count, uint64_t size, crumbs_test_held_stacks *held);

/// The guard page below the alternate stack of a held thread that lies outside [low, high)
/// (the first pool), or 0 when none does.
uint64_t crumbs_test_held_guard_outside(uint64_t low, uint64_t high);

/// In a forked child: the held threads are the parent's (none of them lives here); starts
/// afresh, the lock and condition variable too (the parent's waiters would be waited for).
void crumbs_test_forget_held_threads(void);

/// How many held threads have `stack` (an ss_sp) as their alternate stack.
uint32_t crumbs_test_held_count_of(uint64_t stack);

/// Wakes the held threads and joins them; their alternate stacks are remembered for the next
/// group's `reused`.
void crumbs_test_release_threads(void);

/// Makes this thread, and every thread it creates from now on, see madvise(MADV_GUARD_INSTALL)
/// fail with EINVAL, as a kernel before 6.13 answers (a seccomp filter: the real refusal of an
/// older kernel, without one). Returns 0, or -1 (errno set).
int crumbs_test_refuse_guard_regions(void);
#endif
