// crumbs_ring.h — formatting a ring file, the installed (process-wide) ring, the C entry point,
// and the seqlock slot read used by live readers.
//
// Why C: the crash handler and C callers append to the installed ring without the Swift runtime.
//
// Entry points, in call order:
//   crumbs_ring_plan           geometry (lanes, offsets, file size) for a slot size and count
//   crumbs_ring_plan_ledger    and room for the in-flight ledger after the slots
//   crumbs_ring_format         write header and lane table into a fresh zeroed mapping
//   crumbs_ring_attach         fill a crumbs_ring handle from a mapping we formatted
//   crumbs_ring_install        the process-wide ring (crumbs_add_breadcrumb, signal breadcrumbs)
//   crumbs_add_breadcrumb_utf8 append from C (lengths given), from any thread or signal handler;
//                              crumbs_add_breadcrumb for NUL-terminated strings
//   crumbs_ring_read_slot      copy one slot consistently while writers run
//   crumbs_ring_set_state      RUNNING → CLEAN on a clean exit (or CRASHED from the handler)
//   crumbs_ring_mark_closed    appends through this handle do nothing from now on
//   crumbs_ring_uninstall_if   forget the process-wide ring if it is this one
//   crumbs_ring_retire         swap the file mapping for anonymous memory; the range stays valid
//
// SIGNAL SAFETY: crumbs_add_breadcrumb(_utf8), crumbs_ring_add(_utf8), crumbs_installed_ring,
// crumbs_ring_read_slot, crumbs_ring_set_state and crumbs_ring_refresh_anchor_now are safe in a
// signal handler (see crumbs_ring_append.h for the libc they use).
// crumbs_ring_plan/format/attach/install/uninstall are not meant for signal handlers (they are
// cheap and lock-free, but run once at set-up), nor is crumbs_ring_retire (mmap, mremap).

#ifndef CRUMBS_RING_H
#define CRUMBS_RING_H

#include "crumbs_ring_append.h"
#include "crumbs_ring_layout.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The shape of a ring file, derived from what the caller asked for.
typedef struct crumbs_ring_plan_result {
  uint32_t slot_size;
  uint32_t slot_count;
  uint32_t general_lane_count;
  uint32_t important_lane_count;
  uint32_t general_lane_slots;   // slots per general lane
  uint32_t important_lane_slots; // slots per important lane
  uint64_t slots_offset;
  uint64_t ledger_offset;      // 0: no ledger (crumbs_ring_plan_ledger adds one)
  uint32_t ledger_entry_count; // 0: no ledger
  uint64_t file_size;
} crumbs_ring_plan_result;

/// Error codes of crumbs_ring_plan.
enum {
  CRUMBS_PLAN_OK = 0,
  CRUMBS_PLAN_BAD_SLOT_SIZE = 1,   // not a power of two in [64, 4096]
  CRUMBS_PLAN_BAD_SLOT_COUNT = 2,  // fewer than 64 or more than 2^24 slots
  CRUMBS_PLAN_BAD_LEDGER_SIZE = 3, // not a power of two in [8, 65536] (or 0)
};

/// Plans a ring of about `slot_count` slots of `slot_size` bytes for `cpu_count` CPUs, keeping
/// one `important_share`-th (e.g. 8 → 1/8) for warning-and-above. Lane counts are powers of two
/// (at most CRUMBS_RING_MAX_LANES/2 each) and so are lane sizes, so the slot count may round
/// down. Returns a CRUMBS_PLAN_* code.
int crumbs_ring_plan(uint32_t slot_size, uint32_t slot_count, uint32_t cpu_count, uint32_t important_share,
                     crumbs_ring_plan_result *plan);

/// Adds an in-flight ledger of `entry_count` entries (crumbs_ledger.h) after the slots of a
/// planned ring; 0 plans none. Returns a CRUMBS_PLAN_* code.
int crumbs_ring_plan_ledger(crumbs_ring_plan_result *plan, uint32_t entry_count);

