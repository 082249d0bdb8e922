// crumbs_ring.c — ring formatting, the process-wide ring, the C entry point, seqlock reads.
// Design: docs/crash-capture.md#ring-the-append
//
// ASYNC-SIGNAL-SAFE (per function, see crumbs_ring.h): crumbs_add_breadcrumb, crumbs_ring_add,
// crumbs_add_breadcrumb_utf8, crumbs_ring_add_utf8, crumbs_installed_ring, crumbs_ring_read_slot,
// crumbs__lane_claim_again, crumbs_ring_set_state, crumbs_ring_get_state,
// crumbs_ring_mark_terminated_by_signal, crumbs_ring_refresh_anchor_now,
// crumbs_ring_set_session_flags, crumbs__thread_id_slow, crumbs__ring_refresh_anchor,
// crumbs__monotonic_ns, crumbs_ring_plan and crumbs_ring_format (a forked child's fork handler
// calls them: crumbs_fork.c). libc they call: clock_gettime (crumbs_context.c),
// syscall(SYS_gettid), sched_getcpu, __builtin_memcpy; string lengths and copies come from
// crumbs_format.c (plain loops, no libc). No malloc, no locks, no stdio.
// Not signal-safe (set-up only): crumbs_ring_attach (open, read, close of
// /sys/devices/system/cpu/possible), crumbs_cpu_list_limit, crumbs_ring_mark_closed,
// crumbs_ring_set_cgroup, crumbs_ring_install (pthread_atfork), crumbs_ring_uninstall,
// crumbs_ring_uninstall_if, crumbs_ring_set_filter, crumbs_ring_retire (mmap, mremap, munmap:
// plain system calls, no lock, so the fork handler may call it in a forked child too).

#define _GNU_SOURCE
#include "crumbs_ledger.h"
#include "crumbs_ring.h"
#include "kit/crumbs_context.h"
#include "kit/crumbs_format.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread crumbs_thread_state crumbs__thread __attribute__((tls_model("initial-exec")));

// MARK: - Clocks and thread ids

uint64_t crumbs__monotonic_ns(void) { return crumbs__context_clock_ns(CLOCK_MONOTONIC); }

static uint64_t crumbs__wall_ns(void) { return crumbs__context_clock_ns(CLOCK_REALTIME); }

uint64_t crumbs_clock_now_ticks(uint32_t clock_kind) { return crumbs_clock_ticks(clock_kind); }

// Set by the crash handler (crumbs_altstack.c) to give each thread an alternate signal
// stack on its first append; NULL otherwise. Must be async-signal-safe, preserve errno, and
// keep the hot path's promise: O(1), at most the one system call it documents.
void (*crumbs__first_append_hook)(void);

uint32_t crumbs__thread_id_slow(void) {
  uint32_t thread_id = (uint32_t)syscall(SYS_gettid);
  crumbs__thread.thread_id = thread_id;
  void (*hook)(void) = __atomic_load_n(&crumbs__first_append_hook, __ATOMIC_ACQUIRE);
  if (hook != NULL) hook();
  return thread_id;
}

static void crumbs__reset_thread_after_fork(void) {
  // The child's only thread has a new tid; its sequence numbering starts again too.
  crumbs__thread.thread_id = 0;
  crumbs__thread.next_seq = 0;
}

/// Samples taken per anchor; the narrowest is kept.
#define CRUMBS__ANCHOR_SAMPLES 3

/// The counter's ticks paired with both clocks, read between two counter reads whose midpoint
/// stands for them. The narrowest of a few samples is kept: a sample whose reads were spread
/// out (the first call of a clock function in a process, resolved by the dynamic linker; an
/// interrupt; a preemption) puts its midpoint microseconds away from the clock reads, an error
/// every breadcrumb converted through the anchor keeps (seen: the first ring of a process
/// stamped its breadcrumbs 1-2 µs late). ASYNC-SIGNAL-SAFE: clock reads only.
static crumbs_clock_anchor crumbs__take_anchor(uint32_t clock_kind) {
  crumbs_clock_anchor best = {0, 0, 0};
  uint64_t best_width = UINT64_MAX;
  for (int sample = 0; sample < CRUMBS__ANCHOR_SAMPLES; sample++) {
    crumbs_clock_anchor anchor;
    uint64_t before = crumbs_clock_ticks(clock_kind);
    anchor.monotonic_ns = crumbs__monotonic_ns();
    anchor.wall_ns = crumbs__wall_ns();
    uint64_t after = crumbs_clock_ticks(clock_kind);
    uint64_t width = after - before;
    anchor.ticks = before + width / 2;
    if (width < best_width) {
      best = anchor;
      best_width = width;
    }
  }
  return best;
}

