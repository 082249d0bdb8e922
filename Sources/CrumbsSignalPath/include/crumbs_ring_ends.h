// crumbs_ring_ends.h — what the ring header keeps so the next launch can explain an unclean end
// (every unclean end explained): the first stop request the app took over, the first resource-limit signal it
// outlived, and the resource limits at start. The fields are crumbs_ring_layout.h's
// `stop_request`, `limit_signal` and `rlimit_*`.
//
// Why C: the two signals are noted inside the signal-breadcrumb handler (crumbs_signal_
// breadcrumbs.c), where only a store into the mapping may run; a SIGKILL that follows (a grace
// period's end, a CPU hard limit) runs no code at all.
//
// Entry points, in call order:
//   crumbs_ring_record_limits        at ring creation, before the file is published (set-up)
//   crumbs_ring_note_stop_request    the handler, or CrumbsService's Dispatch source, saw a
//                                    SIGTERM/SIGINT/SIGHUP the app takes over
//   crumbs_ring_note_limit_signal    the handler saw a SIGXCPU/SIGXFSZ the app outlives
// Read by RingHeaderValidation (UncleanEndSigns.swift) from a copy of the header.

#ifndef CRUMBS_RING_ENDS_H
#define CRUMBS_RING_ENDS_H

#include "crumbs_ring_append.h"
#include "crumbs_ring_layout.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Records the process's RLIMIT_CPU, RLIMIT_FSIZE and RLIMIT_RTTIME (soft and hard) in the
/// header at `base` and sets `limits_recorded`. Not signal-safe (set-up only): getrlimit.
void crumbs_ring_record_limits(void *base);

/// Notes that `signo` asked the process to stop at `wall_ns` (CLOCK_REALTIME ns), unless a stop
/// request was noted before: returns true when this one was stored. One compare-and-swap on the
/// mapping. Safe to call from a signal handler.
bool crumbs_ring_note_stop_request(const crumbs_ring *ring, int signo, uint64_t wall_ns);

/// Notes that the process outlived `signo` (SIGXCPU, SIGXFSZ) at `wall_ns`, unless one was noted
/// before. One compare-and-swap on the mapping. Safe to call from a signal handler.
bool crumbs_ring_note_limit_signal(const crumbs_ring *ring, int signo, uint64_t wall_ns);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_RING_ENDS_H
