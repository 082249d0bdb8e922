// crumbs_ring_append.h — the hot path: appending one breadcrumb to a mapped ring.
//
// SIGNAL SAFETY: every function in this file is safe to call from a signal handler, including
// one that interrupted an append on the same thread. They take no lock, never allocate and make
// no system call, with two exceptions that happen once and are themselves async-signal-safe:
// a thread's first append asks the kernel for its tid (syscall(SYS_gettid)), and about once a
// second one appender refreshes the clock anchor (clock_gettime, served by the vDSO). While the
// crash handler is installed, the first append also gives the thread an alternate signal stack
// in O(1): one sigaltstack call (a second only for a thread that keeps its own, larger, one),
// never a scan or a probe (crumbs_altstack.c).
// libc used: none on the usual path (the CPU comes from glibc's rseq area, one load);
// sched_getcpu (vDSO) only where rseq is not registered, syscall(SYS_gettid) once per thread,
// clock_gettime (vDSO) about once a second per ring; once per thread, the crash handler's hook:
// sigaltstack and pthread_setspecific (see crumbs_altstack.c). Nothing else.
//
// Why C: the crash handler appends its final breadcrumb from inside a signal handler, where the
// Swift runtime must not run; the Swift hot path calls these same inline functions (in release
// builds they are inlined into the Swift caller), so there is one append, not two.
//
// Entry points, in call order:
//   crumbs_ring_begin        claim a slot in the lane of this CPU and level class, mark it writing
//   crumbs_slot_put_message  copy the message (UTF-8, cut at a character boundary, flagged)
//   crumbs_slot_put_attribute  (0..16 times) copy one key/value pair, cut and flagged when full
//   crumbs_ring_commit       write lengths, flags and checksum, then publish the slot
// and, for callers with everything at hand, the out-of-line crumbs_ring_add_utf8 and
// crumbs_add_breadcrumb_utf8 (crumbs_ring.h), which Swift's append calls: one call per append,
// so an application's call sites stay small.
//
// The writer never reads the slot back: each copy folds the words it moves into the checksum
// (crumbs_checksum_bytes over the source, the same words the reader recomputes from the slot),
// and the header's last word (checksum, level, type, flags, attribute count) is one store at
// commit, from what the writer holds.
//
// Memory ordering: the lane head is claimed by a restartable sequence on the CPU that owns the
// lane (rseq(2): plain moves, restarted if anything ran on that CPU in between), or elsewhere by
// a relaxed fetch_add; only uniqueness matters (crumbs__lane_claim);
// the slot's commit word is set to WRITING with a relaxed store followed by a release fence, so
// no payload store can be seen before it; the final DONE store is a release, so a reader that
// loads DONE with acquire sees the whole payload. A reader copies the slot and re-checks the
// commit word (crumbs_ring_read_slot), the classic seqlock.

#ifndef CRUMBS_RING_APPEND_H
#define CRUMBS_RING_APPEND_H

#include "crumbs_ring_layout.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__GLIBC__) && __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define CRUMBS_HAVE_RSEQ 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// A mapped ring as the process sees it (not persisted): pointers into the mapping and the
/// masks derived from its header. Owned by whoever mapped it (Swift's `BreadcrumbRing`, or the
/// installed global ring); copying it copies pointers, not the ring.
typedef struct crumbs_ring {
  crumbs_ring_header *header;
  crumbs_ring_lane *lanes;
  unsigned char *slots;
  uint32_t slot_size;
  uint32_t general_lane_mask;   // general lane count - 1
  uint32_t important_lane_mask; // important lane count - 1
  uint32_t clock_kind;          // crumbs_clock_kind, copied from the header
  /// Atomic: 0 while open; set once by crumbs_ring_mark_closed, after which every append through
  /// this handle does nothing. Checked here, in C, so that Swift's inlined append makes no atomic
  /// access of its own (one would keep the optimizer from removing a literal's array).
  uint32_t closed;
  /// Which lane classes have a lane of their own for every CPU the machine can have (bit 0:
  /// general, bit 1: important), set by crumbs_ring_attach: only then may a lane be claimed
  /// without a locked instruction (crumbs__lane_claim).
  uint32_t exclusive_lanes;
  /// The in-flight ledger after the slots (crumbs_ledger.h), NULL when the file has none, and
  /// its entry count - 1.
  struct crumbs_ledger_header *ledger;
  uint32_t ledger_entry_mask;
} crumbs_ring;

