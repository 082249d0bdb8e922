// arm64_driver_process.c — the aarch64 driver's process cases: the ring under several appending
// threads (its clock, lanes, and the torn and lapped slots a reader must reject), a stack
// overflow on a thread, every thread of a crashing process, a forked child's own record, and
// the alternate stacks' guards at the run-time page size (arm64_driver.c says how it runs).
#define _GNU_SOURCE
#include "arm64_driver.h"
#include "crumbs_live_capture.h"
#include "crumbs_stack_capture.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern volatile int driver_sink;

// MARK: - The ring

#define DRIVER_RING_THREADS 4
#define DRIVER_RING_APPENDS 3000

static void *driver_appender(void *argument) {
  uintptr_t number = (uintptr_t)argument;
  char message[64];
  for (int index = 0; index < DRIVER_RING_APPENDS; index++) {
    int length = snprintf(message, sizeof message, "thread %u append %d", (unsigned)number, index);
    if (crumbs_add_breadcrumb_utf8(CRUMBS_LEVEL_INFO, CRUMBS_TYPE_LOG, message, (size_t)length, NULL, 0)) {
      __atomic_fetch_add(&driver_shared[5], 1, __ATOMIC_RELAXED);
    }
  }
  return NULL;
}

/// Whether the slot at `index` holds lane position `position` whole: its commit says so and the
/// checksum (seeded with the position) verifies.
static bool driver_slot_whole(const crumbs_ring *ring, uint32_t index, uint64_t *position) {
  unsigned char copy[CRUMBS_SLOT_MAX_SIZE];
  uint64_t commit = crumbs_ring_read_slot(ring, index, copy);
  if (!CRUMBS_COMMIT_IS_DONE(commit)) return false;
  *position = CRUMBS_COMMIT_POSITION(commit);
  uint32_t checksum = 0;
  return crumbs_slot_checksum_v2(copy, ring->slot_size, *position, &checksum) &&
         checksum == ((const crumbs_slot_header *)copy)->checksum;
}

static void driver_ring(const char *name) {
  driver_case_files files = driver_install(name);
  const crumbs_ring *ring = files.ring;
  pthread_t threads[DRIVER_RING_THREADS];
  for (uintptr_t index = 0; index < DRIVER_RING_THREADS; index++) {
    if (pthread_create(&threads[index], NULL, driver_appender, (void *)index) != 0) _exit(92);
  }
  for (int index = 0; index < DRIVER_RING_THREADS; index++) pthread_join(threads[index], NULL);
  const crumbs_ring_header *header = ring->header;
  const crumbs_ring_lane *lanes =
      (const crumbs_ring_lane *)((const unsigned char *)header + CRUMBS_RING_HEADER_SIZE);
  uint64_t claimed = 0, skipped = 0, whole = 0, latest = 0, done = 0;
  for (uint32_t lane = 0; lane < header->lane_count; lane++) {
    claimed += lanes[lane].head;
    skipped += lanes[lane].skipped;
    for (uint32_t slot = 0; slot < lanes[lane].slot_count; slot++) {
      uint64_t position = 0;
      uint32_t index = lanes[lane].first_slot + slot;
      const crumbs_slot_header *written =
          (const crumbs_slot_header *)(ring->slots + (size_t)index * ring->slot_size);
      done += CRUMBS_COMMIT_IS_DONE(__atomic_load_n(&written->commit, __ATOMIC_ACQUIRE));
      if (!driver_slot_whole(ring, index, &position)) continue;
      whole++;
      // The slot a position maps to, and the last lap of its lane only.
      if (position % lanes[lane].slot_count == slot && position + lanes[lane].slot_count >= lanes[lane].head)
        latest++;
    }
  }
  // Tear one whole slot (a byte of its message) and lap another (its commit a lap back): the
  // reader's checks must reject both.
  uint32_t torn = UINT32_MAX, lapped = UINT32_MAX;
  bool torn_rejected = false, lapped_rejected = false;
  for (uint32_t index = 0; index < header->slot_count && (torn == UINT32_MAX || lapped == UINT32_MAX);
       index++) {
    uint64_t position = 0;
    if (!driver_slot_whole(ring, index, &position)) continue;
    crumbs_slot_header *slot = (crumbs_slot_header *)(ring->slots + (size_t)index * ring->slot_size);
    if (torn == UINT32_MAX) {
      torn = index;
      ((unsigned char *)slot)[CRUMBS_SLOT_MESSAGE_OFFSET] ^= 0x20;
      torn_rejected = !driver_slot_whole(ring, index, &position);
    } else if (position >= 64) {
      lapped = index;
      uint32_t lane_slots = lanes[0].slot_count;
      __atomic_store_n(&slot->commit, CRUMBS_COMMIT_DONE(position - lane_slots), __ATOMIC_RELEASE);
      lapped_rejected = !driver_slot_whole(ring, index, &position);
    }
  }
  uint64_t now = crumbs_clock_now_ticks(header->clock_kind);
  driver_shared[6] = header->clock_kind;
  // The counter runs forward from the header's creation anchor, every anchor since (refreshed
  // about once a second) is no older, and each slot's ticks lie between the two.
  crumbs_clock_anchor anchor = crumbs_ring_header_latest_anchor(header);
  bool slots_in_range = true;
  for (uint32_t index = 0; index < header->slot_count; index++) {
    const crumbs_slot_header *slot =
        (const crumbs_slot_header *)(ring->slots + (size_t)index * ring->slot_size);
    if (slot->commit == 0) continue;
    slots_in_range &= slot->ticks >= header->created.ticks && slot->ticks <= now;
  }
  driver_shared[7] = now > header->created.ticks && anchor.ticks >= header->created.ticks &&
                     anchor.wall_ns >= header->created.wall_ns && header->created.wall_ns != 0 &&
                     slots_in_range;
  driver_shared[8] = claimed;
  driver_shared[9] = skipped;
  driver_shared[10] = whole;
  driver_shared[11] = latest;
  driver_shared[12] = header->slot_count;
  driver_shared[21] = done;
  driver_shared[13] = (uint64_t)torn_rejected | (uint64_t)lapped_rejected << 1;
  driver_shared[14] = header->lane_count;
  _exit(0);
}

