// crumbs_fork.c — the table of open rings, and what a forked child does with them (entry
// points: crumbs_fork.h; design: docs/crash-capture.md#fork).
//
// ASYNC-SIGNAL-SAFE: crumbs__fork_child and everything it calls, because it runs in a forked
// child of a possibly multithreaded process. libc calls: getpid, getrandom, open, flock,
// ftruncate, fallocate, mmap, mremap, munmap, close, unlink, clock_gettime (crumbs_context.c); read of
// /proc/self/stat (crumbs_process.c); crumbs_file_publish (crumbs_file.c: renameat2, link,
// unlink); crumbs_ring_format and crumbs_ring_retire (crumbs_ring.c)
// and crumbs_crash_record_format (crumbs_crash_install.c), which make only those calls. The
// errno of the forking code is kept. The thread capture's state is reset first (atomic stores,
// crumbs__thread_capture_forked): a live capture another thread of the parent was running is
// not in the child.
// ASYNC-SIGNAL-SAFE too: crumbs__fork_parent, the parent's fork handler, which runs wherever
// fork() was called, a signal handler included: one atomic add, and on every
// CRUMBS_FORK_REAP_INTERVAL-th fork a futex wake (syscall). crumbs_fork_count reads the count.
// Not signal-safe (set-up): crumbs_fork_track (pthread_atfork, sysconf, once), and
// crumbs_fork_untrack, crumbs_ring_file_init (lock-free, but meant for ordinary threads);
// crumbs_fork_wait (a futex wait, for the reaper's own thread).

#define _GNU_SOURCE
#include "crash/crumbs_crash.h"
#include "threads/crumbs_threads.h"
#include "crumbs_file.h"
#include "kit/crumbs_format.h"
#include "crumbs_fork.h"
#include "crumbs_process.h"
#include "crumbs_ring.h"
#include "threads/crumbs_thread_capture.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

// The table: a slot holds a tracked file or NULL. Each slot is one atomic word, so a child forked
// while another thread tracks or untracks sees every slot either before or after the change.
static crumbs_ring_file *crumbs__fork_files[CRUMBS_FORK_MAX_RINGS];
static int crumbs__fork_handler_registered; // atomic
// sysconf(_SC_CLK_TCK), read at set-up: the child converts its start time to nanoseconds.
static uint64_t crumbs__fork_ticks_per_second = 100;

// Forks this process made with the handlers run (atomic, wraps; a futex word): the reaper's
// thread waits on it. Reset to 0 in a child: its own forks are counted from there.
static uint32_t crumbs__fork_parent_count;

static void crumbs__fork_child(void);
static void crumbs__fork_parent(void);

// MARK: - The table (set-up)

void crumbs_ring_file_init(crumbs_ring_file *file, const crumbs_ring *ring, uint64_t mapped_size,
                           int32_t descriptor, const char *path) {
  file->ring = ring;
  file->mapped_size = mapped_size;
  file->descriptor = descriptor;
  file->reserved = 0;
  if (crumbs__format_length(path) < sizeof file->path) {
    crumbs__format_copy(file->path, sizeof file->path, path);
  } else {
    file->path[0] = '\0';
  }
}

bool crumbs_fork_track(crumbs_ring_file *file) {
  if (__atomic_exchange_n(&crumbs__fork_handler_registered, 1, __ATOMIC_ACQ_REL) == 0) {
    long ticks = sysconf(_SC_CLK_TCK);
    if (ticks > 0) crumbs__fork_ticks_per_second = (uint64_t)ticks;
    pthread_atfork(NULL, crumbs__fork_parent, crumbs__fork_child);
  }
  for (uint32_t index = 0; index < CRUMBS_FORK_MAX_RINGS; index++) {
    crumbs_ring_file *expected = NULL;
    if (__atomic_compare_exchange_n(&crumbs__fork_files[index], &expected, file, false, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED)) {
      return true;
    }
  }
  return false;
}

void crumbs_fork_untrack(crumbs_ring_file *file) {
  for (uint32_t index = 0; index < CRUMBS_FORK_MAX_RINGS; index++) {
    crumbs_ring_file *expected = file;
    if (__atomic_compare_exchange_n(&crumbs__fork_files[index], &expected, NULL, false, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED)) {
      return;
    }
  }
}

