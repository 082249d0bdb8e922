// crumbs_ring_hang.c — the hang going on, in the ring header: the watchdog's writes and the
// seqlock read (see crumbs_ring_hang.h for the protocol and who calls what).
//
// SIGNAL SAFETY: nothing here runs in a signal handler (the writers are the watchdog thread's);
// all four functions would be safe there: atomic loads and stores into the mapping, plain loops,
// no libc call, no lock, no allocation.
//
// Memory ordering (a seqlock, as crumbs_ring_read_slot reads a slot): the writer makes the
// sequence odd with a relaxed store and a release fence, so no field store is seen before it;
// stores the fields with relaxed atomic stores; makes the sequence even again with a release
// store. The reader loads the sequence with acquire, copies the fields with relaxed loads, an
// acquire fence, and loads the sequence again: equal and even means one whole state.

#include "crumbs_ring_hang.h"

_Static_assert(offsetof(crumbs_ring_header, hang_seen_wall_ns) % 8 == 0, "8-byte atomic stores");
_Static_assert(offsetof(crumbs_ring_header, hang_watch) % 8 == 0, "copied as 8-byte words");
_Static_assert(offsetof(crumbs_ring_header, hang_frames) % 8 == 0, "copied as 8-byte words");
_Static_assert(sizeof(((crumbs_ring_header *)0)->hang_watch) % 8 == 0, "copied as 8-byte words");
_Static_assert(sizeof(((crumbs_ring_header *)0)->hang_frames) % 8 == 0, "copied as 8-byte words");

/// Stores `capacity` bytes (a multiple of 8) of `source` into the field at `field`, word by word
/// with relaxed atomic stores: a reader may be copying the field at the same time.
static void crumbs__hang_store_field(char *field, const char *source, size_t capacity) {
  uint64_t *words = (uint64_t *)(void *)field;
  for (size_t index = 0; index < capacity / 8; index++) {
    uint64_t word;
    __builtin_memcpy(&word, source + index * 8, 8);
    __atomic_store_n(&words[index], word, __ATOMIC_RELAXED);
  }
}

/// Loads `capacity` bytes (a multiple of 8) of the field at `field` into `destination` with
/// relaxed atomic loads (the seqlock's re-check decides whether the copy is whole).
static void crumbs__hang_load_field(char *destination, const char *field, size_t capacity) {
  const uint64_t *words = (const uint64_t *)(const void *)field;
  for (size_t index = 0; index < capacity / 8; index++) {
    uint64_t word = __atomic_load_n(&words[index], __ATOMIC_RELAXED);
    __builtin_memcpy(destination + index * 8, &word, 8);
  }
}

/// `text` (`length` bytes, NULL read as empty) into `buffer` (`capacity` bytes, zeroed by the
/// caller): the longest prefix that ends on a UTF-8 character boundary and leaves room for the
/// NUL.
static void crumbs__hang_text(char *buffer, size_t capacity, const char *text, size_t length) {
  if (text == NULL || capacity == 0) return;
  uint32_t limit = (uint32_t)(capacity - 1);
  // crumbs_utf8_prefix looks at the byte at `limit` when the text is longer: it exists.
  uint32_t offered = length > (size_t)limit ? limit + 1 : (uint32_t)length;
  uint32_t kept = crumbs_utf8_prefix((const unsigned char *)text, offered, limit);
  __builtin_memcpy(buffer, text, kept);
}

/// Makes the sequence odd (the fields are being written); returns the odd value. The writer is
/// the only one: a sequence already odd (a writer in this process never leaves one) stays odd.
static uint32_t crumbs__hang_begin(crumbs_ring_header *header) {
  uint32_t sequence = __atomic_load_n(&header->hang_sequence, __ATOMIC_RELAXED) | 1u;
  __atomic_store_n(&header->hang_sequence, sequence, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  return sequence;
}

static void crumbs__hang_end(crumbs_ring_header *header, uint32_t odd) {
  __atomic_store_n(&header->hang_sequence, odd + 1u, __ATOMIC_RELEASE);
}

void crumbs_ring_record_hang(const crumbs_ring *ring, const char *watch, size_t watch_length,
                             uint64_t since_wall_ns, uint64_t seen_wall_ns, const char *frames,
                             size_t frames_length) {
  if (since_wall_ns == 0) return;
  crumbs_ring_header *header = ring->header;
  char watch_field[sizeof header->hang_watch] = {0};
  char frames_field[sizeof header->hang_frames] = {0};
  crumbs__hang_text(watch_field, sizeof watch_field, watch, watch_length);
  crumbs__hang_text(frames_field, sizeof frames_field, frames, frames_length);
  uint32_t odd = crumbs__hang_begin(header);
  __atomic_store_n(&header->hang_since_wall_ns, since_wall_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&header->hang_seen_wall_ns, seen_wall_ns < since_wall_ns ? since_wall_ns : seen_wall_ns,
                   __ATOMIC_RELAXED);
  crumbs__hang_store_field(header->hang_watch, watch_field, sizeof watch_field);
  crumbs__hang_store_field(header->hang_frames, frames_field, sizeof frames_field);
  crumbs__hang_end(header, odd);
}

void crumbs_ring_refresh_hang(const crumbs_ring *ring, uint64_t seen_wall_ns) {
  crumbs_ring_header *header = ring->header;
  // The only writer reads its own value: no ordering needed.
  uint64_t since = __atomic_load_n(&header->hang_since_wall_ns, __ATOMIC_RELAXED);
  if (since == 0) return;
  __atomic_store_n(&header->hang_seen_wall_ns, seen_wall_ns < since ? since : seen_wall_ns, __ATOMIC_RELEASE);
}

void crumbs_ring_clear_hang(const crumbs_ring *ring) {
  crumbs_ring_header *header = ring->header;
  static const char zeros[sizeof(((crumbs_ring_header *)0)->hang_frames)];
  uint32_t odd = crumbs__hang_begin(header);
  __atomic_store_n(&header->hang_since_wall_ns, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&header->hang_seen_wall_ns, 0, __ATOMIC_RELAXED);
  crumbs__hang_store_field(header->hang_watch, zeros, sizeof header->hang_watch);
  crumbs__hang_store_field(header->hang_frames, zeros, sizeof header->hang_frames);
  crumbs__hang_end(header, odd);
}

bool crumbs_ring_read_hang(const crumbs_ring_header *header, crumbs_ring_hang *out) {
  uint32_t before = __atomic_load_n(&header->hang_sequence, __ATOMIC_ACQUIRE);
  if (before & 1u) return false;
  out->since_wall_ns = __atomic_load_n(&header->hang_since_wall_ns, __ATOMIC_RELAXED);
  out->seen_wall_ns = __atomic_load_n(&header->hang_seen_wall_ns, __ATOMIC_RELAXED);
  crumbs__hang_load_field(out->watch, header->hang_watch, sizeof out->watch);
  crumbs__hang_load_field(out->frames, header->hang_frames, sizeof out->frames);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&header->hang_sequence, __ATOMIC_RELAXED) == before;
}