/// Per-thread state kept in initial-exec TLS (no allocation, no lock on first access).
typedef struct crumbs_thread_state {
  uint32_t thread_id; // 0 until the first append; reset in a forked child
  uint32_t next_seq;
} crumbs_thread_state;

extern __thread crumbs_thread_state crumbs__thread __attribute__((tls_model("initial-exec")));

/// Out of line (crumbs_ring.c); each is signal-safe.
uint32_t crumbs__thread_id_slow(void);
void crumbs__ring_refresh_anchor(const crumbs_ring *ring);
uint64_t crumbs__monotonic_ns(void);
extern int sched_getcpu(void);

/// Read the ring's clock. x86_64: RDTSC; aarch64: CNTVCT_EL0; elsewhere CLOCK_MONOTONIC.
/// Safe to call from a signal handler.
static inline uint64_t crumbs_clock_ticks(uint32_t clock_kind) {
  if (clock_kind == CRUMBS_CLOCK_CPU_COUNTER) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t value;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(value));
    return value;
#endif
  }
  return crumbs__monotonic_ns();
}

/// The caller's kernel thread id, cached per thread. Safe to call from a signal handler.
static inline uint32_t crumbs_current_thread_id(void) {
  uint32_t cached = crumbs__thread.thread_id;
  return cached != 0 ? cached : crumbs__thread_id_slow();
}

/// The CPU this thread runs on, for picking a lane (a hint: the thread may move right after).
/// Reads the kernel-maintained rseq area glibc registers (one load) and falls back to
/// sched_getcpu (vDSO) when there is none. Safe to call from a signal handler.
static inline uint32_t crumbs_current_cpu(void) {
#if defined(CRUMBS_HAVE_RSEQ)
  if (__builtin_expect(__rseq_size != 0, 1)) {
    int32_t cpu = *(const volatile int32_t *)((const char *)__builtin_thread_pointer() + __rseq_offset +
                                              4); // struct rseq.cpu_id
    if (cpu >= 0) return (uint32_t)cpu;
  }
#endif
  return (uint32_t)sched_getcpu();
}

/// The lane of this CPU for `level`'s class. Safe to call from a signal handler.
static inline __attribute__((always_inline)) crumbs_ring_lane *crumbs__lane_for(const crumbs_ring *ring,
                                                                                uint8_t level, uint32_t cpu) {
  if (level >= CRUMBS_LEVEL_IMPORTANT) {
    return &ring->lanes[ring->general_lane_mask + 1 + (cpu & ring->important_lane_mask)];
  }
  return &ring->lanes[cpu & ring->general_lane_mask];
}

/// Where the lane belongs to this CPU alone (`exclusive_lanes`: a lane per CPU the machine can
/// have) and glibc registered rseq, a lane's next position is claimed by a restartable sequence
/// (rseq(2)): the head is read and written back plus one with plain moves, after checking that
/// the thread still runs on the CPU whose lane it holds; the kernel sends the thread to the
/// abort label instead if it is preempted, migrated or signalled before the store, and the claim
/// starts again (crumbs__lane_claim_again). No other writer can run on that CPU in between, so
/// the position is unique without a locked instruction, whose full barrier (it waits for the
/// previous append's stores to drain) costs more than anything else the append does. Elsewhere
/// (no rseq, under valgrind, more CPUs than lanes, not x86_64): a relaxed locked fetch_add.
/// Safe to call from a signal handler: a handler that interrupts the sequence has already sent
/// it to its abort label, and its own claim is a sequence of its own.
static inline __attribute__((always_inline)) bool crumbs__lane_claims_alone(const crumbs_ring *ring,
                                                                            uint8_t level) {
#if defined(CRUMBS_HAVE_RSEQ) && defined(__x86_64__)
  uint32_t class_bit = level >= CRUMBS_LEVEL_IMPORTANT ? 2u : 1u;
  return (ring->exclusive_lanes & class_bit) != 0 && __rseq_size != 0;
#else
  (void)ring;
  (void)level;
  return false;
#endif
}

