// crumbs_ring_layout.h — THE persisted layout of a Crumbs ring file. Defined once, here.
//
// Why C: the ring is written by the hot path (Swift, through the inline functions in
// crumbs_ring_append.h), by the crash handler (C, inside a signal handler) and read after the fact
// by Swift. One header keeps the three in agreement; Swift imports these structs and never
// re-declares a byte of them. Every struct carries a _Static_assert on its size and on the offsets
// readers depend on: the layout is persisted, so a size change is a format version change.
//
// File layout (all integers little-endian, the only byte order Crumbs runs on):
//
//   offset 0                     crumbs_ring_header     (one 4096-byte page)
//   offset 4096                  crumbs_ring_lane[lane_count], 64 bytes each (one cache line each,
//                                so two CPUs appending to two lanes never share a line)
//   offset slots_offset          slot_count slots of slot_size bytes, grouped by lane
//   offset ledger_offset         (version 3, when ledger_entry_count > 0) the in-flight ledger,
//                                crumbs_ledger.h, to file_size
//
// A slot:
//   crumbs_slot_header (32 bytes) | payload (slot_size - 32 bytes)
//   payload: u16 payload_len | u16 message_len | message bytes | attributes...
//   attribute: u8 key_len | u8 value_len | key bytes | value bytes
//
// Lanes. The ring is split into lanes, each an independent ring of slots with its own head
// counter on its own cache line. An appender picks the lane of the CPU it runs on (rseq/getcpu),
// so two threads on two CPUs never touch the same counter line: that line bouncing costs
// 50–180 ns per append on these machines, a plain append about 7. Lanes are of two classes:
// "general" lanes take debug and info, "important" lanes take warning, error and fatal, so a
// debug flood can never evict the last important breadcrumbs (level-aware retention).
//
// Slot commit protocol (a seqlock per slot; see crumbs_ring_append.h):
//   commit == 0                          never written
//   commit == CRUMBS_COMMIT_WRITING(n)   the writer of lane position n began and has not finished
//   commit == CRUMBS_COMMIT_DONE(n)      lane position n is complete; checksum covers it
// A writer never starts on a slot whose commit word says another writer is in it (WRITING of an
// older lap) or that it already holds a newer lap: it skips that position and claims the next.
// The checksum (seeded with n) catches what remains: two writers a lap apart racing in the few
// instructions between that check and the WRITING store, and pages torn by the machine dying.
//
// Versions. Version 2 (written now) and version 1 (still read) lay slots out the same way and
// differ only in what the checksum covers. Version 1: the slot's bytes 8..32+payload_len as 8-byte
// words, the last one zero-padded by the writer (crumbs_slot_checksum_v1). Version 2: the
// header fields and each payload field as the writer copies it, so the writer folds it into the
// copy from the words it already holds and never reads the slot back; the reader walks the
// payload to recompute it (crumbs_slot_checksum_v2).

#ifndef CRUMBS_RING_LAYOUT_H
#define CRUMBS_RING_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// "CRUMBRNG" read as a little-endian u64.
#define CRUMBS_RING_MAGIC 0x474E52424D555243ULL
/// Bumped on any change to this file's structs or to the slot encoding that a reader of the
/// previous version would misread. Fields carved out of `reserved` (always zero in earlier
/// files), whose zero means "unknown" to every reader, keep the version: `end_signal`,
/// `parent_pid`, `writer_start_ticks`, `writer_pid_namespace`, `parent_session_id`,
/// `app_version`, `environment_resource`, `thread_dump_signal`, the `hang_*` fields,
/// `stop_request`, `limit_signal` and the `rlimit_*` fields were added that way. Version 2
/// changed the slot checksum (see "Versions" above). Version 3 may have an in-flight ledger after
/// the slots (`ledger_offset`), which `file_size` includes; a reader of version 2 would refuse
/// such a file for its size. Readers read 1, 2 and 3.
#define CRUMBS_RING_VERSION 3u
/// The oldest version readers still read.
#define CRUMBS_RING_OLDEST_READABLE_VERSION 1u

#define CRUMBS_RING_HEADER_SIZE 4096u
#define CRUMBS_RING_LANE_SIZE 64u
#define CRUMBS_RING_MAX_LANES 64u
#define CRUMBS_SLOT_HEADER_SIZE 32u
#define CRUMBS_SLOT_MIN_SIZE 64u
#define CRUMBS_SLOT_MAX_SIZE 4096u
#define CRUMBS_MAX_ATTRIBUTES 16u