/// Appends from several threads, then reads the ring as a reader does.
void driver_case_ring(const char *name) {
  driver_shared[5] = 0;
  int status = driver_run_child(name, driver_ring);
  uint64_t appended = driver_shared[5], claimed = driver_shared[8], whole = driver_shared[10];
  bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                appended == DRIVER_RING_THREADS * DRIVER_RING_APPENDS &&
                driver_shared[6] == CRUMBS_CLOCK_CPU_COUNTER && driver_shared[7] == 1 &&
                claimed >= appended && claimed == appended + driver_shared[9] && whole > 0 &&
                whole == driver_shared[21] && driver_shared[11] + driver_shared[9] >= whole &&
                driver_shared[13] == 3;
  driver_report(name, passed,
                "%llu appends from %d threads into %llu slots in %llu lanes: %llu positions claimed, %llu "
                "skipped; %llu slots written, each whole, %llu of the last lap; clock CNTVCT_EL0 %s; torn "
                "slot %s, lapped "
                "slot %s (exit status %d)",
                (unsigned long long)appended, DRIVER_RING_THREADS, (unsigned long long)driver_shared[12],
                (unsigned long long)driver_shared[14], (unsigned long long)claimed,
                (unsigned long long)driver_shared[9], (unsigned long long)whole,
                (unsigned long long)driver_shared[11],
                driver_shared[7] ? "advances from the header's" : "WRONG",
                driver_shared[13] & 1 ? "rejected" : "ACCEPTED",
                driver_shared[13] & 2 ? "rejected" : "ACCEPTED",
                WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
}

// MARK: - Stack overflow on a thread

/// Recurses until the stack is gone (`driver_sink` is never negative: the compiler cannot tell).
__attribute__((noinline)) int driver_recurse(int depth) {
  volatile char block[1024];
  block[0] = (char)depth;
  if (driver_sink < 0) return block[0];
  return driver_recurse(depth + 1) + block[0];
}

static void *driver_overflowing_thread(void *unused) {
  (void)unused;
  driver_sink = driver_recurse(0);
  return NULL;
}

static void driver_stack_overflow(const char *name) {
  driver_install(name);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 256 * 1024);
  pthread_t thread;
  if (pthread_create(&thread, &attributes, driver_overflowing_thread, NULL) != 0) _exit(93);
  pthread_join(thread, NULL);
}