/// The claim after an aborted sequence (out of line, crumbs_ring.c): the lane of the CPU the
/// thread runs on now, claimed again until a sequence completes. Safe to call from a signal
/// handler.
uint64_t crumbs__lane_claim_again(const crumbs_ring *ring, uint8_t level, crumbs_ring_lane **lane);

/// Claims the next position of `*lane`, the lane of `cpu` for `level`: by a restartable
/// sequence where crumbs__lane_claims_alone, by a locked fetch_add elsewhere. Safe to call from a
/// signal handler.
static inline __attribute__((always_inline)) uint64_t crumbs__lane_claim(const crumbs_ring *ring,
                                                                         uint8_t level,
                                                                         crumbs_ring_lane **lane,
                                                                         uint32_t cpu) {
#if defined(CRUMBS_HAVE_RSEQ) && defined(__x86_64__)
  if (__builtin_expect(crumbs__lane_claims_alone(ring, level), 1)) {
    uint64_t position;
    // The descriptor (struct rseq_cs: version, flags, start, length, abort) goes in a section
    // of its own, the abort handler (after the signature glibc registered, RSEQ_SIG) in
    // another, out of the way. Storing the descriptor's address in the thread's rseq area
    // (offset 8: rseq_cs) arms the sequence from label 1 to label 2; offset 4 is its cpu_id.
    __asm__ goto(
        ".pushsection __rseq_cs, \"aw\"\n\t"
        ".balign 32\n\t"
        "3:\n\t"
        ".long 0x0, 0x0\n\t"
        ".quad 1f, (2f - 1f), 4f\n\t"
        ".popsection\n\t"
        "leaq 3b(%%rip), %%rax\n\t"
        "movq %%rax, %%fs:8(%[offset])\n\t"
        "1:\n\t"
        "cmpl %[cpu], %%fs:4(%[offset])\n\t"
        "jnz 4f\n\t"
        "movq %[head], %%rax\n\t"
        "movq %%rax, %[position]\n\t"
        "incq %%rax\n\t"
        "movq %%rax, %[head]\n\t"
        "2:\n\t"
        ".pushsection __rseq_failure, \"ax\"\n\t"
        ".byte 0x0f, 0xb9, 0x3d\n\t"
        ".long 0x53053053\n\t"
        "4:\n\t"
        "jmp %l[aborted]\n\t"
        ".popsection\n\t"
        : [head] "+m"((*lane)->head), [position] "=m"(position)
        : [cpu] "r"(cpu), [offset] "r"((long)__rseq_offset)
        : "memory", "cc", "rax"
        : aborted);
    return position;
  aborted:
    return crumbs__lane_claim_again(ring, level, lane);
  }
#else
  (void)ring;
  (void)level;
  (void)cpu;
#endif
  return __atomic_fetch_add(&(*lane)->head, 1, __ATOMIC_RELAXED);
}

/// Copies `length` bytes with inline 8-byte moves (no call into memcpy for these small copies)
/// and adds the words it moves to `checksum` exactly as crumbs_checksum_bytes reads them.
/// Safe to call from a signal handler.
static inline __attribute__((always_inline)) void crumbs__copy_bytes(unsigned char *destination,
                                                                     const unsigned char *source,
                                                                     uint32_t length,
                                                                     crumbs_checksum *checksum) {
  if (length >= 8) {
    uint32_t index = 0;
    uint64_t word;
    for (; index + 16 <= length; index += 16) { // two words a turn: half the loop's overhead
      uint64_t second;
      __builtin_memcpy(&word, source + index, 8);
      __builtin_memcpy(&second, source + index + 8, 8);
      __builtin_memcpy(destination + index, &word, 8);
      __builtin_memcpy(destination + index + 8, &second, 8);
      crumbs_checksum_word(checksum, word);
      crumbs_checksum_word(checksum, second);
    }
    if (index + 8 <= length) {
      __builtin_memcpy(&word, source + index, 8);
      __builtin_memcpy(destination + index, &word, 8);
      crumbs_checksum_word(checksum, word);
      index += 8;
    }
    if (index < length) { // the last, overlapping word
      __builtin_memcpy(&word, source + length - 8, 8);
      __builtin_memcpy(destination + length - 8, &word, 8);
      crumbs_checksum_word(checksum, word);
    }
  } else if (length >= 4) { // two overlapping 4-byte moves
    uint32_t head, tail;
    __builtin_memcpy(&head, source, 4);
    __builtin_memcpy(&tail, source + length - 4, 4);
    __builtin_memcpy(destination, &head, 4);
    __builtin_memcpy(destination + length - 4, &tail, 4);
    crumbs_checksum_word(checksum, (uint64_t)head | (uint64_t)tail << 32);
  } else if (length >= 2) {
    uint16_t head, tail;
    __builtin_memcpy(&head, source, 2);
    __builtin_memcpy(&tail, source + length - 2, 2);
    __builtin_memcpy(destination, &head, 2);
    __builtin_memcpy(destination + length - 2, &tail, 2);
    crumbs_checksum_word(checksum, (uint64_t)head | (uint64_t)tail << 16);
  } else if (length == 1) {
    destination[0] = source[0];
    crumbs_checksum_word(checksum, source[0]);
  }
}