#define CRUMBS_COMMIT_WRITING(position) ((((uint64_t)(position) + 1u) << 1) | 1u)
#define CRUMBS_COMMIT_DONE(position) (((uint64_t)(position) + 1u) << 1)
#define CRUMBS_COMMIT_IS_DONE(commit) ((commit) != 0 && ((commit)&1u) == 0)
#define CRUMBS_COMMIT_POSITION(commit) (((commit) >> 1) - 1u)

/// Breadcrumb severity. Swift's `BreadcrumbLevel` takes its raw values from these.
typedef enum crumbs_level {
  CRUMBS_LEVEL_DEBUG = 0,
  CRUMBS_LEVEL_INFO = 1,
  CRUMBS_LEVEL_WARNING = 2,
  CRUMBS_LEVEL_ERROR = 3,
  CRUMBS_LEVEL_FATAL = 4,
} crumbs_level;
#define CRUMBS_LEVEL_COUNT 5u
/// Levels at or above this go to the important lanes.
#define CRUMBS_LEVEL_IMPORTANT CRUMBS_LEVEL_WARNING

/// What a breadcrumb is about. Swift's `BreadcrumbType` takes its raw values from these.
typedef enum crumbs_type {
  CRUMBS_TYPE_MANUAL = 0,
  CRUMBS_TYPE_LOG = 1,
  CRUMBS_TYPE_NAVIGATION = 2,
  CRUMBS_TYPE_HTTP = 3,
  CRUMBS_TYPE_SYSTEM = 4,
  CRUMBS_TYPE_USER = 5,
  CRUMBS_TYPE_CONFIGURATION = 6,
} crumbs_type;
#define CRUMBS_TYPE_COUNT 7u

/// Slot flags.
enum {
  CRUMBS_SLOT_MESSAGE_TRUNCATED = 1u << 0,
  CRUMBS_SLOT_ATTRIBUTES_TRUNCATED = 1u << 1,
  /// Appended from inside a signal handler (the crash handler's final breadcrumb, signal crumbs).
  CRUMBS_SLOT_FROM_SIGNAL_HANDLER = 1u << 2,
};

/// How `crumbs_slot_header.ticks` and the anchors' `ticks` are counted.
typedef enum crumbs_clock_kind {
  /// x86_64 RDTSC (invariant TSC) or aarch64 CNTVCT_EL0: a few ns to read, converted to time
  /// after the fact through the header's anchors.
  CRUMBS_CLOCK_CPU_COUNTER = 1,
  /// CLOCK_MONOTONIC nanoseconds (platforms without a usable counter).
  CRUMBS_CLOCK_MONOTONIC_NS = 2,
} crumbs_clock_kind;

/// Ring state, `crumbs_ring_header.state`.
typedef enum crumbs_ring_state {
  /// The owning process is (or was, if it died) running.
  CRUMBS_RING_RUNNING = 1,
  /// The owner closed it on a clean exit: nothing to report.
  CRUMBS_RING_CLEAN = 2,
  /// The crash handler ran; a crash record names this ring.
  CRUMBS_RING_CRASHED = 3,
  /// A signal whose default action terminates (SIGTERM, SIGINT, SIGHUP, ...) ended the process
  /// while the app had no handler for it: not a crash, not a clean exit. `end_signal` says which.
  /// Added without a version bump (see CRUMBS_RING_VERSION): an older reader sees an unknown
  /// state, which it reports as an abnormal end.
  CRUMBS_RING_TERMINATED_BY_SIGNAL = 4,
} crumbs_ring_state;

/// A (ticks, monotonic, wall) triple read together: maps ticks to time after the fact.
typedef struct crumbs_clock_anchor {
  uint64_t ticks;
  uint64_t monotonic_ns;
  uint64_t wall_ns; // since the Unix epoch
} crumbs_clock_anchor;
_Static_assert(sizeof(crumbs_clock_anchor) == 24, "persisted: crumbs_clock_anchor must not change");