// MARK: - In the parent (async-signal-safe)

/// Counts the fork and, every CRUMBS_FORK_REAP_INTERVAL-th, wakes the thread that reaps what
/// ended children left (ForkedSessionReaper). Nothing else: fork() may have been called from a
/// signal handler, which may have interrupted a thread holding any lock and any allocator.
static void crumbs__fork_parent(void) {
  int saved_errno = errno;
  uint32_t count = __atomic_add_fetch(&crumbs__fork_parent_count, 1, __ATOMIC_RELEASE);
  if (count % CRUMBS_FORK_REAP_INTERVAL == 0) {
    crumbs__capture_futex(&crumbs__fork_parent_count, FUTEX_WAKE_PRIVATE, INT32_MAX, 0);
  }
  errno = saved_errno;
}

uint32_t crumbs_fork_count(void) { return __atomic_load_n(&crumbs__fork_parent_count, __ATOMIC_ACQUIRE); }

void crumbs_fork_wait(uint32_t seen) {
  crumbs__capture_futex(&crumbs__fork_parent_count, FUTEX_WAIT_PRIVATE, seen, 0);
}

// MARK: - In the child (async-signal-safe)

/// A new session id: 16 random bytes as a version-4 UUID. Without getrandom (an old kernel, an
/// empty entropy pool at boot) it is mixed from the time, the pid and the parent's session:
/// unique enough for a file name, which O_EXCL checks anyway.
static void crumbs__fork_new_session(uint8_t session[16], const uint8_t parent[16], uint32_t pid) {
  if (getrandom(session, 16, GRND_NONBLOCK) != 16) {
    uint64_t state = crumbs__context_clock_ns(CLOCK_REALTIME) + pid;
    for (int index = 0; index < 16; index++) {
      // splitmix64, one byte per step, folded with the parent's session.
      state += 0x9E3779B97F4A7C15ULL;
      uint64_t mixed = state;
      mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ULL;
      mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBULL;
      session[index] = (uint8_t)((mixed ^ (mixed >> 31)) ^ parent[index]);
    }
  }
  session[6] = (uint8_t)((session[6] & 0x0F) | 0x40); // version 4
  session[8] = (uint8_t)((session[8] & 0x3F) | 0x80); // RFC 4122 variant
}

/// `<directory of sibling>/<session><suffix>` into `path`. False when it does not fit.
static bool crumbs__fork_sibling_path(char *path, size_t capacity, const char *sibling,
                                      const uint8_t session[16], const char *suffix) {
  size_t slash = 0;
  bool found = false;
  for (size_t index = 0; sibling[index] != '\0'; index++) {
    if (sibling[index] == '/') {
      slash = index;
      found = true;
    }
  }
  if (!found || slash + 1 + 36 + crumbs__format_length(suffix) + 1 > capacity) return false;
  for (size_t index = 0; index <= slash; index++) path[index] = sibling[index];
  path[slash + 1] = '\0';
  size_t used = crumbs__format_append_uuid(path, capacity, slash + 1, session);
  crumbs__format_append(path, capacity, used, suffix);
  return true;
}

/// Creates `path` (0600, exclusively), optionally flock'ed, `size` bytes with its blocks
/// reserved when the file system can; mapped shared. Returns the descriptor and mapping, or -1
/// (nothing left behind).
static int crumbs__fork_create(const char *path, uint64_t size, bool lock, void **mapping) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  bool ok = (!lock || flock(fd, LOCK_EX | LOCK_NB) == 0) && ftruncate(fd, (off_t)size) == 0;
  // Without fallocate (EOPNOTSUPP) the file stays sparse, as BreadcrumbRing.create accepts.
  if (ok && fallocate(fd, 0, 0, (off_t)size) != 0 && errno != EOPNOTSUPP) ok = false;
  void *base = ok ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (base == MAP_FAILED) {
    close(fd);
    unlink(path);
    return -1;
  }
  *mapping = base;
  return fd;
}

/// Moves the fresh mapping `base` over `target` (same size). False (and `base` unmapped, the
/// file removed) when the kernel refuses.
static bool crumbs__fork_replace(void *base, void *target, uint64_t size, int fd, const char *path) {
  if (mremap(base, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, target) != MAP_FAILED) return true;
  munmap(base, size);
  close(fd);
  unlink(path);
  return false;
}