/// Next per-thread sequence number. A single instruction on x86_64 (no lock prefix needed: only
/// this thread, or a signal handler interrupting it, ever touches it), so a handler appending in
/// the middle of an append still gets a distinct number.
static inline uint32_t crumbs__thread_next_seq(void) {
#if defined(__x86_64__)
  uint32_t value = 1;
  __asm__ volatile("xaddl %0, %1" : "+r"(value), "+m"(crumbs__thread.next_seq));
  return value;
#else
  return __atomic_fetch_add(&crumbs__thread.next_seq, 1, __ATOMIC_RELAXED);
#endif
}

/// An append in progress: filled by crumbs_ring_begin, consumed by crumbs_ring_commit. What the
/// slot's header will say is kept here, not in the slot, until the commit writes it at once.
typedef struct crumbs_slot_writer {
  unsigned char *slot;
  uint64_t position;        // position in the lane, as claimed
  crumbs_checksum checksum; // over everything written so far (crumbs_slot_checksum_v2)
  uint32_t capacity;        // slot_size
  uint32_t used;            // bytes of the slot written so far
  uint16_t message_length;
  uint8_t level;
  uint8_t type;
  uint8_t flags; // CRUMBS_SLOT_*
  uint8_t attribute_count;
} crumbs_slot_writer;

/// Whether the handle is open and `level`/`type` pass the ring's filters. Safe to call from a
/// signal handler.
static inline bool crumbs_ring_accepts(const crumbs_ring *ring, uint8_t level, uint8_t type) {
  if (__atomic_load_n(&ring->closed, __ATOMIC_RELAXED) != 0) return false;
  if (level < __atomic_load_n(&ring->header->min_level, __ATOMIC_RELAXED)) return false;
  uint32_t enabled = __atomic_load_n(&ring->header->enabled_types, __ATOMIC_RELAXED);
  return enabled == 0 || (type < 32 && (enabled & (1u << type)) != 0);
}