/// The first page of a ring file.
typedef struct crumbs_ring_header {
  uint64_t magic;       // CRUMBS_RING_MAGIC
  uint32_t version;     // CRUMBS_RING_VERSION
  uint32_t header_size; // CRUMBS_RING_HEADER_SIZE
  uint32_t slot_size;   // power of two, CRUMBS_SLOT_MIN_SIZE...CRUMBS_SLOT_MAX_SIZE
  uint32_t slot_count;  // total slots, all lanes
  uint32_t lane_count;  // general + important
  uint32_t general_lane_count;
  uint64_t slots_offset; // byte offset of slot 0, a multiple of 4 KiB
  uint64_t file_size;    // slots_offset + slot_count * slot_size

  uint32_t pid;
  uint32_t clock_kind; // crumbs_clock_kind
  uint8_t session_id[16];
  uint8_t boot_id[16]; // /proc/sys/kernel/random/boot_id: ticks compare only within one boot
  crumbs_clock_anchor created;

  /// Refreshed about once a second by appenders (see crumbs_ring_append.h), by the crash
  /// handler and on clean close. The latest complete anchor is always
  /// `anchors[(anchor_generation >> 1) & 1]`; a refresher makes the generation odd, writes the
  /// other entry, then adds one more, so a writer that dies halfway leaves the old one intact.
  crumbs_clock_anchor anchors[2];
  uint64_t anchor_generation; // atomic
  uint64_t next_anchor_ticks; // atomic: ticks after which an appender refreshes the anchor

  uint32_t state;    // atomic, crumbs_ring_state
  uint8_t min_level; // atomic, crumbs_level: appends below it are dropped at once
  uint8_t reserved0[3];
  uint32_t enabled_types; // atomic bit set of (1 << crumbs_type); 0 means all
  uint32_t session_flags; // atomic, CRUMBS_SESSION_* bits

  char app_name[64];    // NUL-terminated, truncated
  char executable[256]; // NUL-terminated, truncated
  /// The cgroup's memory.events oom_kill count when the ring was made (UINT64_MAX: unknown), so
  /// the next launch can tell whether the OOM killer struck during this session.
  uint64_t cgroup_oom_kills_at_start;
  char cgroup[248]; // cgroup v2 path of the process, NUL-terminated ("" when unknown)
  /// With state CRUMBS_RING_TERMINATED_BY_SIGNAL: the signal number (written before the state).
  uint32_t end_signal;
  /// A forked child's ring (crumbs_fork.h): the pid of the process it was forked from; 0 for a
  /// process that was not forked from a Crumbs process.
  uint32_t parent_pid;
  /// The writer's start time: field 22 of /proc/<pid>/stat, clock ticks after boot. With `pid`,
  /// `boot_id` and `writer_pid_namespace` it names the writer across pid reuse, so a reader can
  /// tell a writer that still runs from a forked child that inherited the writer's flock
  /// (RingDirectory). 0: unknown (files from before the field existed): the flock decides.
  uint64_t writer_start_ticks;
  /// The inode of the writer's /proc/self/ns/pid: its pid means something only to a reader in
  /// the same pid namespace (two containers may share a directory). 0: unknown.
  uint64_t writer_pid_namespace;
  /// A forked child's ring: the session of the ring it was forked from (zero otherwise).
  uint8_t parent_session_id[16];
  /// The app's version as the writer was configured ("" when unknown or not given), so that a
  /// session that ended before its client wrote the session file is still reported with it.
  char app_version[64]; // NUL-terminated, truncated
  /// The OTel resource the writer's environment gave it (OTEL_SERVICE_NAME and
  /// OTEL_RESOURCE_ATTRIBUTES, the app's configured name over them) as a JSON object of strings,
  /// taken when the ring was made: a session that crashed before its client wrote the session
  /// file is still reported with its service name and attributes. NUL-terminated; never cut (the
  /// writer leaves out entries that do not fit); "" when none, and in files from before it.
  char environment_resource[2048];
  /// The real-time signal that asks this process for a dump of its threads (`crumbs threads
  /// PID`), chosen at start among those nobody handles; 0: none (no client, or every candidate
  /// taken, and in files from before it).
  int32_t thread_dump_signal;
  /// The hang going on, written by the client's watchdog thread only, read by the next
  /// launch when the process was killed during it. A seqlock: odd while the watchdog writes the
  /// hang fields below, even when they are whole; a reader that sees it odd, or changed across
  /// its copy, uses nothing (a writer that died halfway leaves it odd).
  uint32_t hang_sequence; // atomic
  /// When the stalled watch last showed life (wall ns since the Unix epoch); 0: no hang going on.
  uint64_t hang_since_wall_ns;
  /// The watchdog's latest look with the hang still going on (wall ns): the hang lasted at
  /// least `hang_seen_wall_ns - hang_since_wall_ns` when the process was killed.
  uint64_t hang_seen_wall_ns;
  char hang_watch[64]; // the stalled watch's name, NUL-terminated, truncated
  /// The stalled thread's top frames, symbolicated by the watchdog ("f ← g ← h"), NUL-terminated,
  /// truncated; "" when no thread could be named.
  char hang_frames[512];
  /// Why a session that vanished did ("every unclean end explained"): a SIGKILL after
  /// a grace period or a hard limit runs no code of ours, so the signal that came before it must
  /// already be in the file (the trail that holds its breadcrumb may be lapped). Each is one
  /// 64-bit word, CRUMBS_RING_SIGNAL_SEEN(signal, wall ns), set once from 0 by one
  /// compare-and-swap (crumbs_ring_ends.h): the first one counts, as a grace period starts at the
  /// first SIGTERM. 0: none (and in files from before the fields).
  /// The first stop request the app took over: SIGTERM, SIGINT or SIGHUP handled or ignored.
  uint64_t stop_request; // atomic
  /// The first SIGXCPU or SIGXFSZ the process outlived (handled or ignored): a CPU hard limit's
  /// SIGKILL follows a SIGXCPU at the soft limit.
  uint64_t limit_signal; // atomic
  /// Resource limits when the ring was made ({soft, hard}, getrlimit units, CRUMBS_RLIMIT_NONE
  /// when unlimited), meaningful only when `limits_recorded` is 1 (0 in older files).
  uint64_t rlimit_cpu[2];    // seconds of CPU time (RLIMIT_CPU)
  uint64_t rlimit_fsize[2];  // bytes of one file (RLIMIT_FSIZE)
  uint64_t rlimit_rttime[2]; // µs of real-time CPU without a blocking call (RLIMIT_RTTIME)
  uint32_t limits_recorded;
  uint32_t reserved1;
  /// Version 3: where the in-flight ledger starts (crumbs_ledger.h), right after the slots, and
  /// how many entries it has; 0 and 0 when the ring has none (and in earlier versions).
  uint64_t ledger_offset;
  uint32_t ledger_entry_count;
  uint32_t reserved2;
  uint8_t reserved[488];
} crumbs_ring_header;