/// Who is writing the ring, recorded in its header.
typedef struct crumbs_ring_identity {
  uint32_t pid;
  uint8_t session_id[16];
  uint8_t boot_id[16];
  const char *app_name;               // may be NULL
  const char *app_version;            // may be NULL
  const char *environment_resource;   // may be NULL; what passes 2047 bytes is cut
  const char *executable;             // may be NULL
  const char *cgroup;                 // may be NULL
  uint64_t cgroup_oom_kills_at_start; // UINT64_MAX when unknown
  uint64_t writer_start_ticks;        // crumbs_process_stat's start time; 0 when unknown
  uint64_t writer_pid_namespace;      // inode of /proc/self/ns/pid; 0 when unknown
  uint32_t parent_pid;                // a forked child's ring: the parent's pid, else 0
  uint8_t parent_session_id[16];      // a forked child's ring: the parent's session, else zero
} crumbs_ring_identity;

/// Writes the header and lane table into `base` (file_size bytes, zero-filled, writable).
/// Picks the clock (CPU counter when `cpu_counter_is_reliable`, else CLOCK_MONOTONIC) and takes
/// the creation anchor. Safe to call from a signal handler (and so in a forked child):
/// clock_gettime and stores into `base`.
void crumbs_ring_format(void *base, const crumbs_ring_plan_result *plan, const crumbs_ring_identity *identity,
                        bool cpu_counter_is_reliable);

/// Fills `ring` from a mapping of a ring we formatted (or validated). No checks: readers of
/// untrusted files validate in Swift first.
void crumbs_ring_attach(crumbs_ring *ring, void *base);

/// One more than the highest CPU number in a kernel CPU list (`0-3,8-11\n`, the format of
/// /sys/devices/system/cpu/possible): the lanes a ring needs for every CPU to have its own.
/// 0 when the text is not such a list. Not signal-safe (set-up only; pure, for tests too).
uint32_t crumbs_cpu_list_limit(const char *text, size_t length);

/// Writes the header's memory cgroup and its OOM-kill count at start, for a ring formatted
/// without them (the cgroup read later, off the caller's thread). Not signal-safe (set-up only).
void crumbs_ring_set_cgroup(const crumbs_ring *ring, const char *cgroup, uint64_t oom_kills_at_start);

/// Marks the handle closed: from then on every append through it does nothing (a relaxed store;
/// an append already past the check finishes). Not signal-safe (set-up only).
void crumbs_ring_mark_closed(crumbs_ring *ring);

/// Makes `ring` the process-wide ring used by crumbs_add_breadcrumb and signal breadcrumbs.
/// Publishes the pointer itself (no copy): `ring` and the memory it points into must stay valid
/// for the rest of the process, as any reader may hold the pointer for ever (BreadcrumbRing
/// never frees or unmaps a ring it installed). Idempotent; installing another ring replaces it.
/// Also registers a fork handler (once) that resets the cached thread id in the child.
void crumbs_ring_install(const crumbs_ring *ring);
/// Forgets the process-wide ring. Only new readers stop: appends that already loaded it may
/// still complete, which is why an installed ring must stay valid.
void crumbs_ring_uninstall(void);
/// Forgets the process-wide ring only if it is `ring` (compare-and-swap), so a close never
/// uninstalls a ring installed since by someone else. Returns whether it did.
bool crumbs_ring_uninstall_if(const crumbs_ring *ring);
/// Where crumbs_ring_install publishes the ring (atomic; read it with crumbs_installed_ring).
extern const crumbs_ring *crumbs__installed;

/// The process-wide ring, or NULL. The pointer stays valid for ever (see crumbs_ring_install).
/// Inline: one load at every addBreadcrumb call. Safe to call from a signal handler.
static inline const crumbs_ring *crumbs_installed_ring(void) {
  return __atomic_load_n(&crumbs__installed, __ATOMIC_ACQUIRE);
}

/// Replaces the ring's file mapping (`mapped_size` bytes at ring->header) in one step by private
/// anonymous memory holding a copy of its header and lane table, and nothing in its slots. The
/// range stays mapped with the same geometry, so an append through a pointer loaded earlier
/// still writes in bounds, into memory no one reads; the file gets no further write and is
/// released (with its flock) when its descriptor is closed. Returns false when the replacement
/// could not be made (then the file mapping stays, equally safe). Not signal-safe.
bool crumbs_ring_retire(const crumbs_ring *ring, size_t mapped_size);