/// The thread's stack is used up: only the alternate stack it got at its start (our
/// pthread_create) lets the handler run.
void driver_case_stack_overflow(const char *name) {
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, driver_stack_overflow);
  const crumbs_crash_record *record = driver_read_record("stack-overflow.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, DRIVER_ANY_ADDRESS, why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  if (passed && !(record->flags & CRUMBS_CRASH_FLAG_ON_ALTERNATE_STACK)) {
    snprintf(why, sizeof why, "not on the alternate stack");
    passed = false;
  }
  if (passed &&
      (record->frame_count < 8 || strcmp(driver_symbol(record->frames[1]), "driver_recurse") != 0)) {
    snprintf(why, sizeof why, "frames[1] %s, %u frames", driver_symbol(record->frames[1]),
             record->frame_count);
    passed = false;
  }
  driver_report(name, passed, "%s, on the alternate stack%s%s", text, passed ? "" : ": ", why);
}

// MARK: - Every thread

#define DRIVER_BLOCKED 2
#define DRIVER_RUNNING 2

static int driver_pipe[2];

__attribute__((noinline)) void *driver_blocked_thread(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "blocked");
  __atomic_fetch_add(&driver_shared[15], 1, __ATOMIC_RELEASE);
  char byte;
  driver_sink = (int)read(driver_pipe[0], &byte, 1);
  return NULL;
}

__attribute__((noinline)) void *driver_running_thread(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "running");
  __atomic_fetch_add(&driver_shared[15], 1, __ATOMIC_RELEASE);
  for (;;) driver_sink++;
  return NULL;
}

static void driver_threads(const char *name) {
  driver_install(name);
  if (pipe(driver_pipe) != 0) _exit(94);
  pthread_t thread;
  for (int index = 0; index < DRIVER_BLOCKED; index++) {
    if (pthread_create(&thread, NULL, driver_blocked_thread, NULL) != 0) _exit(94);
  }
  for (int index = 0; index < DRIVER_RUNNING; index++) {
    if (pthread_create(&thread, NULL, driver_running_thread, NULL) != 0) _exit(94);
  }
  // Started, then a little longer so the blocked ones block (a bounded wait: 10 s).
  for (int tries = 0; tries < 10000 && __atomic_load_n(&driver_shared[15], __ATOMIC_ACQUIRE) < 4; tries++) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  struct timespec settle = {0, 100000000};
  nanosleep(&settle, NULL);
  volatile int *volatile pointer = NULL;
  *pointer = 1;
}

/// The main thread crashes while two threads block in read and two spin: all five listed, the
/// four others captured (registers and frames of their own, down to their start routine).
void driver_case_threads(const char *name) {
  driver_shared[15] = 0;
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, driver_threads);
  const crumbs_crash_record *record = driver_read_record("threads.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, 0, why, sizeof why);
  int found_blocked = 0, found_running = 0;
  if (passed) {
    const crumbs_crash_thread_table *table = &record->threads;
    snprintf(text, sizeof text, "%u threads seen, %u listed, %u captured", table->threads_seen,
             table->thread_count, table->captured);
    for (uint32_t index = 1; index < table->thread_count && index < CRUMBS_CRASH_MAX_THREADS; index++) {
      const crumbs_crash_thread *thread = &table->threads[index];
      if (thread->state != CRUMBS_THREAD_CAPTURED || thread->register_count != DRIVER_REGISTERS) continue;
      bool blocked = strcmp(thread->name, "blocked") == 0, running = strcmp(thread->name, "running") == 0;
      const char *start = blocked ? "driver_blocked_thread" : "driver_running_thread";
      bool reaches_start = false;
      for (uint32_t frame = 0; frame < thread->frame_count && frame < CRUMBS_CRASH_THREAD_MAX_FRAMES;
           frame++) {
        reaches_start |= strcmp(driver_symbol(thread->frames[frame]), start) == 0;
      }
      if (!reaches_start) continue;
      found_blocked += blocked;
      found_running += running;
    }
    // qemu-user's own thread (its RCU thread, which blocks every signal) is a thread of the
    // process too: listed, not answering; every thread of the program is captured.
    if (table->thread_count < 1 + DRIVER_BLOCKED + DRIVER_RUNNING ||
        table->captured != DRIVER_BLOCKED + DRIVER_RUNNING || found_blocked != DRIVER_BLOCKED ||
        found_running != DRIVER_RUNNING) {
      snprintf(why, sizeof why, "blocked threads unwound to their start: %d, running: %d", found_blocked,
               found_running);
      passed = false;
    }
  }
  driver_report(name, passed, "%s; blocked %d and running %d unwound to their start routines%s%s", text,
                found_blocked, found_running, passed ? "" : ": ", why);
}

// MARK: - Fork