/// A `stop_request` / `limit_signal` word: wall milliseconds since the Unix epoch above the
/// signal number's 8 bits (never 0 for a real signal).
#define CRUMBS_RING_SIGNAL_SEEN(signo, wall_ns) \
  ((((uint64_t)(wall_ns) / 1000000u) << 8) | ((uint64_t)(signo)&0xFFu))
#define CRUMBS_RING_SIGNAL_SEEN_SIGNAL(word) ((int)((word)&0xFFu))
#define CRUMBS_RING_SIGNAL_SEEN_WALL_NS(word) (((word) >> 8) * 1000000u)
/// An unlimited resource in the `rlimit_*` fields (RLIM_INFINITY on Linux).
#define CRUMBS_RLIMIT_NONE 0xFFFFFFFFFFFFFFFFULL

/// `crumbs_ring_header.session_flags` bits.
enum {
  /// A memory-pressure warning was recorded during the session.
  CRUMBS_SESSION_MEMORY_WARNING = 1u << 0,
};
_Static_assert(sizeof(crumbs_ring_header) == CRUMBS_RING_HEADER_SIZE,
               "persisted: crumbs_ring_header must stay one page");
_Static_assert(offsetof(crumbs_ring_header, version) == 8, "persisted");
_Static_assert(offsetof(crumbs_ring_header, pid) == 48, "persisted");
_Static_assert(offsetof(crumbs_ring_header, created) == 88, "persisted");
_Static_assert(offsetof(crumbs_ring_header, state) == 176, "persisted");
_Static_assert(offsetof(crumbs_ring_header, app_name) == 192, "persisted");
_Static_assert(offsetof(crumbs_ring_header, cgroup_oom_kills_at_start) == 512, "persisted");
_Static_assert(offsetof(crumbs_ring_header, end_signal) == 768, "persisted");
_Static_assert(offsetof(crumbs_ring_header, parent_pid) == 772, "persisted");
_Static_assert(offsetof(crumbs_ring_header, writer_start_ticks) == 776, "persisted");
_Static_assert(offsetof(crumbs_ring_header, writer_pid_namespace) == 784, "persisted");
_Static_assert(offsetof(crumbs_ring_header, app_version) == 808, "persisted");
_Static_assert(offsetof(crumbs_ring_header, parent_session_id) == 792, "persisted");
_Static_assert(offsetof(crumbs_ring_header, environment_resource) == 872, "persisted");
_Static_assert(offsetof(crumbs_ring_header, thread_dump_signal) == 2920, "persisted");
_Static_assert(offsetof(crumbs_ring_header, hang_sequence) == 2924, "persisted");
_Static_assert(offsetof(crumbs_ring_header, hang_since_wall_ns) == 2928, "persisted");
_Static_assert(offsetof(crumbs_ring_header, hang_watch) == 2944, "persisted");
_Static_assert(offsetof(crumbs_ring_header, hang_frames) == 3008, "persisted");
_Static_assert(offsetof(crumbs_ring_header, stop_request) == 3520, "persisted");
_Static_assert(offsetof(crumbs_ring_header, limit_signal) == 3528, "persisted");
_Static_assert(offsetof(crumbs_ring_header, rlimit_cpu) == 3536, "persisted");
_Static_assert(offsetof(crumbs_ring_header, rlimit_fsize) == 3552, "persisted");
_Static_assert(offsetof(crumbs_ring_header, rlimit_rttime) == 3568, "persisted");
_Static_assert(offsetof(crumbs_ring_header, limits_recorded) == 3584, "persisted");
_Static_assert(offsetof(crumbs_ring_header, ledger_offset) == 3592, "persisted");
_Static_assert(offsetof(crumbs_ring_header, ledger_entry_count) == 3600, "persisted");

