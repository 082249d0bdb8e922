// crumbs_ledger.c — the in-flight ledger's writers and its live reader (crumbs_ledger.h has the
// layout, the state word's protocol and the entry points in call order; docs/crash-capture.md
// "The ledger" the design).
//
// SIGNAL SAFETY: every function but format and attach is safe in a signal handler: atomic loads,
// stores and compare-and-swaps on the mapping, bounded loops, no lock, no allocation. libc: none
// (crumbs_current_cpu and crumbs_current_thread_id, as the ring's append uses them).
//
// Memory ordering: the claim is a compare-and-swap FREE → WRITING (acquire, so no field store is
// seen before it by a reader that saw the entry FREE); every field is stored as 8-byte words with
// relaxed atomic stores (a reader may copy at the same time); OPEN is published with a release
// store. A reader loads the state with acquire, copies the words with relaxed loads, an acquire
// fence, and loads the state again.

#include "crumbs_ledger.h"

_Static_assert(CRUMBS_LEDGER_ENTRY_HEADER_SIZE % 8 == 0 && CRUMBS_LEDGER_NAME_MAX % 8 == 0 &&
                   CRUMBS_LEDGER_PAIRS_SIZE % 8 == 0,
               "entries are copied as 8-byte words");

static inline uint64_t *crumbs__ledger_words(const crumbs_ring *ring, uint32_t index) {
  unsigned char *entries = (unsigned char *)ring->ledger + CRUMBS_LEDGER_HEADER_SIZE;
  return (uint64_t *)(void *)(entries + (size_t)index * CRUMBS_LEDGER_ENTRY_SIZE);
}

/// Whether `ring` takes ledger writes: it has a ledger and is not closed.
static inline bool crumbs__ledger_usable(const crumbs_ring *ring) {
  return ring != NULL && ring->ledger != NULL && __atomic_load_n(&ring->closed, __ATOMIC_RELAXED) == 0;
}

/// Whether `ring`'s filter takes no breadcrumb type at all (a disabled client's): then no
/// operation is begun either, as a disabled client records nothing.
static inline bool crumbs__ledger_filtered_out(const crumbs_ring *ring) {
  uint32_t types = __atomic_load_n(&ring->header->enabled_types, __ATOMIC_RELAXED);
  return types != 0 && (types & ((1u << CRUMBS_TYPE_COUNT) - 1u)) == 0;
}

/// Stores `count` words of `source` at `target`, each a relaxed atomic store (a reader may copy
/// them at the same time).
static inline void crumbs__ledger_store_words(uint64_t *target, const uint64_t *source, size_t count) {
  for (size_t index = 0; index < count; index++)
    __atomic_store_n(&target[index], source[index], __ATOMIC_RELAXED);
}

/// Where a thread's search for a FREE entry starts: the entry it last claimed, while it runs on
/// the CPU it claimed it on (ended since, that entry is FREE and still in this core's cache),
/// else its CPU's own stretch of 64 entries. Threads on two CPUs never walk the same lines; a
/// start that walked on with each begin put two CPUs' threads on each other's entries, by turns
/// or through the stream prefetcher (1.2-1.5x the cost of two threads apart).
static __thread uint32_t crumbs__ledger_last __attribute__((tls_model("initial-exec")));     // index + 1
static __thread uint32_t crumbs__ledger_last_cpu __attribute__((tls_model("initial-exec"))); // cpu + 1

static inline uint32_t crumbs__ledger_start(const crumbs_ring *ring, uint32_t cpu) {
  if (crumbs__ledger_last != 0 && crumbs__ledger_last_cpu == cpu + 1)
    return (crumbs__ledger_last - 1) & ring->ledger_entry_mask;
  return (cpu * 64u) & ring->ledger_entry_mask;
}

