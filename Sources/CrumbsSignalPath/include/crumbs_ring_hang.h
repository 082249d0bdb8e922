// crumbs_ring_hang.h — the hang going on, kept in the ring header ("killed while hung"),
// so that the next launch can say that a process killed by a liveness probe's SIGKILL, the OOM
// killer or a deadline was hung when it died, and in what.
//
// Why C: the header's `hang_*` fields (crumbs_ring_layout.h) are a seqlock over a mapped file,
// written by the client's watchdog thread and read by other processes; C11 atomics say every
// ordering in one place, as crumbs_ring.c does for the clock anchors.
//
// Entry points, in call order:
//   crumbs_ring_record_hang   a watch stalled (or its stalled thread's frames got known): watch,
//                             since, seen and frames, under the seqlock
//   crumbs_ring_refresh_hang  the watchdog looked again and the hang goes on: `seen` alone
//   crumbs_ring_clear_hang    the hang ended: every field back to zero, under the seqlock
//   crumbs_ring_read_hang     a consistent copy of the fields, or false (the next launch reads a
//                             dead writer's copy; a live reader, the mapping itself)
//
// One writer: the three writers are called by one thread at a time (the client's watchdog); the
// seqlock has no compare-and-swap, so two concurrent writers could publish a mix. They are not
// for the hot path nor for signal handlers (they would be safe there — stores and no libc — but
// nothing there has a hang to record).
//
// Why `seen` is written outside the seqlock: it changes every time the watchdog looks, for as
// long as the hang lasts, so the seqlock's odd window would open again and again — and a SIGKILL
// landing in it would leave the whole record unreadable, at the very moment it is needed. One
// aligned 8-byte store is atomic: a reader's copy holds the old `seen` or the new one, both of
// this hang and both at or after `since`.

#ifndef CRUMBS_RING_HANG_H
#define CRUMBS_RING_HANG_H

#include "crumbs_ring_append.h"
#include "crumbs_ring_layout.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A copy of a header's hang fields (not persisted: what crumbs_ring_read_hang fills).
typedef struct crumbs_ring_hang {
  uint64_t since_wall_ns; // 0: no hang going on
  uint64_t seen_wall_ns;
  char watch[sizeof(((crumbs_ring_header *)0)->hang_watch)];   // as stored: NUL not guaranteed
  char frames[sizeof(((crumbs_ring_header *)0)->hang_frames)]; // as stored: NUL not guaranteed
} crumbs_ring_hang;

/// Records the hang going on: `watch` (`watch_length` bytes of UTF-8, NULL reads as empty) has
/// shown no life since `since_wall_ns` (wall ns since the epoch; 0 records nothing, since 0 means
/// "no hang"), the watchdog saw it still hung at `seen_wall_ns` (raised to `since_wall_ns` when
/// earlier), and the stalled thread's top frames are `frames` (UTF-8, "" when unknown). Each text
/// is cut at a UTF-8 character boundary to fit its field and NUL-terminated. Replaces a hang
/// recorded before. Watchdog thread only (see "One writer"); not signal-safe by contract.
void crumbs_ring_record_hang(const crumbs_ring *ring, const char *watch, size_t watch_length,
                             uint64_t since_wall_ns, uint64_t seen_wall_ns, const char *frames,
                             size_t frames_length);

/// The hang recorded is still going on at `seen_wall_ns` (raised to its `since` when earlier).
/// Does nothing when no hang is recorded. One release store, outside the seqlock (see above).
/// Watchdog thread only.
void crumbs_ring_refresh_hang(const crumbs_ring *ring, uint64_t seen_wall_ns);

/// The hang ended: since, seen, watch and frames back to zero (the header then reads as one
/// that never had a hang). Watchdog thread only.
void crumbs_ring_clear_hang(const crumbs_ring *ring);

/// Copies the hang fields of `header` (a live mapping, or a copy of a dead writer's header; 8-byte
/// aligned) into `out` with a seqlock read. Returns false when the copy is not one consistent
/// state: the sequence was odd (a writer is in the fields, or died in them) or changed during the
/// copy; `out` is then not to be used. The copy is not validated: texts may lack their NUL or be
/// invalid UTF-8 in a damaged file (Swift's OngoingHang checks). Safe to call from a signal
/// handler (loads only), though nothing does.
bool crumbs_ring_read_hang(const crumbs_ring_header *header, crumbs_ring_hang *out);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_RING_HANG_H