/// Step 1 of crumbs_fork.h for one ring. On success `session` holds the child's session.
static bool crumbs__fork_follow_ring(crumbs_ring_file *file, uint32_t pid, uint64_t start_ticks,
                                     uint8_t session[16]) {
  const crumbs_ring *ring = file->ring;
  crumbs_ring_header *inherited = ring->header;
  uint64_t size = file->mapped_size;
  if (file->path[0] == '\0' || size != inherited->file_size) return false;
  crumbs__fork_new_session(session, inherited->session_id, pid);
  // Made under `<session>.ring.creating` and given its name once complete and locked, as
  // BreadcrumbRing.create does: a process claiming leftover rings never sees it half made.
  char path[CRUMBS_RING_FILE_PATH_SIZE];
  char creating[CRUMBS_RING_FILE_PATH_SIZE];
  if (!crumbs__fork_sibling_path(path, sizeof path, file->path, session, ".ring")) return false;
  if (!crumbs__fork_sibling_path(creating, sizeof creating, file->path, session, ".ring.creating"))
    return false;
  void *base = NULL;
  int fd = crumbs__fork_create(creating, size, true, &base);
  if (fd < 0) return false;

  // The same geometry as the inherited ring, so every handle's masks and offsets stay right.
  const crumbs_ring_lane *lanes = ring->lanes;
  uint32_t general = inherited->general_lane_count;
  crumbs_ring_plan_result plan = {
      .slot_size = inherited->slot_size,
      .slot_count = inherited->slot_count,
      .general_lane_count = general,
      .important_lane_count = inherited->lane_count - general,
      .general_lane_slots = lanes[0].slot_count,
      .important_lane_slots = lanes[general].slot_count,
      .slots_offset = inherited->slots_offset,
      // The ledger's place too, empty: the parent's open operations are not the child's.
      .ledger_offset = inherited->ledger_offset,
      .ledger_entry_count = inherited->ledger_entry_count,
      .file_size = inherited->file_size,
  };
  crumbs_ring_identity identity = {
      .pid = pid,
      .app_name = inherited->app_name,
      .app_version = inherited->app_version,
      .environment_resource = inherited->environment_resource,
      .executable = inherited->executable,
      .cgroup = inherited->cgroup,
      .cgroup_oom_kills_at_start = inherited->cgroup_oom_kills_at_start,
      .writer_start_ticks = start_ticks,
      // fork() keeps the pid namespace (only clone(CLONE_NEWPID) makes a new one).
      .writer_pid_namespace = inherited->writer_pid_namespace,
      .parent_pid = inherited->pid,
  };
  __builtin_memcpy(identity.session_id, session, 16);
  __builtin_memcpy(identity.boot_id, inherited->boot_id, 16);
  __builtin_memcpy(identity.parent_session_id, inherited->session_id, 16);
  crumbs_ring_format(base, &plan, &identity, inherited->clock_kind == CRUMBS_CLOCK_CPU_COUNTER);
  crumbs_ring_header *fresh = (crumbs_ring_header *)base;
  fresh->min_level = __atomic_load_n(&inherited->min_level, __ATOMIC_RELAXED);
  fresh->enabled_types = __atomic_load_n(&inherited->enabled_types, __ATOMIC_RELAXED);

  if (crumbs_file_publish(creating, path) != 0) {
    munmap(base, size);
    close(fd);
    unlink(creating);
    return false;
  }
  if (!crumbs__fork_replace(base, inherited, size, fd, path)) return false;
  if (file->descriptor >= 0) close(file->descriptor); // the child's copy: the parent keeps its lock
  file->descriptor = fd;
  crumbs__format_copy(file->path, sizeof file->path, path);
  return true;
}

/// Step 3 for a ring: private memory in place of the parent's file, the descriptor closed.
static void crumbs__fork_detach_ring(crumbs_ring_file *file) {
  // On failure the shared mapping stays; the pid checks of the handler and exit hook remain.
  crumbs_ring_retire(file->ring, file->mapped_size);
  if (file->descriptor >= 0) close(file->descriptor);
  file->descriptor = -1;
}

