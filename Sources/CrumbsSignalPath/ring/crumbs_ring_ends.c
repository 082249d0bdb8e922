// crumbs_ring_ends.c — the ring header's signs of an unclean end (see crumbs_ring_ends.h).
//
// SIGNAL SAFETY: crumbs_ring_note_stop_request and crumbs_ring_note_limit_signal run in the
// signal-breadcrumb handler: one atomic compare-and-swap on the mapping, no libc call, no lock, no allocation. crumbs_ring_record_limits is
// set-up only (getrlimit).
//
// Memory ordering: each word is whole by itself (signal and time packed in one 64-bit store), so
// relaxed would do for the word; release keeps the breadcrumb appended before it ordered for a
// live reader. Readers copy the header of a writer that is gone (or take one read of a live page).

#define _GNU_SOURCE
#include "crumbs_ring_ends.h"

#include <sys/resource.h>

_Static_assert(offsetof(crumbs_ring_header, stop_request) % 8 == 0, "8-byte atomic");
_Static_assert(offsetof(crumbs_ring_header, limit_signal) % 8 == 0, "8-byte atomic");

/// Stores `value` in `word` when it is still 0. Safe to call from a signal handler.
static bool crumbs__note_first(uint64_t *word, uint64_t value) {
  uint64_t expected = 0;
  return __atomic_compare_exchange_n(word, &expected, value, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

bool crumbs_ring_note_stop_request(const crumbs_ring *ring, int signo, uint64_t wall_ns) {
  if (ring == NULL || signo <= 0 || signo > 0xFF) return false;
  return crumbs__note_first(&ring->header->stop_request, CRUMBS_RING_SIGNAL_SEEN(signo, wall_ns));
}

bool crumbs_ring_note_limit_signal(const crumbs_ring *ring, int signo, uint64_t wall_ns) {
  if (ring == NULL || signo <= 0 || signo > 0xFF) return false;
  return crumbs__note_first(&ring->header->limit_signal, CRUMBS_RING_SIGNAL_SEEN(signo, wall_ns));
}

/// One limit as {soft, hard}, CRUMBS_RLIMIT_NONE for unlimited (or unreadable).
static void crumbs__record_limit(int resource, uint64_t field[2]) {
  struct rlimit limit;
  if (getrlimit(resource, &limit) != 0) {
    field[0] = field[1] = CRUMBS_RLIMIT_NONE;
    return;
  }
  field[0] = limit.rlim_cur == RLIM_INFINITY ? CRUMBS_RLIMIT_NONE : (uint64_t)limit.rlim_cur;
  field[1] = limit.rlim_max == RLIM_INFINITY ? CRUMBS_RLIMIT_NONE : (uint64_t)limit.rlim_max;
}

void crumbs_ring_record_limits(void *base) {
  crumbs_ring_header *header = (crumbs_ring_header *)base;
  crumbs__record_limit(RLIMIT_CPU, header->rlimit_cpu);
  crumbs__record_limit(RLIMIT_FSIZE, header->rlimit_fsize);
#if defined(RLIMIT_RTTIME)
  crumbs__record_limit(RLIMIT_RTTIME, header->rlimit_rttime);
#else
  header->rlimit_rttime[0] = header->rlimit_rttime[1] = CRUMBS_RLIMIT_NONE;
#endif
  header->limits_recorded = 1;
}