/// The entry of `anchors` holding the latest complete anchor when `anchor_generation` is
/// `generation`; a refresher writes the other one (`index ^ 1`). The one statement of the rule,
/// for the writer (crumbs_ring.c) and the readers (Swift's RingHeaderValidation). Pure.
static inline uint32_t crumbs_ring_anchor_index(uint64_t generation) {
  return (uint32_t)((generation >> 1) & 1u);
}

/// The latest complete anchor of a header (a copy, or a file no writer is changing: the
/// generation is read plainly). Pure.
static inline crumbs_clock_anchor crumbs_ring_header_latest_anchor(const crumbs_ring_header *header) {
  return header->anchors[crumbs_ring_anchor_index(header->anchor_generation)];
}

/// Where slot 0 starts in a ring with `lane_count` lanes: after the header and the lane table,
/// rounded up to a multiple of 4 KiB (a layout rule, not the page size: the file is mapped whole
/// from offset 0, under any page size). For the writer's plan (crumbs_ring.c) and the reader's
/// check. Pure.
static inline uint64_t crumbs_ring_slots_offset(uint32_t lane_count) {
  uint64_t lanes_end = CRUMBS_RING_HEADER_SIZE + (uint64_t)lane_count * CRUMBS_RING_LANE_SIZE;
  return (lanes_end + 4095u) & ~(uint64_t)4095u;
}

/// One lane: its head counter alone on a cache line.
typedef struct crumbs_ring_lane {
  uint64_t head;       // atomic: positions ever claimed in this lane
  uint32_t first_slot; // index into the ring's slots
  uint32_t slot_count; // power of two
  uint32_t important;  // 1 for a warning-and-above lane
  uint32_t reserved0;
  /// atomic: positions claimed and left unwritten because their slot was still being written
  /// by a writer a whole lap behind (or already held a newer lap); see crumbs_ring_begin.
  uint64_t skipped;
  /// atomic: breadcrumbs given up after CRUMBS_RING_CLAIM_ATTEMPTS skipped positions.
  uint64_t dropped;
  uint8_t reserved[24];
} crumbs_ring_lane;
_Static_assert(sizeof(crumbs_ring_lane) == CRUMBS_RING_LANE_SIZE, "persisted: one cache line");
_Static_assert(offsetof(crumbs_ring_lane, skipped) == 24, "persisted");
_Static_assert(offsetof(crumbs_ring_lane, dropped) == 32, "persisted");