/// One attribute for crumbs_add_breadcrumb: NUL-terminated key and value.
typedef struct crumbs_attribute {
  const char *key;
  const char *value;
} crumbs_attribute;

/// One attribute for crumbs_add_breadcrumb_utf8: key and value as UTF-8 bytes with their lengths
/// (no NUL needed; a NULL pointer reads as empty).
typedef struct crumbs_utf8_attribute {
  const char *key;
  size_t key_length;
  const char *value;
  size_t value_length;
} crumbs_utf8_attribute;

/// Appends a breadcrumb to the process-wide ring; does nothing when none is installed or the
/// level/type is filtered. `message` is `message_length` bytes of UTF-8 (no NUL needed, NULL
/// reads as empty); nothing is measured, so nothing calls strlen: the entry for callers that
/// know their lengths (Swift's append calls crumbs_ring_add_utf8). What does not fit the slot is
/// cut at a character boundary and flagged; at most 16 attributes are kept. Returns true when
/// appended. Safe to call from a signal handler.
bool crumbs_add_breadcrumb_utf8(uint8_t level, uint8_t type, const char *message, size_t message_length,
                                const crumbs_utf8_attribute *attributes, size_t attribute_count);
/// As crumbs_add_breadcrumb_utf8, into a given ring (NULL: does nothing), with extra slot flags.
/// Safe to call from a signal handler.
bool crumbs_ring_add_utf8(const crumbs_ring *ring, uint8_t level, uint8_t type, uint8_t flags,
                          const char *message, size_t message_length, const crumbs_utf8_attribute *attributes,
                          size_t attribute_count);

/// Appends a breadcrumb to the process-wide ring; does nothing when none is installed or the
/// level/type is filtered. `message` is NUL-terminated UTF-8. Measures each string, then does
/// what crumbs_add_breadcrumb_utf8 does. Returns true when appended.
/// Safe to call from a signal handler.
bool crumbs_add_breadcrumb(uint8_t level, uint8_t type, const char *message,
                           const crumbs_attribute *attributes, size_t attribute_count);
/// As crumbs_add_breadcrumb, into a given ring, with extra slot flags.
/// Safe to call from a signal handler.
bool crumbs_ring_add(const crumbs_ring *ring, uint8_t level, uint8_t type, uint8_t flags, const char *message,
                     const crumbs_attribute *attributes, size_t attribute_count);

/// Copies slot `slot_index` into `out` (slot_size bytes) so that the copy is one consistent
/// version. Returns the commit word: DONE (even, non-zero) when it was the same before and
/// after the copy; 0 for a never-written slot; an odd value when the slot was being written or
/// changed during the copy (then `out` is not a usable copy). Safe to call from a signal handler.
uint64_t crumbs_ring_read_slot(const crumbs_ring *ring, uint32_t slot_index, void *out);

/// Sets the ring state (crumbs_ring_state) and refreshes the clock anchor.
/// Safe to call from a signal handler.
void crumbs_ring_set_state(const crumbs_ring *ring, uint32_t state);
/// Reads the ring state. Safe to call from a signal handler.
uint32_t crumbs_ring_get_state(const crumbs_ring *ring);
/// Ends the session as stopped by `signo` (state TERMINATED_BY_SIGNAL, `end_signal` written
/// first), unless it already ended (CLEAN, CRASHED or TERMINATED_BY_SIGNAL): the first end
/// wins. Returns whether it did. Safe to call from a signal handler.
bool crumbs_ring_mark_terminated_by_signal(const crumbs_ring *ring, int signo);
/// Takes a fresh clock anchor now. Safe to call from a signal handler.
void crumbs_ring_refresh_anchor_now(const crumbs_ring *ring);

/// Sets CRUMBS_SESSION_* bits in the header. Safe to call from a signal handler.
void crumbs_ring_set_session_flags(const crumbs_ring *ring, uint32_t flags);

/// Sets the minimum level and the enabled type set (0 = all) of a ring. Any thread.
void crumbs_ring_set_filter(const crumbs_ring *ring, uint8_t min_level, uint32_t enabled_types);

/// Reads the CPU counter now (for a reader in the same boot). Safe to call from a signal handler.
uint64_t crumbs_clock_now_ticks(uint32_t clock_kind);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_RING_H