/// Copies `length` bytes of `source` into the words at `words` (zero-padded to whole words).
static inline void crumbs__ledger_put_bytes(uint64_t *words, const void *source, size_t length) {
  size_t whole = length / 8;
  __builtin_memcpy(words, source, whole * 8);
  if (length % 8 != 0) {
    uint64_t last = 0;
    __builtin_memcpy(&last, (const unsigned char *)source + whole * 8, length % 8);
    words[whole] = last;
  }
}

/// How much of `length` bytes fits `limit` (≤ 255), cut at a UTF-8 character boundary.
static inline uint32_t crumbs__ledger_fit(const char *bytes, size_t length, uint32_t limit) {
  if (bytes == NULL) return 0;
  return crumbs_utf8_prefix((const unsigned char *)bytes, length > limit ? limit + 1 : (uint32_t)length,
                            limit);
}

crumbs_ledger_handle crumbs_ledger_begin(const crumbs_ring *ring, const crumbs_ledger_operation *operation) {
  crumbs_ledger_handle handle = {0, 0, 0};
  if (!crumbs__ledger_usable(ring) || crumbs__ledger_filtered_out(ring)) return handle;
  uint32_t count = ring->ledger_entry_mask + 1;
  uint32_t cpu = crumbs_current_cpu();
  uint32_t index = crumbs__ledger_start(ring, cpu);
  uint64_t *words = NULL;
  uint64_t generation = 0;
  for (uint32_t probe = 0; probe < count; probe++, index = (index + 1) & ring->ledger_entry_mask) {
    uint64_t *candidate = crumbs__ledger_words(ring, index);
    uint64_t state = __atomic_load_n(&candidate[0], __ATOMIC_RELAXED);
    if (CRUMBS_LEDGER_STATE_PHASE(state) != CRUMBS_LEDGER_FREE) continue;
    uint64_t next = CRUMBS_LEDGER_STATE_GENERATION(state) + 1;
    if (__atomic_compare_exchange_n(&candidate[0], &state, CRUMBS_LEDGER_STATE(next, CRUMBS_LEDGER_WRITING),
                                    false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      words = candidate;
      generation = next;
      break;
    }
  }
  if (words == NULL) {
    __atomic_fetch_add(&ring->ledger->overflow, 1, __ATOMIC_RELAXED);
    return handle;
  }

  // The header (but its state word) and the name, built here and stored as words.
  uint64_t built[(CRUMBS_LEDGER_ENTRY_HEADER_SIZE + CRUMBS_LEDGER_NAME_MAX) / 8] = {0};
  crumbs_ledger_entry_header *header = (crumbs_ledger_entry_header *)(void *)built;
  header->start_ticks = crumbs_clock_ticks(ring->clock_kind);
  header->thread_id = crumbs_current_thread_id();
  uint8_t flags = 0;
  if (operation->trace_id != NULL) {
    __builtin_memcpy(header->trace_id, operation->trace_id, 16);
    flags |= CRUMBS_LEDGER_HAS_TRACE;
    if (operation->span_id != NULL) __builtin_memcpy(header->span_id, operation->span_id, 8);
    if (operation->parent_span_id != NULL) {
      __builtin_memcpy(header->parent_span_id, operation->parent_span_id, 8);
      flags |= CRUMBS_LEDGER_HAS_PARENT;
    }
  }
  size_t name_length = operation->name != NULL ? operation->name_length : 0;
  uint32_t kept = crumbs__ledger_fit(operation->name, name_length, CRUMBS_LEDGER_NAME_MAX);
  if (kept < name_length) flags |= CRUMBS_LEDGER_NAME_TRUNCATED;
  header->shape.kind = operation->kind;
  header->shape.flags = flags;
  header->shape.name_length = (uint8_t)kept;
  if (kept > 0) crumbs__ledger_put_bytes(&built[CRUMBS_LEDGER_ENTRY_HEADER_SIZE / 8], operation->name, kept);
  size_t used_words = (CRUMBS_LEDGER_ENTRY_HEADER_SIZE + ((size_t)kept + 7) / 8 * 8) / 8;
  crumbs__ledger_store_words(words + 1, built + 1, used_words - 1);

  __atomic_store_n(&words[0], CRUMBS_LEDGER_STATE(generation, CRUMBS_LEDGER_OPEN), __ATOMIC_RELEASE);
  crumbs__ledger_last = index + 1;
  crumbs__ledger_last_cpu = cpu + 1;
  handle.index = index;
  handle.valid = 1;
  handle.generation = generation;
  return handle;
}

/// Takes an open entry for an update: OPEN → WRITING of the handle's generation. NULL for a stale
/// or invalid handle.
static uint64_t *crumbs__ledger_take(const crumbs_ring *ring, crumbs_ledger_handle handle) {
  if (!crumbs__ledger_usable(ring) || !handle.valid || handle.index > ring->ledger_entry_mask) return NULL;
  uint64_t *words = crumbs__ledger_words(ring, handle.index);
  uint64_t expected = CRUMBS_LEDGER_STATE(handle.generation, CRUMBS_LEDGER_OPEN);
  if (!__atomic_compare_exchange_n(&words[0], &expected,
                                   CRUMBS_LEDGER_STATE(handle.generation, CRUMBS_LEDGER_WRITING), false,
                                   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return NULL;
  }
  return words;
}

static void crumbs__ledger_give_back(uint64_t *words, crumbs_ledger_handle handle) {
  __atomic_store_n(&words[0], CRUMBS_LEDGER_STATE(handle.generation, CRUMBS_LEDGER_OPEN), __ATOMIC_RELEASE);
}

/// The shape word of an entry's words.
#define CRUMBS__LEDGER_SHAPE_WORD (offsetof(crumbs_ledger_entry_header, shape) / 8)

static inline crumbs_ledger_shape crumbs__ledger_load_shape(const uint64_t *words) {
  uint64_t word = __atomic_load_n(&words[CRUMBS__LEDGER_SHAPE_WORD], __ATOMIC_RELAXED);
  crumbs_ledger_shape shape;
  __builtin_memcpy(&shape, &word, 8);
  return shape;
}

static inline void crumbs__ledger_store_shape(uint64_t *words, crumbs_ledger_shape shape) {
  uint64_t word;
  __builtin_memcpy(&word, &shape, 8);
  __atomic_store_n(&words[CRUMBS__LEDGER_SHAPE_WORD], word, __ATOMIC_RELAXED);
}

bool crumbs_ledger_set_name(const crumbs_ring *ring, crumbs_ledger_handle handle, const char *name,
                            size_t name_length) {
  uint64_t *words = crumbs__ledger_take(ring, handle);
  if (words == NULL) return false;
  uint32_t kept = crumbs__ledger_fit(name, name_length, CRUMBS_LEDGER_NAME_MAX);
  uint64_t name_words[CRUMBS_LEDGER_NAME_MAX / 8] = {0};
  if (kept > 0) crumbs__ledger_put_bytes(name_words, name, kept);
  crumbs__ledger_store_words(words + CRUMBS_LEDGER_ENTRY_HEADER_SIZE / 8, name_words,
                             CRUMBS_LEDGER_NAME_MAX / 8);
  crumbs_ledger_shape shape = crumbs__ledger_load_shape(words);
  shape.name_length = (uint8_t)kept;
  shape.flags = (uint8_t)((shape.flags & ~CRUMBS_LEDGER_NAME_TRUNCATED) |
                          (name != NULL && kept < name_length ? CRUMBS_LEDGER_NAME_TRUNCATED : 0));
  crumbs__ledger_store_shape(words, shape);
  crumbs__ledger_give_back(words, handle);
  return true;
}

bool crumbs_ledger_add_attribute(const crumbs_ring *ring, crumbs_ledger_handle handle, const char *key,
                                 size_t key_length, const char *value, size_t value_length) {
  uint64_t *words = crumbs__ledger_take(ring, handle);
  if (words == NULL) return false;
  crumbs_ledger_shape shape = crumbs__ledger_load_shape(words);
  uint32_t used = shape.pairs_length <= CRUMBS_LEDGER_PAIRS_SIZE ? shape.pairs_length
                                                                 : CRUMBS_LEDGER_PAIRS_SIZE;
  uint32_t room = CRUMBS_LEDGER_PAIRS_SIZE - used;
  if (shape.attribute_count >= CRUMBS_LEDGER_MAX_ATTRIBUTES || room < 2) {
    shape.flags |= CRUMBS_LEDGER_ATTRIBUTES_TRUNCATED;
    crumbs__ledger_store_shape(words, shape);
    crumbs__ledger_give_back(words, handle);
    return true;
  }
  // The key first, then the value, each to what is left (and to 255).
  uint32_t key_kept = crumbs__ledger_fit(key, key_length, room - 2 < 255 ? room - 2 : 255);
  uint32_t left = room - 2 - key_kept;
  uint32_t value_kept = crumbs__ledger_fit(value, value_length, left < 255 ? left : 255);
  if ((key != NULL && key_kept < key_length) || (value != NULL && value_kept < value_length)) {
    shape.flags |= CRUMBS_LEDGER_ATTRIBUTES_TRUNCATED;
  }
  // The pairs area as words: this writer alone holds the entry (WRITING), so it reads back the
  // word the new pair starts in, then stores the words it changed.
  uint64_t *pairs = words + (CRUMBS_LEDGER_ENTRY_HEADER_SIZE + CRUMBS_LEDGER_NAME_MAX) / 8;
  uint64_t area[CRUMBS_LEDGER_PAIRS_SIZE / 8];
  uint32_t first_word = used / 8;
  uint32_t end = used + 2 + key_kept + value_kept;
  uint32_t last_word = (end + 7) / 8; // one past
  for (uint32_t index = first_word; index < last_word; index++) {
    area[index] = index == first_word ? __atomic_load_n(&pairs[index], __ATOMIC_RELAXED) : 0;
  }
  unsigned char *bytes = (unsigned char *)area;
  bytes[used] = (unsigned char)key_kept;
  bytes[used + 1] = (unsigned char)value_kept;
  if (key_kept > 0) __builtin_memcpy(bytes + used + 2, key, key_kept);
  if (value_kept > 0) __builtin_memcpy(bytes + used + 2 + key_kept, value, value_kept);
  crumbs__ledger_store_words(pairs + first_word, area + first_word, last_word - first_word);
  shape.attribute_count++;
  shape.pairs_length = (uint16_t)end;
  crumbs__ledger_store_shape(words, shape);
  crumbs__ledger_give_back(words, handle);
  return true;
}

bool crumbs_ledger_end(const crumbs_ring *ring, crumbs_ledger_handle handle) {
  if (ring == NULL || ring->ledger == NULL || !handle.valid || handle.index > ring->ledger_entry_mask)
    return false;
  uint64_t *words = crumbs__ledger_words(ring, handle.index);
  uint64_t expected = CRUMBS_LEDGER_STATE(handle.generation, CRUMBS_LEDGER_OPEN);
  // Release: the entry's next owner sees nothing of ours still being written.
  return __atomic_compare_exchange_n(&words[0], &expected,
                                     CRUMBS_LEDGER_STATE(handle.generation, CRUMBS_LEDGER_FREE), false,
                                     __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

uint32_t crumbs_ledger_read_entry(const crumbs_ring *ring, uint32_t index, void *out) {
  if (ring == NULL || ring->ledger == NULL || index > ring->ledger_entry_mask) return CRUMBS_LEDGER_FREE;
  const uint64_t *words = crumbs__ledger_words(ring, index);
  uint64_t before = __atomic_load_n(&words[0], __ATOMIC_ACQUIRE);
  uint32_t phase = CRUMBS_LEDGER_STATE_PHASE(before);
  if (phase != CRUMBS_LEDGER_OPEN)
    return phase == CRUMBS_LEDGER_FREE ? CRUMBS_LEDGER_FREE : CRUMBS_LEDGER_WRITING;
  uint64_t *copy = (uint64_t *)out;
  copy[0] = before;
  for (size_t word = 1; word < CRUMBS_LEDGER_ENTRY_SIZE / 8; word++) {
    copy[word] = __atomic_load_n(&words[word], __ATOMIC_RELAXED);
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&words[0], __ATOMIC_RELAXED) == before ? CRUMBS_LEDGER_OPEN : CRUMBS_LEDGER_WRITING;
}

/// The words of an entry's header that hold its start, trace id and span id.
#define CRUMBS__LEDGER_START_WORD (offsetof(crumbs_ledger_entry_header, start_ticks) / 8)
#define CRUMBS__LEDGER_TRACE_WORD (offsetof(crumbs_ledger_entry_header, trace_id) / 8)
#define CRUMBS__LEDGER_SPAN_WORD (offsetof(crumbs_ledger_entry_header, span_id) / 8)

crumbs_ledger_match crumbs_ledger_find(const crumbs_ring *ring, const uint8_t *trace_id,
                                       const uint8_t *span_id) {
  crumbs_ledger_match match = {{0, 0, 0}, {0}, 0, 0};
  if (ring == NULL || ring->ledger == NULL || trace_id == NULL) return match;
  uint64_t trace[2], span = 0;
  __builtin_memcpy(trace, trace_id, 16);
  if (span_id != NULL) __builtin_memcpy(&span, span_id, 8);
  uint64_t newest_start = 0;
  for (uint32_t index = 0; index <= ring->ledger_entry_mask; index++) {
    const uint64_t *words = crumbs__ledger_words(ring, index);
    uint64_t before = __atomic_load_n(&words[0], __ATOMIC_ACQUIRE);
    if (CRUMBS_LEDGER_STATE_PHASE(before) != CRUMBS_LEDGER_OPEN) continue;
    uint64_t start = __atomic_load_n(&words[CRUMBS__LEDGER_START_WORD], __ATOMIC_RELAXED);
    uint64_t high = __atomic_load_n(&words[CRUMBS__LEDGER_TRACE_WORD], __ATOMIC_RELAXED);
    uint64_t low = __atomic_load_n(&words[CRUMBS__LEDGER_TRACE_WORD + 1], __ATOMIC_RELAXED);
    uint64_t own = __atomic_load_n(&words[CRUMBS__LEDGER_SPAN_WORD], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t after = __atomic_load_n(&words[0], __ATOMIC_RELAXED);
    // The same generation, still open or held by an update (which never changes the ids).
    if (CRUMBS_LEDGER_STATE_GENERATION(after) != CRUMBS_LEDGER_STATE_GENERATION(before) ||
        CRUMBS_LEDGER_STATE_PHASE(after) == CRUMBS_LEDGER_FREE)
      continue;
    if (high != trace[0] || low != trace[1]) continue;
    bool exact = span_id != NULL && own == span;
    if (!exact && match.handle.valid && start < newest_start) continue;
    match.handle.index = index;
    match.handle.valid = 1;
    match.handle.generation = CRUMBS_LEDGER_STATE_GENERATION(before);
    __builtin_memcpy(match.span_id, &own, 8);
    newest_start = start;
    if (exact) {
      match.exact = 1;
      break;
    }
  }
  return match;
}

uint64_t crumbs_ledger_overflow(const crumbs_ring *ring) {
  if (ring == NULL || ring->ledger == NULL) return 0;
  return __atomic_load_n(&ring->ledger->overflow, __ATOMIC_RELAXED);
}
