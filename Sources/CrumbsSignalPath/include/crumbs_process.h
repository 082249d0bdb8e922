// crumbs_process.h — naming a process across pid reuse: its pid and its start time.
//
// Why: a pid alone is reused; a pid with its start time (field 22 of /proc/<pid>/stat, clock
// ticks after boot) and the boot id names one process for ever. Ring headers keep the writer's
// (crumbs_ring_layout.h), so a reader decides whether the writer still runs without trusting a
// lock that a forked child may have inherited.
//
// Why C: the fork handler needs the child's own start time in the forked child, where only
// async-signal-safe calls may be made (crumbs_fork.c); Swift reads the same field through this
// one parser.
//
// SIGNAL SAFETY: crumbs_process_stat is async-signal-safe: open, read and close into a buffer
// on the stack, and plain parsing. No malloc, no locks, no stdio.

#ifndef CRUMBS_PROCESS_H
#define CRUMBS_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Reads /proc/<pid>/stat (`pid` 0: this process): its state letter (field 3: R, S, D, T, Z
/// for a zombie, X for dead...) and its start time (field 22, clock ticks after boot; 0 when the
/// field is missing). Returns false when there is no such process or its stat cannot be read or
/// parsed. Safe to call from a signal handler.
bool crumbs_process_stat(int32_t pid, uint64_t *start_ticks, char *state);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_PROCESS_H
