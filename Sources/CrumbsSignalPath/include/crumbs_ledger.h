// crumbs_ledger.h — the in-flight ledger: the operations (requests, jobs) open right now, in the
// ring file, so that every death — a crash, SIGKILL, the OOM killer — leaves the list behind.
//
// Layout (persisted, in the ring file after the slots, at `crumbs_ring_header.ledger_offset`):
//   crumbs_ledger_header (64 bytes) | entry_count entries of CRUMBS_LEDGER_ENTRY_SIZE bytes
// An entry:
//   crumbs_ledger_entry_header (96 bytes) | name (≤ CRUMBS_LEDGER_NAME_MAX bytes, not
//   terminated) | attribute pairs (u8 key_len | u8 value_len | key | value, at most
//   CRUMBS_LEDGER_MAX_ATTRIBUTES pairs, CRUMBS_LEDGER_PAIRS_SIZE bytes)
//
// The state word of an entry is a seqlock with a generation: (generation << 2) | phase, phase
// FREE, WRITING or OPEN. Begin claims a FREE entry by one compare-and-swap to WRITING of the
// next generation, writes the fields and publishes OPEN with a release store; the caller keeps
// (index, generation) as its handle. End is one compare-and-swap OPEN → FREE of the same
// generation, so a stale handle (ended twice, or an entry reused since) frees nothing. An update
// (rename, an attribute) goes OPEN → WRITING → OPEN under the same generation. A reader copies an
// entry between two loads of its state and keeps it only when both say the same OPEN generation.
// An entry left WRITING by a thread that died in the middle is counted, never trusted.
//
// Where begin looks: from a start that differs by CPU and by thread (so concurrent beginners
// rarely touch the same cache lines), forward over at most entry_count entries. A table with no
// FREE entry adds one to `overflow` (the report says how many were not held) and returns no
// handle.
//
// SIGNAL SAFETY: every function here is safe in a signal handler, also one that interrupted a
// begin or end on the same thread (it claims another entry). No lock, no allocation, no system
// call on the usual path; libc: none (the CPU number from glibc's rseq area, or sched_getcpu in
// the vDSO; the thread id as the ring's append gets it, syscall(SYS_gettid) once per thread).
//
// Entry points, in call order:
//   crumbs_ledger_bytes        how many bytes a ledger of N entries takes (ring planning)
//   crumbs_ledger_format       write the ledger header into a fresh zeroed mapping (the ring's
//                              format does, and its attach finds it)
//   crumbs_ledger_begin        claim an entry for an operation: name, trace, span, parent
//   crumbs_ledger_set_name     rename an open operation (a route known only later)
//   crumbs_ledger_add_attribute  one short key/value pair on an open operation
//   crumbs_ledger_end          free the entry
//   crumbs_ledger_find         the open operation of a span (or, failing that, the newest of
//                              its trace), by its ids: for a span whose context does not carry it
//   crumbs_ledger_read_entry   copy one entry consistently while writers run (and
//                              crumbs_ledger_overflow, what a full table turned away)

#ifndef CRUMBS_LEDGER_H
#define CRUMBS_LEDGER_H

#include "crumbs_ring_append.h"
#include "crumbs_ring_layout.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// "CRUMBLDG" read as a little-endian u64.
#define CRUMBS_LEDGER_MAGIC 0x47444C424D555243ULL
#define CRUMBS_LEDGER_HEADER_SIZE 64u
#define CRUMBS_LEDGER_ENTRY_SIZE 512u
#define CRUMBS_LEDGER_ENTRY_HEADER_SIZE 96u
#define CRUMBS_LEDGER_NAME_MAX 128u
/// The attribute pairs' area: what an entry has left after its header and name.
#define CRUMBS_LEDGER_PAIRS_SIZE 288u
_Static_assert(CRUMBS_LEDGER_PAIRS_SIZE ==
                   CRUMBS_LEDGER_ENTRY_SIZE - CRUMBS_LEDGER_ENTRY_HEADER_SIZE - CRUMBS_LEDGER_NAME_MAX,
               "an entry is its header, its name and its pairs");
#define CRUMBS_LEDGER_MAX_ATTRIBUTES 4u
/// Entry counts a ledger may have: a power of two in this range (0: no ledger).
#define CRUMBS_LEDGER_MIN_ENTRIES 8u
#define CRUMBS_LEDGER_MAX_ENTRIES 65536u

/// Phases of an entry's state word.
enum {
  CRUMBS_LEDGER_FREE = 0,
  CRUMBS_LEDGER_WRITING = 1,
  CRUMBS_LEDGER_OPEN = 2,
};
#define CRUMBS_LEDGER_STATE(generation, phase) (((uint64_t)(generation) << 2) | (uint64_t)(phase))
#define CRUMBS_LEDGER_STATE_PHASE(state) ((uint32_t)((state)&3u))
#define CRUMBS_LEDGER_STATE_GENERATION(state) ((state) >> 2)