static void driver_fork(const char *name) {
  driver_install(name);
  pid_t child = fork();
  if (child == 0) {
    volatile int *volatile pointer = NULL;
    *pointer = 1;
  }
  int status = 0;
  while (child > 0 && waitpid(child, &status, 0) < 0) {
  }
  driver_shared[16] = (uint64_t)child;
  driver_shared[17] = (uint64_t)status;
  driver_shared[18] = (uint64_t)getpid();
  _exit(0);
}

/// A process with the crash handler forks; the forked child crashes. Its record is its own
/// (`<its session>.crash`, its pid), and the parent's record stays ARMED.
void driver_case_fork(const char *name) {
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, driver_fork);
  pid_t grandchild = (pid_t)driver_shared[16];
  bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                driver_died_by((int)driver_shared[17], SIGSEGV, why, sizeof why);
  const crumbs_crash_record *parent = driver_read_record("fork.crash");
  if (passed &&
      (parent == NULL || parent->state != CRUMBS_CRASH_ARMED || parent->pid != (uint32_t)driver_shared[18])) {
    snprintf(why, sizeof why, "the parent's record is not its own, ARMED");
    passed = false;
  }
  const crumbs_crash_record *found = NULL;
  DIR *directory = opendir(driver_directory);
  struct dirent *entry;
  while (passed && directory != NULL && (entry = readdir(directory)) != NULL) {
    size_t length = strlen(entry->d_name);
    if (length < 7 || strcmp(entry->d_name + length - 6, ".crash") != 0) continue;
    const crumbs_crash_record *record = driver_read_record(entry->d_name);
    if (record != NULL && record->pid == (uint32_t)grandchild) found = record;
  }
  if (directory != NULL) closedir(directory);
  if (passed && found == NULL) {
    snprintf(why, sizeof why, "no record names the forked child %d", (int)grandchild);
    passed = false;
  }
  if (passed) passed = driver_check_record(found, SIGSEGV, 0, why, sizeof why);
  if (found != NULL) driver_describe_record(found, text, sizeof text);
  driver_report(name, passed, "forked child %d: its own record: %s%s%s", (int)grandchild, text,
                passed ? "" : ": ", why);
}

// MARK: - Page size

static void driver_page_size(const char *name) {
  driver_install(name);
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  bool aligned = true;
  for (unsigned index = 0; index < 4; index++) {
    uint64_t guard = (uint64_t)(uintptr_t)crumbs_crash_testing_altstack_guard(index);
    aligned &= guard != 0 && guard % page == 0;
  }
  driver_shared[19] = page;
  driver_shared[20] = aligned;
  driver_stack_overflow(name);
}

/// The alternate stacks' guards lie on page boundaries of the run-time page size (run under
/// `qemu-aarch64 -p 65536` too), and a stack overflow is still caught there.
void driver_case_page_size(const char *name) {
  driver_shared[19] = driver_shared[20] = 0;
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, driver_page_size);
  const crumbs_crash_record *record = driver_read_record("page-size.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, DRIVER_ANY_ADDRESS, why, sizeof why);
  if (passed && driver_shared[20] != 1) {
    snprintf(why, sizeof why, "an alternate stack's guard is not page aligned");
    passed = false;
  }
  if (passed && !(record->flags & CRUMBS_CRASH_FLAG_ON_ALTERNATE_STACK)) {
    snprintf(why, sizeof why, "not on the alternate stack");
    passed = false;
  }
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  driver_report(name, passed, "page size %llu: guards page aligned, overflow %s%s%s",
                (unsigned long long)driver_shared[19], text, passed ? "" : ": ", why);
}

// MARK: - Live capture and the calling thread's stack

static crumbs_crash_thread_table driver_live_table;

__attribute__((noinline)) uint32_t driver_current_stack(uint64_t *frames, uint32_t capacity) {
  uint32_t count = crumbs_capture_current_stack(frames, capacity);
  driver_sink++;
  return count;
}