/// Step 2 of crumbs_fork.h: the record beside `ring_file`, the followed file of the handler's
/// ring, whose session is `session`. The next launch finds a record through its ring, so a
/// handler whose ring was not followed (closed, or not tracked) gets no record in the child.
static bool crumbs__fork_follow_record(crumbs_crash_record *inherited, const crumbs_ring_file *ring_file,
                                       const uint8_t session[16], uint32_t pid, uint64_t start_ticks) {
  crumbs__crash_state *state = &crumbs__crash_installed;
  if (ring_file == NULL) return false;
  // `<stem>.ring` → `<stem>.crash`, the pair the next launch reads together.
  char path[CRUMBS_RING_FILE_PATH_SIZE];
  size_t length = crumbs__format_length(ring_file->path);
  if (length < 5 || length - 5 + 7 > sizeof path) return false;
  for (size_t index = 0; index < length - 5; index++) path[index] = ring_file->path[index];
  path[length - 5] = '\0';
  crumbs__format_append(path, sizeof path, length - 5, ".crash");
  uint64_t size = CRUMBS_CRASH_FILE_SIZE;
  void *base = NULL;
  int fd = crumbs__fork_create(path, size, false, &base);
  if (fd < 0) return false;
  crumbs_crash_record *fresh = (crumbs_crash_record *)base;
  // The child has the parent's modules: copy the table rather than scan (dl_iterate_phdr takes
  // the loader lock, which another thread of the parent may have held at the fork).
  uint32_t count = __atomic_load_n(&inherited->module_count, __ATOMIC_RELAXED);
  if (count > CRUMBS_CRASH_MAX_MODULES) count = CRUMBS_CRASH_MAX_MODULES;
  __builtin_memcpy(fresh->modules, inherited->modules, count * sizeof(crumbs_crash_module));
  fresh->module_count = count;
  fresh->module_adds = inherited->module_adds;
  if (__atomic_load_n(&inherited->module_generation, __ATOMIC_RELAXED) & 1u) {
    fresh->flags = CRUMBS_CRASH_FLAG_MODULES_TORN;
  }
  crumbs_crash_record_format(fresh, pid, session, inherited->boot_id,
                             start_ticks * (1000000000u / crumbs__fork_ticks_per_second));
  if (!crumbs__fork_replace(base, inherited, size, fd, path)) return false;
  close(fd); // the mapping keeps the file; nothing locks a record
  crumbs__format_copy(state->record_path, sizeof state->record_path, path);
  return true;
}

static void crumbs__fork_child(void) {
  int saved_errno = errno;
  crumbs__thread_capture_forked();
  __atomic_store_n(&crumbs__fork_parent_count, 0, __ATOMIC_RELAXED);
  uint32_t pid = (uint32_t)getpid();
  uint64_t start_ticks = 0;
  char process_state = 0;
  if (!crumbs_process_stat(0, &start_ticks, &process_state)) start_ticks = 0;

  crumbs__crash_state *handler = &crumbs__crash_installed;
  const crumbs_ring *handler_ring = __atomic_load_n(&handler->ring, __ATOMIC_ACQUIRE);
  const crumbs_ring_file *handler_file = NULL;
  uint8_t handler_session[16];
  for (uint32_t index = 0; index < CRUMBS_FORK_MAX_RINGS; index++) {
    crumbs_ring_file *file = __atomic_load_n(&crumbs__fork_files[index], __ATOMIC_ACQUIRE);
    if (file == NULL) continue;
    uint8_t session[16];
    if (crumbs__fork_follow_ring(file, pid, start_ticks, session)) {
      if (file->ring == handler_ring) {
        handler_file = file;
        __builtin_memcpy(handler_session, session, 16);
      }
    } else {
      crumbs__fork_detach_ring(file);
      // Detached for good: a grandchild has nothing of this ring to follow.
      __atomic_store_n(&crumbs__fork_files[index], NULL, __ATOMIC_RELEASE);
    }
  }

  crumbs_crash_record *record = __atomic_load_n(&handler->record, __ATOMIC_ACQUIRE);
  if (record != NULL &&
      !crumbs__fork_follow_record(record, handler_file, handler_session, pid, start_ticks)) {
    // The handler then records nothing in this child (its pid check would refuse the parent's
    // record anyway); the inherited mapping stays, unwritten.
    __atomic_store_n(&handler->record, NULL, __ATOMIC_RELEASE);
    handler->record_path[0] = '\0';
  }
  errno = saved_errno;
}