/// What an operation is (OpenTelemetry's span kinds, the ones a ledger holds).
typedef enum crumbs_ledger_kind {
  CRUMBS_LEDGER_KIND_INTERNAL = 0,
  CRUMBS_LEDGER_KIND_SERVER = 1,
  CRUMBS_LEDGER_KIND_CONSUMER = 2,
  CRUMBS_LEDGER_KIND_JOB = 3,
} crumbs_ledger_kind;

/// Entry flags.
enum {
  CRUMBS_LEDGER_NAME_TRUNCATED = 1u << 0,
  CRUMBS_LEDGER_ATTRIBUTES_TRUNCATED = 1u << 1,
  /// The trace and span ids are the caller's (from a tracer or a traceparent header), not zero.
  CRUMBS_LEDGER_HAS_TRACE = 1u << 2,
  CRUMBS_LEDGER_HAS_PARENT = 1u << 3,
};

/// The ledger's own header, at `ledger_offset` in the ring file.
struct crumbs_ledger_header {
  uint64_t magic;       // CRUMBS_LEDGER_MAGIC, stored last when formatting
  uint32_t header_size; // CRUMBS_LEDGER_HEADER_SIZE
  uint32_t entry_size;  // CRUMBS_LEDGER_ENTRY_SIZE
  uint32_t entry_count; // power of two, CRUMBS_LEDGER_MIN_ENTRIES...CRUMBS_LEDGER_MAX_ENTRIES
  uint32_t reserved0;
  /// atomic: begins that found no FREE entry (operations the ledger could not hold).
  uint64_t overflow;
  uint8_t reserved[32];
};
typedef struct crumbs_ledger_header crumbs_ledger_header;
_Static_assert(sizeof(crumbs_ledger_header) == CRUMBS_LEDGER_HEADER_SIZE, "persisted");
_Static_assert(offsetof(crumbs_ledger_header, overflow) == 24, "persisted");

/// What an entry holds besides its ids: one 8-byte word, so an update stores it whole.
typedef struct crumbs_ledger_shape {
  uint8_t kind;        // crumbs_ledger_kind
  uint8_t flags;       // CRUMBS_LEDGER_* flags
  uint8_t name_length; // bytes of name used
  uint8_t attribute_count;
  uint16_t pairs_length; // bytes of the pairs area used
  uint16_t reserved;
} crumbs_ledger_shape;
_Static_assert(sizeof(crumbs_ledger_shape) == 8, "persisted: one word");

/// The fixed part of an entry.
typedef struct crumbs_ledger_entry_header {
  uint64_t state;       // atomic, CRUMBS_LEDGER_STATE(generation, phase)
  uint64_t start_ticks; // the ring's clock (crumbs_ring_header.clock_kind) at begin
  uint32_t thread_id;   // the thread that began it (gettid)
  uint32_t reserved0;
  uint8_t trace_id[16];      // W3C trace id, zero when none
  uint8_t span_id[8];        // the operation's span id, zero when none
  uint8_t parent_span_id[8]; // zero when none
  crumbs_ledger_shape shape;
  uint8_t reserved[32];
} crumbs_ledger_entry_header;
_Static_assert(sizeof(crumbs_ledger_entry_header) == CRUMBS_LEDGER_ENTRY_HEADER_SIZE, "persisted");
_Static_assert(offsetof(crumbs_ledger_entry_header, trace_id) == 24, "persisted");
_Static_assert(offsetof(crumbs_ledger_entry_header, shape) == 56, "persisted: one word, updated whole");
_Static_assert(CRUMBS_LEDGER_NAME_MAX <= 255, "name_length is one byte");

/// An open operation's handle: which entry, and the generation it was begun under.
typedef struct crumbs_ledger_handle {
  uint32_t index;
  uint32_t valid; // 0: begin found no room (or there is no ledger): updates and end do nothing
  uint64_t generation;
} crumbs_ledger_handle;

/// What begin is given. `name` need not be NUL-terminated; ids may be NULL (zero).
typedef struct crumbs_ledger_operation {
  const char *name;
  size_t name_length;
  const uint8_t *trace_id;       // 16 bytes or NULL
  const uint8_t *span_id;        // 8 bytes or NULL
  const uint8_t *parent_span_id; // 8 bytes or NULL
  uint8_t kind;                  // crumbs_ledger_kind
} crumbs_ledger_operation;

