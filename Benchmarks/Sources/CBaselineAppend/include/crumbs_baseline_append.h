// crumbs_baseline_append.h — the floor an append is measured against.
//
// One baseline "append" does the least any shared-memory ring must do: claim a position with an
// atomic fetch_add on ONE counter shared by every thread, copy the record's bytes into the slot,
// and publish it with a release store. No lanes, no clock, no thread id, no checksum, no UTF-8
// cut. The mapping is a MAP_SHARED file of the ring's size (a 4096-byte header page holding the
// counter, then slot_count x slot_size bytes), so page-cache-backed stores cost what they cost the
// ring.
//
// Entry points, in call order:
//   crumbs_baseline_open    create, size and map the file
//   crumbs_baseline_append  the measured operation (static inline: inlined into the Swift loop,
//                           as the ring's append is); crumbs_baseline_append_stamped, the same
//                           with the clock read a timestamped entry needs
//   crumbs_baseline_close   unmap and close (the caller removes the file)
//
// Not signal-safe and not meant to be: this is a benchmark fixture, not part of Crumbs.

#ifndef CRUMBS_BASELINE_APPEND_H
#define CRUMBS_BASELINE_APPEND_H

#include "crumbs_ring_append.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A mapped baseline ring. Owned by whoever opened it.
typedef struct crumbs_baseline_ring {
  uint64_t *counter;    // in the mapping's first page; shared by all threads
  unsigned char *slots; // slot_count * slot_size bytes after the first page
  uint32_t slot_mask;   // slot_count - 1 (slot_count is a power of two)
  uint32_t slot_size;
  void *base;
  size_t mapped_size;
  int descriptor;
} crumbs_baseline_ring;

/// Creates `path` (must not exist), sizes it to 4096 + slot_count * slot_size bytes and maps it
/// shared. `slot_count` must be a power of two, `slot_size` at least 16. Returns 0, or an errno
/// value (EINVAL for bad geometry).
int crumbs_baseline_open(crumbs_baseline_ring *ring, const char *path, uint32_t slot_count,
                         uint32_t slot_size);

/// Unmaps and closes. The file stays: the caller unlinks it.
void crumbs_baseline_close(crumbs_baseline_ring *ring);

/// One baseline append of `length` bytes of `record` (8 <= length <= slot_size): fetch_add on the
/// shared counter, memcpy of bytes 8..<length into the slot, release store of the position into
/// the slot's first 8 bytes (the commit word, as the ring's slot header has).
static inline void crumbs_baseline_append(const crumbs_baseline_ring *ring, const void *record,
                                          size_t length) {
  uint64_t position = __atomic_fetch_add(ring->counter, 1, __ATOMIC_RELAXED);
  unsigned char *slot = ring->slots + (size_t)(position & ring->slot_mask) * ring->slot_size;
  __builtin_memcpy(slot + 8, (const unsigned char *)record + 8, length - 8);
  __atomic_store_n((uint64_t *)slot, position + 1, __ATOMIC_RELEASE);
}

/// crumbs_baseline_append plus a timestamp: the ring's clock read once (crumbs_clock_ticks, the
/// CPU's counter: RDTSC on x86_64, CNTVCT_EL0 on aarch64, CLOCK_MONOTONIC elsewhere) and
/// stored at bytes 8..<16 of the slot, the record's bytes 16..<length after it. The least any
/// ring whose entries carry their time must do (a logger's front end reads the same clock).
static inline void crumbs_baseline_append_stamped(const crumbs_baseline_ring *ring, const void *record,
                                                  size_t length) {
  uint64_t ticks = crumbs_clock_ticks(CRUMBS_CLOCK_CPU_COUNTER);
  uint64_t position = __atomic_fetch_add(ring->counter, 1, __ATOMIC_RELAXED);
  unsigned char *slot = ring->slots + (size_t)(position & ring->slot_mask) * ring->slot_size;
  __builtin_memcpy(slot + 8, &ticks, 8);
  __builtin_memcpy(slot + 16, (const unsigned char *)record + 16, length - 16);
  __atomic_store_n((uint64_t *)slot, position + 1, __ATOMIC_RELEASE);
}

/// The ledger's floor (LedgerFigures): `count` operations begun and ended on `entry` (512 bytes,
/// 8-aligned, in a MAP_SHARED mapping) the least way a table shared by threads can: a
/// compare-and-swap claiming it (free → writing), the three ids (32 bytes) and the name's
/// `name_length` bytes copied in, a release store publishing it (open), then a compare-and-swap
/// freeing it for its next generation. No clock, no thread id, no free-entry search, no cut.
void crumbs_bench_ledger_floor(unsigned char *entry, const char *name, size_t name_length, const void *ids,
                               uint64_t count);

/// The heartbeat's floor (HangFigures): `count` relaxed stores of 1 into `*flag`, the same loop
/// shape as the Swift beat it is compared with.
void crumbs_bench_relaxed_stores(uint8_t *flag, uint64_t count);

/// The stamped heartbeat's floor: `count` times, read `clock` (CLOCK_MONOTONIC_COARSE, or
/// CLOCK_MONOTONIC to show what the fine clock would cost) and store it relaxed into `*stamp`.
void crumbs_bench_stamped_stores(uint64_t *stamp, uint64_t count, int clock);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_BASELINE_APPEND_H