// MARK: - Anchors

/// Ticks between two anchor refreshes: about one second, estimated from the creation anchor
/// and `latest`; a short first interval gives the first estimate quickly.
static uint64_t crumbs__anchor_interval(const crumbs_ring_header *header, crumbs_clock_anchor latest) {
  if (header->clock_kind != CRUMBS_CLOCK_CPU_COUNTER) return 1000000000u;
  uint64_t elapsed_ns = latest.monotonic_ns - header->created.monotonic_ns;
  uint64_t elapsed_ticks = latest.ticks - header->created.ticks;
  if (elapsed_ns < 1000000u || elapsed_ticks == 0) return 1u << 22;
  unsigned __int128 per_second = (unsigned __int128)elapsed_ticks * 1000000000u / elapsed_ns;
  return per_second > 0 ? (uint64_t)per_second : (1u << 22);
}

void crumbs__ring_refresh_anchor(const crumbs_ring *ring) {
  crumbs_ring_header *header = ring->header;
  uint64_t generation = __atomic_load_n(&header->anchor_generation, __ATOMIC_ACQUIRE);
  // Odd: another thread (or the code this signal handler interrupted) is refreshing. Skip:
  // waiting here could deadlock a signal handler, and one refresh is as good as another.
  if (generation & 1) return;
  if (!__atomic_compare_exchange_n(&header->anchor_generation, &generation, generation + 1, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    return;
  }
  crumbs_clock_anchor anchor = crumbs__take_anchor(ring->clock_kind);
  header->anchors[crumbs_ring_anchor_index(generation) ^ 1u] = anchor;
  __atomic_store_n(&header->next_anchor_ticks, anchor.ticks + crumbs__anchor_interval(header, anchor),
                   __ATOMIC_RELAXED);
  __atomic_store_n(&header->anchor_generation, generation + 2, __ATOMIC_RELEASE);
}

void crumbs_ring_refresh_anchor_now(const crumbs_ring *ring) { crumbs__ring_refresh_anchor(ring); }

// MARK: - Planning and formatting

static uint32_t crumbs__floor_power_of_two(uint32_t value) {
  if (value == 0) return 0;
  return 1u << (31 - __builtin_clz(value));
}

static uint32_t crumbs__nearest_power_of_two(uint32_t value) {
  uint32_t below = crumbs__floor_power_of_two(value);
  if (below == 0) return 1;
  if (below == value || below >= (1u << 31)) return below;
  uint32_t above = below << 1;
  return (value - below) <= (above - value) ? below : above;
}

int crumbs_ring_plan(uint32_t slot_size, uint32_t slot_count, uint32_t cpu_count, uint32_t important_share,
                     crumbs_ring_plan_result *plan) {
  if (slot_size < CRUMBS_SLOT_MIN_SIZE || slot_size > CRUMBS_SLOT_MAX_SIZE ||
      (slot_size & (slot_size - 1)) != 0) {
    return CRUMBS_PLAN_BAD_SLOT_SIZE;
  }
  if (slot_count < 64 || slot_count > (1u << 24)) return CRUMBS_PLAN_BAD_SLOT_COUNT;
  if (cpu_count == 0) cpu_count = 1;
  if (important_share < 2) important_share = 2;

  uint32_t important_wanted = slot_count / important_share;
  uint32_t general_wanted = slot_count - important_wanted;

  // One general lane per CPU (rounded up to a power of two), but no lane under 32 slots.
  uint32_t general_lanes = crumbs__floor_power_of_two(cpu_count);
  if (general_lanes < cpu_count) general_lanes <<= 1;
  if (general_lanes > CRUMBS_RING_MAX_LANES / 2) general_lanes = CRUMBS_RING_MAX_LANES / 2;
  while (general_lanes > 1 && general_wanted / general_lanes < 32) general_lanes >>= 1;
  // Important breadcrumbs are rare: fewer lanes, none under 16 slots.
  uint32_t important_lanes = general_lanes;
  while (important_lanes > 1 && important_wanted / important_lanes < 16) important_lanes >>= 1;

  uint32_t general_lane_slots = crumbs__nearest_power_of_two(general_wanted / general_lanes);
  uint32_t important_lane_slots = crumbs__nearest_power_of_two(important_wanted / important_lanes);
  if (important_lane_slots < 8) important_lane_slots = 8;

  plan->slot_size = slot_size;
  plan->general_lane_count = general_lanes;
  plan->important_lane_count = important_lanes;
  plan->general_lane_slots = general_lane_slots;
  plan->important_lane_slots = important_lane_slots;
  plan->slot_count = general_lanes * general_lane_slots + important_lanes * important_lane_slots;
  plan->slots_offset = crumbs_ring_slots_offset(general_lanes + important_lanes);
  plan->ledger_offset = 0;
  plan->ledger_entry_count = 0;
  plan->file_size = plan->slots_offset + (uint64_t)plan->slot_count * slot_size;
  return CRUMBS_PLAN_OK;
}

int crumbs_ring_plan_ledger(crumbs_ring_plan_result *plan, uint32_t entry_count) {
  uint64_t slots_end = plan->slots_offset + (uint64_t)plan->slot_count * plan->slot_size;
  if (entry_count == 0) {
    plan->ledger_offset = 0;
    plan->ledger_entry_count = 0;
    plan->file_size = slots_end;
    return CRUMBS_PLAN_OK;
  }
  if (!crumbs_ledger_entry_count_is_valid(entry_count)) return CRUMBS_PLAN_BAD_LEDGER_SIZE;
  // Slots are at least 64 bytes and a power of two: their end is 64-aligned, as entries want.
  plan->ledger_offset = slots_end;
  plan->ledger_entry_count = entry_count;
  plan->file_size = slots_end + crumbs_ledger_bytes(entry_count);
  return CRUMBS_PLAN_OK;
}

void crumbs_ring_format(void *base, const crumbs_ring_plan_result *plan, const crumbs_ring_identity *identity,
                        bool cpu_counter_is_reliable) {
  crumbs_ring_header *header = (crumbs_ring_header *)base;
  header->version = CRUMBS_RING_VERSION;
  header->header_size = CRUMBS_RING_HEADER_SIZE;
  header->slot_size = plan->slot_size;
  header->slot_count = plan->slot_count;
  header->lane_count = plan->general_lane_count + plan->important_lane_count;
  header->general_lane_count = plan->general_lane_count;
  header->slots_offset = plan->slots_offset;
  header->file_size = plan->file_size;
  header->pid = identity->pid;
#if defined(__x86_64__) || defined(__aarch64__)
  header->clock_kind = cpu_counter_is_reliable ? CRUMBS_CLOCK_CPU_COUNTER : CRUMBS_CLOCK_MONOTONIC_NS;
#else
  (void)cpu_counter_is_reliable;
  header->clock_kind = CRUMBS_CLOCK_MONOTONIC_NS;
#endif
  __builtin_memcpy(header->session_id, identity->session_id, 16);
  __builtin_memcpy(header->boot_id, identity->boot_id, 16);
  header->created = crumbs__take_anchor(header->clock_kind);
  header->anchors[0] = header->created;
  header->anchor_generation = 0;
  header->next_anchor_ticks = header->created.ticks + crumbs__anchor_interval(header, header->created);
  header->state = CRUMBS_RING_RUNNING;
  header->min_level = CRUMBS_LEVEL_DEBUG;
  header->enabled_types = 0;
  crumbs__format_copy(header->app_name, sizeof header->app_name, identity->app_name);
  crumbs__format_copy(header->app_version, sizeof header->app_version, identity->app_version);
  crumbs__format_copy(header->environment_resource, sizeof header->environment_resource,
                      identity->environment_resource);
  crumbs__format_copy(header->executable, sizeof header->executable, identity->executable);
  crumbs__format_copy(header->cgroup, sizeof header->cgroup, identity->cgroup);
  header->cgroup_oom_kills_at_start = identity->cgroup_oom_kills_at_start;
  header->writer_start_ticks = identity->writer_start_ticks;
  header->writer_pid_namespace = identity->writer_pid_namespace;
  header->parent_pid = identity->parent_pid;
  __builtin_memcpy(header->parent_session_id, identity->parent_session_id, 16);
  if (plan->ledger_entry_count > 0) {
    crumbs_ledger_format((unsigned char *)base + plan->ledger_offset, plan->ledger_entry_count);
    header->ledger_offset = plan->ledger_offset;
    header->ledger_entry_count = plan->ledger_entry_count;
  }

  crumbs_ring_lane *lanes = (crumbs_ring_lane *)((unsigned char *)base + CRUMBS_RING_HEADER_SIZE);
  uint32_t next_slot = 0;
  for (uint32_t index = 0; index < header->lane_count; index++) {
    bool important = index >= plan->general_lane_count;
    lanes[index].head = 0;
    lanes[index].first_slot = next_slot;
    lanes[index].slot_count = important ? plan->important_lane_slots : plan->general_lane_slots;
    lanes[index].important = important ? 1 : 0;
    next_slot += lanes[index].slot_count;
  }
  // The magic goes last: a file whose formatting was interrupted is not a ring.
  __atomic_store_n(&header->magic, CRUMBS_RING_MAGIC, __ATOMIC_RELEASE);
}

static uint32_t crumbs__possible_cpu_limit(void);

void crumbs_ring_attach(crumbs_ring *ring, void *base) {
  crumbs_ring_header *header = (crumbs_ring_header *)base;
  ring->header = header;
  ring->lanes = (crumbs_ring_lane *)((unsigned char *)base + CRUMBS_RING_HEADER_SIZE);
  ring->slots = (unsigned char *)base + header->slots_offset;
  ring->slot_size = header->slot_size;
  ring->general_lane_mask = header->general_lane_count - 1;
  ring->important_lane_mask = header->lane_count - header->general_lane_count - 1;
  ring->clock_kind = header->clock_kind;
  ring->closed = 0;
  // A lane of its own for every CPU the machine can have (not only those online now): then no
  // two CPUs share a lane and crumbs__lane_claim may claim without a locked instruction. A CPU's
  // lane is its number masked, so what counts is the highest possible CPU number, not how many
  // there are (sysconf(_SC_NPROCESSORS_CONF) counts them: 8 for "0-3,8-11", whose CPUs 0 and 8
  // would share a lane). Unknown (no sysfs): the locked claim.
  uint32_t cpus = crumbs__possible_cpu_limit();
  uint32_t general = header->general_lane_count;
  uint32_t important = header->lane_count - header->general_lane_count;
  ring->ledger = NULL;
  ring->ledger_entry_mask = 0;
  if (header->version >= 3 && header->ledger_entry_count > 0) {
    ring->ledger = (crumbs_ledger_header *)((unsigned char *)base + header->ledger_offset);
    ring->ledger_entry_mask = header->ledger_entry_count - 1;
  }
  ring->exclusive_lanes = 0;
  if (cpus > 0 && cpus <= general) ring->exclusive_lanes |= 1u;
  if (cpus > 0 && cpus <= important) ring->exclusive_lanes |= 2u;
}

uint32_t crumbs_cpu_list_limit(const char *text, size_t length) {
  // Ranges and single numbers separated by commas, maybe a line end; the list is sorted, but
  // take the maximum anyway. Anything else (a separator with no number after it, a number past
  // 2^20) makes the list unknown.
  uint32_t limit = 0;
  uint32_t number = 0;
  bool digits = false;
  for (size_t index = 0; index < length; index++) {
    char byte = text[index];
    if (byte >= '0' && byte <= '9') {
      number = number * 10 + (uint32_t)(byte - '0');
      if (number > (1u << 20)) return 0;
      digits = true;
      continue;
    }
    if (!digits) return 0;
    if (number + 1 > limit) limit = number + 1;
    number = 0;
    digits = false;
    if (byte == '\n' && index + 1 == length) return limit;
    if (byte != ',' && byte != '-') return 0;
  }
  if (!digits) return 0;
  return number + 1 > limit ? number + 1 : limit;
}

/// One more than the highest CPU number the kernel may ever use, from
/// /sys/devices/system/cpu/possible; 0 when it cannot be read. Not signal-safe (set-up only).
/// libc: open, read, close.
static uint32_t crumbs__possible_cpu_limit(void) {
  int descriptor = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return 0;
  char text[256];
  ssize_t length = read(descriptor, text, sizeof(text));
  close(descriptor);
  if (length <= 0 || (size_t)length == sizeof(text)) return 0;
  return crumbs_cpu_list_limit(text, (size_t)length);
}

uint64_t crumbs__lane_claim_again(const crumbs_ring *ring, uint8_t level, crumbs_ring_lane **lane) {
  // Called after a sequence aborted (the thread was preempted, migrated or signalled in it, or
  // ran on another CPU than the lane's): the lane of the CPU it runs on now. Another abort comes
  // back here through a tail call: a loop, each turn one more abort.
  uint32_t cpu = crumbs_current_cpu();
  *lane = crumbs__lane_for(ring, level, cpu);
#if defined(CRUMBS_HAVE_RSEQ)
  int32_t registered = *(const volatile int32_t *)((const char *)__builtin_thread_pointer() + __rseq_offset +
                                                   4); // struct rseq.cpu_id
  // A thread glibc could not register (cpu_id negative) would abort every sequence: the locked
  // claim. It may race with a sequence on the lane's CPU (it could have moved since it read its
  // CPU); the two writers of one position then tear the slot, which readers refuse.
  if (registered < 0) return __atomic_fetch_add(&(*lane)->head, 1, __ATOMIC_RELAXED);
#endif
  return crumbs__lane_claim(ring, level, lane, cpu);
}

void crumbs_ring_set_cgroup(const crumbs_ring *ring, const char *cgroup, uint64_t oom_kills_at_start) {
  crumbs_ring_header *header = ring->header;
  crumbs__format_copy(header->cgroup, sizeof header->cgroup, cgroup);
  header->cgroup_oom_kills_at_start = oom_kills_at_start;
}

void crumbs_ring_mark_closed(crumbs_ring *ring) { __atomic_store_n(&ring->closed, 1, __ATOMIC_RELAXED); }

// MARK: - The process-wide ring

// Installing publishes the caller's handle itself: no copy, no slot that a later install could
// overwrite under a reader that loaded the pointer earlier (a signal handler, an append in
// flight). The caller keeps the handle and its mapping valid for the process's life
// (BreadcrumbRing: see its design comment); uninstalling only stops new readers.
const crumbs_ring *crumbs__installed;
static int crumbs__fork_handler_registered;

void crumbs_ring_install(const crumbs_ring *ring) {
  if (__atomic_exchange_n(&crumbs__fork_handler_registered, 1, __ATOMIC_ACQ_REL) == 0) {
    pthread_atfork(NULL, NULL, crumbs__reset_thread_after_fork);
  }
  // Sequentially consistent, paired with crumbs_ring_uninstall_if: a closer that marks its ring
  // closed and then uninstalls, racing an installer that installs and then checks "closed",
  // cannot both miss each other.
  __atomic_store_n(&crumbs__installed, ring, __ATOMIC_SEQ_CST);
}

void crumbs_ring_uninstall(void) { __atomic_store_n(&crumbs__installed, NULL, __ATOMIC_SEQ_CST); }

bool crumbs_ring_uninstall_if(const crumbs_ring *ring) {
  const crumbs_ring *expected = ring;
  return __atomic_compare_exchange_n(&crumbs__installed, &expected, NULL, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

// MARK: - Retiring a mapping

bool crumbs_ring_retire(const crumbs_ring *ring, size_t mapped_size) {
  void *base = ring->header;
  size_t tables = (size_t)(ring->slots - (unsigned char *)base);
  // Build the replacement aside, then move it over the file mapping in one mremap: at every
  // instant the range holds a lane table with this ring's geometry, so an append that loaded
  // the handle before the close computes an in-bounds slot. The slot pages stay untouched
  // (zero, not backed) until a late writer touches one.
  void *copy =
      mmap(NULL, mapped_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (copy == MAP_FAILED) return false;
  // Word-wise relaxed loads: racing writers may move heads and anchors during the copy, and
  // any value they leave is in bounds (the geometry they cannot change).
  const uint64_t *source = (const uint64_t *)base;
  uint64_t *destination = (uint64_t *)copy;
  for (size_t index = 0; index < tables / 8; index++) {
    destination[index] = __atomic_load_n(&source[index], __ATOMIC_RELAXED);
  }
  if (mremap(copy, mapped_size, mapped_size, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED) {
    munmap(copy, mapped_size);
    return false;
  }
  return true;
}

// MARK: - Appending from C (and from Swift)

bool crumbs_ring_add_utf8(const crumbs_ring *ring, uint8_t level, uint8_t type, uint8_t flags,
                          const char *message, size_t message_length, const crumbs_utf8_attribute *attributes,
                          size_t attribute_count) {
  if (ring == NULL) return false;
  crumbs_slot_writer writer;
  if (!crumbs_ring_begin(ring, level, type, flags, &writer)) return false;
  if (message == NULL) message_length = 0;
  // The usual case in one pass: everything fits as it is (no key or value over 255 bytes, room
  // for all). The first pair that does not fit sends the slot, still ours, back to the start of
  // the cutting path below.
  const crumbs_slot_writer fresh = writer;
  if (attribute_count <= CRUMBS_MAX_ATTRIBUTES &&
      message_length <= writer.capacity - CRUMBS_SLOT_MESSAGE_OFFSET) {
    crumbs_slot_put_whole_message(&writer, message, (uint32_t)message_length);
    size_t index = 0;
    for (; index < attribute_count; index++) {
      const crumbs_utf8_attribute *attribute = &attributes[index];
      // Both lengths loaded, then zeroed for a NULL: selects, not branches.
      size_t key_length = attribute->key_length, value_length = attribute->value_length;
      if (attribute->key == NULL) key_length = 0;
      if (attribute->value == NULL) value_length = 0;
      if ((key_length | value_length) > 255 ||
          2 + key_length + value_length > writer.capacity - writer.used) {
        break;
      }
      crumbs_slot_put_whole_attribute(&writer, attribute->key, (uint32_t)key_length, attribute->value,
                                      (uint32_t)value_length);
    }
    if (__builtin_expect(index == attribute_count, 1)) {
      crumbs_ring_commit(&writer);
      return true;
    }
    writer = fresh;
  }
  // Something must be cut: the message leaves the attributes up to half the payload, and each
  // pair is cut or dropped where it does not fit (and flagged).
  // At most CRUMBS_MAX_ATTRIBUTES + 1 are looked at: one more than fits, so it is flagged.
  size_t used = attribute_count <= CRUMBS_MAX_ATTRIBUTES ? attribute_count : CRUMBS_MAX_ATTRIBUTES + 1;
  size_t attribute_bytes = 0;
  for (size_t index = 0; index < used; index++) {
    attribute_bytes += 2 + (attributes[index].key != NULL ? attributes[index].key_length : 0) +
                       (attributes[index].value != NULL ? attributes[index].value_length : 0);
  }
  crumbs_slot_put_message(&writer, message, message_length, attribute_bytes);
  for (size_t index = 0; index < used; index++) {
    const crumbs_utf8_attribute *attribute = &attributes[index];
    crumbs_slot_put_attribute(&writer, attribute->key, attribute->key != NULL ? attribute->key_length : 0,
                              attribute->value, attribute->value != NULL ? attribute->value_length : 0);
  }
  crumbs_ring_commit(&writer);
  return true;
}

bool crumbs_add_breadcrumb_utf8(uint8_t level, uint8_t type, const char *message, size_t message_length,
                                const crumbs_utf8_attribute *attributes, size_t attribute_count) {
  return crumbs_ring_add_utf8(crumbs_installed_ring(), level, type, 0, message, message_length, attributes,
                              attribute_count);
}

bool crumbs_ring_add(const crumbs_ring *ring, uint8_t level, uint8_t type, uint8_t flags, const char *message,
                     const crumbs_attribute *attributes, size_t attribute_count) {
  if (ring == NULL) return false;
  // Each length once: at most CRUMBS_MAX_ATTRIBUTES + 1 are ever used.
  crumbs_utf8_attribute measured[CRUMBS_MAX_ATTRIBUTES + 1];
  size_t used = attribute_count <= CRUMBS_MAX_ATTRIBUTES ? attribute_count : CRUMBS_MAX_ATTRIBUTES + 1;
  for (size_t index = 0; index < used; index++) {
    measured[index].key = attributes[index].key;
    measured[index].key_length = crumbs__format_length(attributes[index].key);
    measured[index].value = attributes[index].value;
    measured[index].value_length = crumbs__format_length(attributes[index].value);
  }
  return crumbs_ring_add_utf8(ring, level, type, flags, message, crumbs__format_length(message), measured,
                              used);
}

bool crumbs_add_breadcrumb(uint8_t level, uint8_t type, const char *message,
                           const crumbs_attribute *attributes, size_t attribute_count) {
  return crumbs_ring_add(crumbs_installed_ring(), level, type, 0, message, attributes, attribute_count);
}

// MARK: - Reading and state

uint64_t crumbs_ring_read_slot(const crumbs_ring *ring, uint32_t slot_index, void *out) {
  const unsigned char *slot = ring->slots + (size_t)slot_index * ring->slot_size;
  const crumbs_slot_header *header = (const crumbs_slot_header *)slot;
  uint64_t before = __atomic_load_n(&header->commit, __ATOMIC_ACQUIRE);
  if (!CRUMBS_COMMIT_IS_DONE(before)) return before;
  // Word-wise relaxed loads: the copy races with writers by design and the commit re-check
  // below rejects a copy that overlapped a write.
  const uint64_t *source = (const uint64_t *)slot;
  uint64_t *destination = (uint64_t *)out;
  for (uint32_t index = 0; index < ring->slot_size / 8; index++) {
    destination[index] = __atomic_load_n(&source[index], __ATOMIC_RELAXED);
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  uint64_t after = __atomic_load_n(&header->commit, __ATOMIC_RELAXED);
  return before == after ? before : 1; // 1: odd, "being written"
}

void crumbs_ring_set_state(const crumbs_ring *ring, uint32_t state) {
  crumbs_ring_refresh_anchor_now(ring);
  __atomic_store_n(&ring->header->state, state, __ATOMIC_RELEASE);
}

uint32_t crumbs_ring_get_state(const crumbs_ring *ring) {
  return __atomic_load_n(&ring->header->state, __ATOMIC_ACQUIRE);
}

bool crumbs_ring_mark_terminated_by_signal(const crumbs_ring *ring, int signo) {
  if (crumbs_ring_get_state(ring) != CRUMBS_RING_RUNNING) return false;
  __atomic_store_n(&ring->header->end_signal, (uint32_t)signo, __ATOMIC_RELEASE);
  crumbs_ring_set_state(ring, CRUMBS_RING_TERMINATED_BY_SIGNAL);
  return true;
}

void crumbs_ring_set_session_flags(const crumbs_ring *ring, uint32_t flags) {
  __atomic_fetch_or(&ring->header->session_flags, flags, __ATOMIC_RELEASE);
}

void crumbs_ring_set_filter(const crumbs_ring *ring, uint8_t min_level, uint32_t enabled_types) {
  __atomic_store_n(&ring->header->min_level, min_level, __ATOMIC_RELAXED);
  __atomic_store_n(&ring->header->enabled_types, enabled_types, __ATOMIC_RELAXED);
}