/// Bytes a ledger of `entry_count` entries takes in the ring file (header and entries); 0 for 0
/// entries. `entry_count` must be valid (crumbs_ledger_entry_count_is_valid). Pure.
static inline uint64_t crumbs_ledger_bytes(uint32_t entry_count) {
  if (entry_count == 0) return 0;
  return CRUMBS_LEDGER_HEADER_SIZE + (uint64_t)entry_count * CRUMBS_LEDGER_ENTRY_SIZE;
}

/// Whether `entry_count` may be a ledger's: a power of two in the allowed range. Pure.
static inline bool crumbs_ledger_entry_count_is_valid(uint32_t entry_count) {
  return entry_count >= CRUMBS_LEDGER_MIN_ENTRIES && entry_count <= CRUMBS_LEDGER_MAX_ENTRIES &&
         (entry_count & (entry_count - 1)) == 0;
}

/// Writes the ledger header at `base` (zeroed memory of crumbs_ledger_bytes(entry_count) bytes).
/// Set-up only (the ring's format calls it; inline, so the ring's file needs none of the
/// ledger's).
static inline void crumbs_ledger_format(void *base, uint32_t entry_count) {
  crumbs_ledger_header *header = (crumbs_ledger_header *)base;
  header->header_size = CRUMBS_LEDGER_HEADER_SIZE;
  header->entry_size = CRUMBS_LEDGER_ENTRY_SIZE;
  header->entry_count = entry_count;
  header->overflow = 0;
  // The magic last: a ledger whose formatting was interrupted is not one.
  __atomic_store_n(&header->magic, CRUMBS_LEDGER_MAGIC, __ATOMIC_RELEASE);
}

/// Begins an operation in `ring`'s ledger. Returns a handle whose `valid` is 0 when the table is
/// full (counted in `overflow`), the ring has no ledger or is closed (or is NULL). The name is cut at CRUMBS_LEDGER_NAME_MAX bytes (at a UTF-8
/// character boundary) and flagged. Safe in a signal handler.
crumbs_ledger_handle crumbs_ledger_begin(const crumbs_ring *ring, const crumbs_ledger_operation *operation);

/// Renames an open operation. Returns false for a stale or invalid handle. Safe in a signal
/// handler.
bool crumbs_ledger_set_name(const crumbs_ring *ring, crumbs_ledger_handle handle, const char *name,
                            size_t name_length);

/// Adds one key/value pair (each cut at 255 bytes, both to what is left of the pairs area) to an
/// open operation; a fifth pair, or one that does not fit, is dropped and flagged. Returns false
/// for a stale or invalid handle. Safe in a signal handler.
bool crumbs_ledger_add_attribute(const crumbs_ring *ring, crumbs_ledger_handle handle, const char *key,
                                 size_t key_length, const char *value, size_t value_length);

/// Ends an operation: its entry is FREE again. Returns false for a stale or invalid handle.
/// Safe in a signal handler.
bool crumbs_ledger_end(const crumbs_ring *ring, crumbs_ledger_handle handle);

/// What crumbs_ledger_find found.
typedef struct crumbs_ledger_match {
  crumbs_ledger_handle handle; // valid 0: no open operation of the trace
  uint8_t span_id[8];          // the found operation's span id
  uint32_t exact;              // 1: it is the span asked for; 0: the newest open one of its trace
  uint32_t reserved;
} crumbs_ledger_match;

/// Finds the open operation whose trace id is `trace_id` (16 bytes) and span id `span_id` (8
/// bytes, or NULL); when there is none, the open operation of that trace begun last (the latest
/// start). Each entry's state word is loaded, and for an open one its ids and start, then its
/// state again: an entry begun, ended or reused meanwhile is passed over. One pass over the
/// table, no retry: an operation that an update held at that moment may be missed. Safe in a
/// signal handler (loads only).
crumbs_ledger_match crumbs_ledger_find(const crumbs_ring *ring, const uint8_t *trace_id,
                                       const uint8_t *span_id);

/// Copies entry `index` into `out` (CRUMBS_LEDGER_ENTRY_SIZE bytes) with the seqlock read, for
/// live readers of a ledger writers may change. Returns CRUMBS_LEDGER_OPEN when `out` holds one
/// whole open entry, CRUMBS_LEDGER_FREE when the entry is free (nothing copied), and
/// CRUMBS_LEDGER_WRITING when it was being written or changed during the copy (read it again).
/// Safe in a signal handler.
uint32_t crumbs_ledger_read_entry(const crumbs_ring *ring, uint32_t index, void *out);

/// Operations begun while the ledger was full (its `overflow`); 0 without a ledger. Safe in a
/// signal handler.
uint64_t crumbs_ledger_overflow(const crumbs_ring *ring);

#ifdef __cplusplus
}
#endif

#endif
