// crumbs_fork.h — a forked child records into files of its own, never into its parent's.
// Design (why, the defences that hold without the handler): docs/crash-capture.md#fork
//
// A pthread_atfork child handler (registered by the first crumbs_fork_track) runs in the child
// before fork() returns there:
//   1. every tracked ring is followed: a new ring file beside it, whose header names the child
//      and its parent, moved by one mremap over the inherited mapping; the inherited descriptor
//      is closed, the new file flock'ed;
//   2. the crash handler's record is followed the same way, beside the child's followed ring;
//   3. whatever cannot be followed is detached (crumbs_ring_retire; the record dropped): the
//      child then records nothing of its own, and writes nothing of its parent's.
//
// Entry points, in call order:
//   crumbs_ring_file_init    fill the description of one open ring file (Swift's BreadcrumbRing)
//   crumbs_fork_track        add it to the table the child handler walks (registers the handler)
//   [fork]                   the child handler, as above
//   crumbs_fork_untrack      remove it (the ring is closing)
// The parent's handler only counts the fork (crumbs_fork_count) and wakes the thread that
// reaps ended children's files every CRUMBS_FORK_REAP_INTERVAL-th fork (crumbs_fork_wait):
// fork() may be called from a signal handler, so nothing else runs there.
//
// SIGNAL SAFETY: the child handler runs in a forked child of a possibly multithreaded process,
// where only async-signal-safe calls may be made. libc calls there: getpid, getrandom, open,
// flock, ftruncate, fallocate, mmap, mremap, munmap, close, unlink, clock_gettime, and read of
// /proc/self/stat (crumbs_process.c); all of them plain system calls. No malloc, no locks, no
// stdio. crumbs_fork_track and crumbs_fork_untrack are lock-free (atomic slots) but set-up code,
// not for signal handlers (the first track calls pthread_atfork and sysconf).

#ifndef CRUMBS_FORK_H
#define CRUMBS_FORK_H

#include "crumbs_ring_append.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Longest ring or record path a forked child can follow (with its NUL).
#define CRUMBS_RING_FILE_PATH_SIZE 1024u
/// How many open rings the fork handler follows; more are left to the defences above.
#define CRUMBS_FORK_MAX_RINGS 64u

/// One open ring file, as the fork handler needs it. Process-local (not persisted); owned by
/// whoever mapped the ring (BreadcrumbRing), which must keep it valid while it is tracked. The
/// child handler rewrites `descriptor` and `path` in the child.
typedef struct crumbs_ring_file {
  const crumbs_ring *ring;
  uint64_t mapped_size;
  int32_t descriptor; // the flock'ed descriptor; -1 once closed or detached
  uint32_t reserved;
  char path[CRUMBS_RING_FILE_PATH_SIZE]; // "" when too long: detached, not followed, in a child
} crumbs_ring_file;

/// Forks between two rounds of the reaper (ForkedSessionReaper): the parent's fork handler
/// wakes its thread on every such fork.
#define CRUMBS_FORK_REAP_INTERVAL 8u

/// Forks this process made through fork() (the parent's handler ran) since it started or was
/// itself forked; wraps. Lock-free.
uint32_t crumbs_fork_count(void);

/// Waits until the fork count is no longer `seen` and a handler woke the waiter (every
/// CRUMBS_FORK_REAP_INTERVAL-th fork), or spuriously: callers read crumbs_fork_count again.
/// For the reaper's own thread; not signal-safe.
void crumbs_fork_wait(uint32_t seen);

/// Fills `file`. `path` longer than CRUMBS_RING_FILE_PATH_SIZE - 1 bytes is kept as "". Pure.
void crumbs_ring_file_init(crumbs_ring_file *file, const crumbs_ring *ring, uint64_t mapped_size,
                           int32_t descriptor, const char *path);

/// Adds `file` to the table a forked child walks. Returns false when the table is full (the
/// ring works; a forked child just does not follow it). Not signal-safe.
bool crumbs_fork_track(crumbs_ring_file *file);

/// Removes `file` from the table (no-op when absent). Not signal-safe.
void crumbs_fork_untrack(crumbs_ring_file *file);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_FORK_H