/// How many positions an append claims before it gives up (see crumbs_ring_begin).
#define CRUMBS_RING_CLAIM_ATTEMPTS 3u

/// The fixed part of every slot.
typedef struct crumbs_slot_header {
  uint64_t commit;     // atomic, see CRUMBS_COMMIT_*
  uint64_t ticks;      // crumbs_clock_kind units
  uint32_t thread_id;  // kernel tid
  uint32_t thread_seq; // per-thread sequence: orders one thread's breadcrumbs exactly
  uint32_t checksum;   // crumbs_slot_checksum_v2 (version-1 files: crumbs_slot_checksum_v1)
  uint8_t level;       // crumbs_level
  uint8_t type;        // crumbs_type
  uint8_t flags;       // CRUMBS_SLOT_*
  uint8_t attribute_count;
} crumbs_slot_header;
_Static_assert(sizeof(crumbs_slot_header) == CRUMBS_SLOT_HEADER_SIZE, "persisted: slot header");
_Static_assert(offsetof(crumbs_slot_header, checksum) == 24, "persisted");

/// Offset of the payload's first byte in a slot, and of the message bytes.
#define CRUMBS_SLOT_PAYLOAD_OFFSET CRUMBS_SLOT_HEADER_SIZE
#define CRUMBS_SLOT_MESSAGE_OFFSET (CRUMBS_SLOT_HEADER_SIZE + 4u)

/// Version 1's slot checksum (read, no longer written): covers the slot from `ticks` to the end of
/// the payload rounded up to 8 bytes (the writer zero-padded that last word), with the checksum
/// field itself read as zero, seeded with the lane position so a slot from another lap never
/// verifies as this one. Safe to call from a signal handler: pure computation.
static inline uint32_t crumbs_slot_checksum_v1(const void *slot, uint32_t covered_bytes, uint64_t position) {
  const unsigned char *bytes = (const unsigned char *)slot;
  uint32_t end = (covered_bytes + 7u) & ~7u;
  uint64_t word;
  // The fixed header words: ticks, tid|seq, checksum|level|type|flags|count (checksum masked).
  __builtin_memcpy(&word, bytes + 8, 8);
  uint64_t sum = word + position * 0x9E3779B97F4A7C15ULL + end;
  uint64_t mix = word ^ 0xC2B2AE3D27D4EB4FULL;
  __builtin_memcpy(&word, bytes + 16, 8);
  sum += word;
  mix ^= word << 1;
  __builtin_memcpy(&word, bytes + 24, 8);
  word &= 0xFFFFFFFF00000000ULL;
  sum += word;
  mix ^= word << 2;
  for (uint32_t index = 32; index < end; index += 8) {
    __builtin_memcpy(&word, bytes + index, 8);
    sum += word;
    mix ^= word;
  }
  uint64_t folded = sum ^ (mix * 0xFF51AFD7ED558CCDULL);
  folded ^= folded >> 29;
  return (uint32_t)(folded ^ (folded >> 32));
}

/// Version 2's slot checksum, accumulated: two independent one-cycle chains (a sum and an xor)
/// over 64-bit words, seeded with the lane position, and one final mix. Any mix of two versions
/// of a slot changes it, and a slot from another lap never verifies as this one.
typedef struct crumbs_checksum {
  uint64_t sum;
  uint64_t mix;
} crumbs_checksum;

static inline __attribute__((always_inline)) crumbs_checksum crumbs_checksum_start(uint64_t position) {
  crumbs_checksum checksum = {position * 0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL};
  return checksum;
}

static inline __attribute__((always_inline)) void crumbs_checksum_word(crumbs_checksum *checksum,
                                                                       uint64_t word) {
  checksum->sum += word;
  checksum->mix ^= word;
}

static inline __attribute__((always_inline)) uint32_t crumbs_checksum_finish(crumbs_checksum checksum) {
  uint64_t folded = checksum.sum ^ (checksum.mix * 0xFF51AFD7ED558CCDULL);
  folded ^= folded >> 29;
  return (uint32_t)(folded ^ (folded >> 32));
}