/// Claims the next slot of this CPU's lane for `level` and marks it WRITING.
/// Returns false when the level or type is filtered out, or (counted in the lane's `dropped`)
/// when CRUMBS_RING_CLAIM_ATTEMPTS positions in a row were still being written a lap behind.
/// Safe to call from a signal handler.
static inline __attribute__((always_inline)) bool crumbs_ring_begin(const crumbs_ring *ring, uint8_t level,
                                                                    uint8_t type, uint8_t flags,
                                                                    crumbs_slot_writer *writer) {
  if (!crumbs_ring_accepts(ring, level, type)) return false;
  // The clock first: reading the CPU's counter is slow (about as slow as the whole copy on our
  // VMs), and nothing it waits for is needed by the claim, so the two overlap.
  uint64_t ticks = crumbs_clock_ticks(ring->clock_kind);
  uint32_t cpu = crumbs_current_cpu();
  crumbs_ring_lane *lane = crumbs__lane_for(ring, level, cpu);
  uint64_t position;
  unsigned char *slot;
  crumbs_slot_header *header;
  for (uint32_t attempt = 1;; attempt++) {
    position = crumbs__lane_claim(ring, level, &lane, cpu);
    uint32_t slot_index = lane->first_slot + (uint32_t)(position & (lane->slot_count - 1));
    slot = ring->slots + (size_t)slot_index * ring->slot_size;
    header = (crumbs_slot_header *)slot;
    uint64_t current = __atomic_load_n(&header->commit, __ATOMIC_RELAXED);
    // Free, or done with an older lap: ours. Otherwise a writer a lap behind is still in it
    // (WRITING) or we were lapped before we started (a newer position): leave it alone.
    if (current == 0 || (CRUMBS_COMMIT_IS_DONE(current) && CRUMBS_COMMIT_POSITION(current) < position)) {
      break;
    }
    __atomic_fetch_add(&lane->skipped, 1, __ATOMIC_RELAXED);
    if (attempt == CRUMBS_RING_CLAIM_ATTEMPTS) {
      __atomic_fetch_add(&lane->dropped, 1, __ATOMIC_RELAXED);
      return false;
    }
  }

  __atomic_store_n(&header->commit, CRUMBS_COMMIT_WRITING(position), __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);

  uint64_t thread = (uint64_t)crumbs_current_thread_id() | (uint64_t)crumbs__thread_next_seq() << 32;
  header->ticks = ticks;
  __builtin_memcpy(slot + 16, &thread, 8); // thread_id, thread_seq

  writer->slot = slot;
  writer->position = position;
  writer->checksum = crumbs_checksum_start(position);
  crumbs_checksum_word(&writer->checksum, ticks);
  crumbs_checksum_word(&writer->checksum, thread);
  writer->capacity = ring->slot_size;
  writer->used = CRUMBS_SLOT_MESSAGE_OFFSET;
  writer->message_length = 0;
  writer->level = level;
  writer->type = type;
  writer->flags = flags;
  writer->attribute_count = 0;

  if (__builtin_expect(ticks >= __atomic_load_n(&ring->header->next_anchor_ticks, __ATOMIC_RELAXED), 0)) {
    crumbs__ring_refresh_anchor(ring);
  }
  return true;
}

/// Length of the longest prefix of `bytes[0..<length]` that is at most `limit` bytes and does not
/// end inside a UTF-8 sequence. Safe to call from a signal handler.
static inline uint32_t crumbs_utf8_prefix(const unsigned char *bytes, uint32_t length, uint32_t limit) {
  if (length <= limit) return length;
  uint32_t cut = limit;
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character start.
  while (cut > 0 && (bytes[cut] & 0xC0) == 0x80) cut--;
  return cut;
}

/// Copies the message. `attribute_bytes` is what the attributes that follow will need
/// (2 + key + value each): the message leaves them up to half the payload. Call it once, before
/// any attribute. Safe to call from a signal handler.
static inline __attribute__((always_inline)) void crumbs_slot_put_message(crumbs_slot_writer *writer,
                                                                          const void *message, size_t length,
                                                                          size_t attribute_bytes) {
  uint32_t room = writer->capacity - CRUMBS_SLOT_MESSAGE_OFFSET;
  uint32_t reserve = attribute_bytes < room / 2 ? (uint32_t)attribute_bytes : room / 2;
  uint32_t limit = room - reserve;
  uint32_t wanted = length > 0xFFFF ? 0xFFFF : (uint32_t)length;
  uint32_t kept = crumbs_utf8_prefix((const unsigned char *)message, wanted, limit);
  if (kept < length) writer->flags |= CRUMBS_SLOT_MESSAGE_TRUNCATED;
  crumbs__copy_bytes(writer->slot + CRUMBS_SLOT_MESSAGE_OFFSET, (const unsigned char *)message, kept,
                     &writer->checksum);
  writer->message_length = (uint16_t)kept;
  writer->used = CRUMBS_SLOT_MESSAGE_OFFSET + kept;
}