void driver_live(const char *name) {
  driver_install(name);
  if (pipe(driver_pipe) != 0) _exit(95);
  pthread_t thread;
  for (int index = 0; index < DRIVER_BLOCKED; index++) {
    if (pthread_create(&thread, NULL, driver_blocked_thread, NULL) != 0) _exit(95);
  }
  for (int index = 0; index < DRIVER_RUNNING; index++) {
    if (pthread_create(&thread, NULL, driver_running_thread, NULL) != 0) _exit(95);
  }
  for (int tries = 0; tries < 10000 && __atomic_load_n(&driver_shared[15], __ATOMIC_ACQUIRE) < 4; tries++) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  struct timespec settle = {0, 100000000};
  nanosleep(&settle, NULL);
  crumbs_live_capture_options options;
  memset(&options, 0, sizeof options);
  options.answer_deadline_ns = 20000000000ull; // an emulated thread answers slowly
  options.limit_ns = 60000000000ull;
  int result = crumbs_capture_threads_live(&driver_live_table, &options, NULL);
  int blocked = 0, running = 0, requesting = 0, blocked_walked = 0, blocked_unknown = 0;
  for (uint32_t index = 0; index < driver_live_table.thread_count && index < CRUMBS_CRASH_MAX_THREADS;
       index++) {
    const crumbs_crash_thread *entry = &driver_live_table.threads[index];
    bool reaches_blocked = false, reaches_running = false, reaches_main = false;
    for (uint32_t frame = 0; frame < entry->frame_count && frame < CRUMBS_CRASH_THREAD_MAX_FRAMES; frame++) {
      const char *symbol = driver_symbol(entry->frames[frame]);
      reaches_blocked |= strcmp(symbol, "driver_blocked_thread") == 0;
      reaches_running |= strcmp(symbol, "driver_running_thread") == 0;
      reaches_main |= strcmp(symbol, "main") == 0;
    }
    requesting += entry->state == CRUMBS_THREAD_REQUESTING && reaches_main;
    running += strcmp(entry->name, "running") == 0 && entry->state == CRUMBS_THREAD_CAPTURED &&
               entry->register_count == DRIVER_REGISTERS && reaches_running;
    // A thread blocked in read is walked where it blocks, never signalled, from the pc and sp
    // /proc/self/task/<tid>/syscall shows. qemu-user does not emulate that file: it shows the
    // emulator's own host pc, so those frames are checked only where it lies in a module here.
    bool blocked_entry = strcmp(entry->name, "blocked") == 0;
    blocked += blocked_entry && entry->state == CRUMBS_THREAD_CAPTURED &&
               (entry->not_signalled & CRUMBS_NOT_SIGNALLED_IN_SYSCALL);
    blocked_walked += blocked_entry && reaches_blocked;
    blocked_unknown += blocked_entry && entry->frame_count > 0 &&
                       strcmp(driver_symbol(entry->frames[0]), "?") == 0;
  }
  // The calling thread's own stack, by frame records (non-fatal reports): stripped, in order.
  uint64_t frames[16];
  uint32_t count = driver_current_stack(frames, 16);
  bool current = count >= 3 && strcmp(driver_symbol(frames[0]), "driver_current_stack") == 0 &&
                 strcmp(driver_symbol(frames[1]), "driver_live") == 0 &&
                 strcmp(driver_symbol(frames[2]), "driver_run_child") == 0;
  driver_shared[24] = (uint64_t)result;
  driver_shared[25] = (uint64_t)requesting;
  driver_shared[26] = (uint64_t)running;
  driver_shared[27] = (uint64_t)blocked;
  driver_shared[28] = (uint64_t)blocked_walked;
  driver_shared[29] = current;
  driver_shared[30] = driver_live_table.thread_count;
  driver_shared[31] = (uint64_t)blocked_unknown;
  _exit(0);
}

/// A live capture (hang reports, thread dumps) while two threads block in read and two spin:
/// the process runs on; the calling thread's own frames reach main, the spinning threads are
/// captured with registers and unwound to their start. Then the calling thread's stack as a
/// non-fatal report takes it (crumbs_capture_current_stack: frame records, stripped).
void driver_case_live_capture(const char *name) {
  driver_shared[15] = 0;
  int status = driver_run_child(name, driver_live);
  bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                driver_shared[24] == CRUMBS_LIVE_CAPTURE_OK && driver_shared[25] == 1 &&
                driver_shared[26] == DRIVER_RUNNING && driver_shared[27] == DRIVER_BLOCKED &&
                driver_shared[28] + driver_shared[31] == DRIVER_BLOCKED && driver_shared[29] == 1;
  driver_report(
      name, passed,
      "result %llu, %llu threads listed: requesting thread to main %llu, running captured and unwound "
      "%llu, blocked walked where they block %llu (to their start %llu, from the emulator's host pc "
      "%llu); current stack %s (exit status %d)",
      (unsigned long long)driver_shared[24], (unsigned long long)driver_shared[30],
      (unsigned long long)driver_shared[25], (unsigned long long)driver_shared[26],
      (unsigned long long)driver_shared[27], (unsigned long long)driver_shared[28],
      (unsigned long long)driver_shared[31], driver_shared[29] ? "in order" : "WRONG",
      WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
}