/// Adds `length` bytes at `bytes` the way the writer reads them while copying: whole 8-byte words,
/// then the last 8 bytes (overlapping) when the length is not a multiple of 8; below 8 bytes, two
/// overlapping halves packed into one word. The reader calls it on the slot's copy of the field,
/// the writer on the source it copies from: the same bytes give the same words.
static inline __attribute__((always_inline)) void crumbs_checksum_bytes(crumbs_checksum *checksum,
                                                                        const unsigned char *bytes,
                                                                        uint32_t length) {
  if (length >= 8) {
    uint64_t word;
    uint32_t index = 0;
    for (; index + 8 <= length; index += 8) {
      __builtin_memcpy(&word, bytes + index, 8);
      crumbs_checksum_word(checksum, word);
    }
    if (index < length) {
      __builtin_memcpy(&word, bytes + length - 8, 8);
      crumbs_checksum_word(checksum, word);
    }
  } else if (length >= 4) {
    uint32_t head, tail;
    __builtin_memcpy(&head, bytes, 4);
    __builtin_memcpy(&tail, bytes + length - 4, 4);
    crumbs_checksum_word(checksum, (uint64_t)head | (uint64_t)tail << 32);
  } else if (length >= 2) {
    uint16_t head, tail;
    __builtin_memcpy(&head, bytes, 2);
    __builtin_memcpy(&tail, bytes + length - 2, 2);
    crumbs_checksum_word(checksum, (uint64_t)head | (uint64_t)tail << 16);
  } else if (length == 1) {
    crumbs_checksum_word(checksum, bytes[0]);
  }
}

/// Version 2's slot checksum of a slot copy (`slot_size` bytes), recomputed by walking its
/// payload: the words at offsets 8 (ticks) and 16 (thread id and sequence), the u32 at 28 (level,
/// type, flags, attribute count), the payload and message lengths, the message, and per attribute
/// its two length bytes, key and value. Returns false, leaving `checksum` alone, when the payload
/// does not parse exactly (lengths past the payload, or bytes left over). Safe to call from a
/// signal handler: pure computation.
static inline bool crumbs_slot_checksum_v2(const void *slot, uint32_t slot_size, uint64_t position,
                                           uint32_t *checksum) {
  const unsigned char *bytes = (const unsigned char *)slot;
  if (slot_size < CRUMBS_SLOT_MIN_SIZE) return false;
  uint16_t payload_length, message_length;
  __builtin_memcpy(&payload_length, bytes + CRUMBS_SLOT_PAYLOAD_OFFSET, 2);
  __builtin_memcpy(&message_length, bytes + CRUMBS_SLOT_PAYLOAD_OFFSET + 2, 2);
  uint32_t end = CRUMBS_SLOT_PAYLOAD_OFFSET + (uint32_t)payload_length;
  if (payload_length < 4 || end > slot_size) return false;
  uint32_t cursor = CRUMBS_SLOT_MESSAGE_OFFSET;
  if (message_length > end - cursor) return false;
  crumbs_checksum sum = crumbs_checksum_start(position);
  uint64_t word;
  __builtin_memcpy(&word, bytes + 8, 8);
  crumbs_checksum_word(&sum, word);
  __builtin_memcpy(&word, bytes + 16, 8);
  crumbs_checksum_word(&sum, word);
  uint32_t meta;
  __builtin_memcpy(&meta, bytes + 28, 4);
  crumbs_checksum_word(&sum, meta);
  crumbs_checksum_word(&sum, (uint64_t)payload_length | (uint64_t)message_length << 16);
  crumbs_checksum_bytes(&sum, bytes + cursor, message_length);
  cursor += message_length;
  uint8_t attribute_count = bytes[31];
  for (uint32_t index = 0; index < attribute_count; index++) {
    if (end - cursor < 2) return false;
    uint32_t key_length = bytes[cursor], value_length = bytes[cursor + 1];
    crumbs_checksum_word(&sum, key_length | value_length << 8);
    cursor += 2;
    if (key_length + value_length > end - cursor) return false;
    crumbs_checksum_bytes(&sum, bytes + cursor, key_length);
    cursor += key_length;
    crumbs_checksum_bytes(&sum, bytes + cursor, value_length);
    cursor += value_length;
  }
  if (cursor != end) return false;
  *checksum = crumbs_checksum_finish(sum);
  return true;
}

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_RING_LAYOUT_H