/// Copies one attribute after the message. A value that does not fit is cut (at a character
/// boundary); a key that does not fit, or a 17th attribute, is dropped. Either sets
/// CRUMBS_SLOT_ATTRIBUTES_TRUNCATED. Keys and values longer than 255 bytes are cut.
/// Safe to call from a signal handler.
static inline __attribute__((always_inline)) void crumbs_slot_put_attribute(
    crumbs_slot_writer *writer, const void *key, size_t key_length, const void *value, size_t value_length) {
  uint32_t room = writer->capacity - writer->used;
  // The whole length goes in and the limit is separate: clamping the length to 255 first made
  // crumbs_utf8_prefix return at once, and a long key was cut inside a character.
  uint32_t key_kept = crumbs_utf8_prefix((const unsigned char *)key,
                                         key_length > 0xFFFF ? 0xFFFF : (uint32_t)key_length, 255);
  if (writer->attribute_count >= CRUMBS_MAX_ATTRIBUTES || room < 2 + key_kept) {
    writer->flags |= CRUMBS_SLOT_ATTRIBUTES_TRUNCATED;
    return;
  }
  uint32_t value_limit = room - 2 - key_kept;
  if (value_limit > 255) value_limit = 255;
  uint32_t value_kept = crumbs_utf8_prefix((const unsigned char *)value,
                                           value_length > 0xFFFF ? 0xFFFF : (uint32_t)value_length,
                                           value_limit);
  if (key_kept < key_length || value_kept < value_length) {
    writer->flags |= CRUMBS_SLOT_ATTRIBUTES_TRUNCATED;
  }
  unsigned char *out = writer->slot + writer->used;
  uint16_t lengths = (uint16_t)(key_kept | value_kept << 8);
  __builtin_memcpy(out, &lengths, 2);
  crumbs_checksum_word(&writer->checksum, lengths);
  crumbs__copy_bytes(out + 2, (const unsigned char *)key, key_kept, &writer->checksum);
  crumbs__copy_bytes(out + 2 + key_kept, (const unsigned char *)value, value_kept, &writer->checksum);
  writer->used += 2 + key_kept + value_kept;
  writer->attribute_count++;
}

/// crumbs_slot_put_message for a message the caller knows fits whole (with the attributes that
/// follow): no cut, no flag. Safe to call from a signal handler.
static inline __attribute__((always_inline)) void crumbs_slot_put_whole_message(crumbs_slot_writer *writer,
                                                                                const void *message,
                                                                                uint32_t length) {
  crumbs__copy_bytes(writer->slot + CRUMBS_SLOT_MESSAGE_OFFSET, (const unsigned char *)message, length,
                     &writer->checksum);
  writer->message_length = (uint16_t)length;
  writer->used = CRUMBS_SLOT_MESSAGE_OFFSET + length;
}

/// crumbs_slot_put_attribute for a pair the caller knows fits whole: key and value at most 255
/// bytes each, room for both, fewer than 16 attributes so far. Safe to call from a signal handler.
static inline __attribute__((always_inline)) void crumbs_slot_put_whole_attribute(crumbs_slot_writer *writer,
                                                                                  const void *key,
                                                                                  uint32_t key_length,
                                                                                  const void *value,
                                                                                  uint32_t value_length) {
  unsigned char *out = writer->slot + writer->used;
  uint16_t lengths = (uint16_t)(key_length | value_length << 8);
  __builtin_memcpy(out, &lengths, 2);
  crumbs_checksum_word(&writer->checksum, lengths);
  crumbs__copy_bytes(out + 2, (const unsigned char *)key, key_length, &writer->checksum);
  crumbs__copy_bytes(out + 2 + key_length, (const unsigned char *)value, value_length, &writer->checksum);
  writer->used += 2 + key_length + value_length;
  writer->attribute_count++;
}

/// Seals the slot: the payload and message lengths, then the header's last word (checksum,
/// level, type, flags, attribute count) in one store, then the DONE commit word (release).
/// Safe to call from a signal handler.
static inline __attribute__((always_inline)) void crumbs_ring_commit(crumbs_slot_writer *writer) {
  uint32_t lengths = (writer->used - CRUMBS_SLOT_PAYLOAD_OFFSET) | (uint32_t)writer->message_length << 16;
  __builtin_memcpy(writer->slot + CRUMBS_SLOT_PAYLOAD_OFFSET, &lengths, 4);
  uint32_t meta = (uint32_t)writer->level | (uint32_t)writer->type << 8 | (uint32_t)writer->flags << 16 |
                  (uint32_t)writer->attribute_count << 24;
  crumbs_checksum checksum = writer->checksum;
  crumbs_checksum_word(&checksum, meta);
  crumbs_checksum_word(&checksum, lengths);
  uint64_t last = (uint64_t)crumbs_checksum_finish(checksum) | (uint64_t)meta << 32;
  __builtin_memcpy(writer->slot + 24, &last, 8); // checksum, level, type, flags, count
  crumbs_slot_header *header = (crumbs_slot_header *)writer->slot;
  __atomic_store_n(&header->commit, CRUMBS_COMMIT_DONE(writer->position), __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_RING_APPEND_H
