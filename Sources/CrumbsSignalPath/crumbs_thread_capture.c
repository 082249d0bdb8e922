// crumbs_thread_capture.c — every thread of the process at crash time: tid, name, registers
// and a bounded stack each, captured in-process by the crashing thread's handler.
//
// Why C: it runs inside the crash handler (and inside a signal handler on every other thread),
// where the process may be corrupt and the Swift runtime must not run.
//
// How (the Swift runtime's Linux backtracer suspends threads with a signal the same way; no
// ptrace, no helper process):
//   crumbs__thread_capture_install   (install, not signal-safe) takes the capture signal: the
//                                    highest real-time signal whose action is SIG_DFL, scanning
//                                    down from SIGRTMAX (glibc keeps 32 and 33 below SIGRTMIN for
//                                    itself); a signal another library handles is left alone.
//   crumbs__thread_capture_request   (crashing thread) lists /proc/self/task once (open +
//                                    getdents64; the /proc readers are crumbs_proc_threads.c's),
//                                    gives each other tid a slot (at most
//                                    CRUMBS_CRASH_MAX_THREADS - 1; the rest only counted), reads
//                                    each one's /proc/self/task/<tid>/status (State, SigBlk, line
//                                    by line, however long the lines before them; a zombie, such
//                                    as a main thread that called pthread_exit, has exited and is
//                                    not listed) and
//                                    sends it, with tgkill, the capture signal, or SIGPROF when it
//                                    blocks the capture signal, or nothing: a stopped thread, or
//                                    one blocking both, is "did not answer" at once, without
//                                    making the handler wait. Threads created after the listing
//                                    are not asked: one pass, bounded.
//                                    Why SIGPROF: Dispatch's worker threads (and so Swift
//                                    concurrency's, on Linux) block every signal but the
//                                    synchronous ones, SIGPIPE and SIGPROF; the Swift runtime's
//                                    backtracer suspends threads with SIGPROF for that reason. It
//                                    is taken only at crash time, only when nobody handles it
//                                    (SIG_DFL or SIG_IGN: no profiler running), and kept to the
//                                    end: a SIGPROF still pending for a thread that did not run in
//                                    time would otherwise kill the process with SIG_DFL before the
//                                    chained handlers finish.
//   crumbs__capture_signal_handler   (every other thread) copies its signal context's registers
//                                    (or, for a thread that crashed too and is waiting in the crash
//                                    handler, the context of its own fault), its name (PR_GET_NAME)
//                                    and registered stack bounds into its slot, announces itself
//                                    (compare-exchange ASKED → ANSWERED, atomic counter + futex
//                                    wake), then parks on a futex until released (bounded too) —
//                                    or, when the crash handler said the process will die
//                                    (the request's `process_ends`: nothing chained after it,
//                                    and the kernel, not another library, called it), ends at once (SYS_exit): a thread parked and released
//                                    would be woken a second time only to be killed, and every
//                                    thread the kernel must wake at the death adds to it —
//                                    unless the death is watched: a core dump will be written
//                                    (RLIMIT_CORE above 0, or a `|` core_pattern, and the process
//                                    dumpable) or a tracer is attached (TracerPid). Then the
//                                    threads stay parked, not released, until the fatal signal
//                                    takes the process, so the core or the debugger sees them all
//                                    where they were asked (CRUMBS_THREADS_KEPT_FOR_DUMP).
//   crumbs__thread_capture_collect   (crashing thread, after its own backtrace) waits for the
//                                    answers until CRUMBS__CAPTURE_DEADLINE_NS after the request
//                                    (CLOCK_MONOTONIC, FUTEX_WAIT timeouts); a slot still ASKED
//                                    then becomes LATE (compare-exchange: exactly one side wins),
//                                    listed as "did not answer" (signal blocked, stopped, traced,
//                                    not scheduled in time) with its name from
//                                    /proc/self/task/<tid>/comm. Reads /proc/thread-self/maps once for
//                                    the stacks of threads without registered bounds, walks each
//                                    parked thread's stack (crumbs__thread_unwind), then releases
//                                    them all before the crash handler chains to the previous
//                                    handler: a backtracer chained after us sees running threads.
//   crumbs__thread_capture_release   wakes the parked threads (also on a crash inside the
//                                    handler: crumbs__nested_crash).
//
// ASYNC-SIGNAL-SAFE: everything here except crumbs__thread_capture_install/uninstall. No
// malloc, no locks, no stdio; static buffers, used only by the crashing thread (first crash
// wins) or, per slot, by the one thread the slot names. libc calls:
// syscall(SYS_gettid, SYS_tgkill, SYS_futex, SYS_exit), getpid, prctl(PR_GET_NAME), sigaction
// (queries; and SIGPROF's action, taken at crash time when nobody handles it), sigemptyset,
// memset; through crumbs_proc_threads.c open, read, close, syscall(SYS_getdents64), memcmp,
// memcpy, getrlimit, prctl(PR_GET_DUMPABLE); clock_gettime (crumbs_context.c), and the unwinder's
// (crumbs_unwind.c). Each is bound at install (crumbs_crash_install.c,
// crumbs__thread_capture_install).

#define _GNU_SOURCE
#include "crumbs_crash_internal.h"
#include "crumbs_format.h"

#include <errno.h>
#if __has_include(<linux/futex.h>)
#include <linux/futex.h>
#else
// musl-gcc's include path has no kernel headers: the futex ABI's values (linux/futex.h).
#define FUTEX_WAIT_PRIVATE (0 | 128)
#define FUTEX_WAKE_PRIVATE (1 | 128)
#endif
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/// How long the crashing thread waits for answers, from its first request: long enough for 100
/// threads on a busy 2-core machine (they answer within a few ms), short enough that a thread
/// that is asked but not scheduled in time costs the handler at most this. (A thread that
/// cannot answer, blocking both signals or stopped, is known from its status and not waited
/// for.)
#define CRUMBS__CAPTURE_DEADLINE_NS (50u * 1000000u)
/// How long a parked thread waits to be released before it goes back on its own (the crashing
/// thread hung or was stopped): the process is ending; this only keeps "never a hang" true.
#define CRUMBS__CAPTURE_PARK_LIMIT_NS (10ull * 1000000000u)
#define CRUMBS__CAPTURE_SLOTS CRUMBS_CRASH_MAX_THREADS

/// `crumbs__capture_slot.state`.
enum {
  CRUMBS__SLOT_ASKED = 1,    // the signal is (about to be) sent
  CRUMBS__SLOT_ANSWERED = 2, // the thread filled the slot and is parked
  CRUMBS__SLOT_LATE = 3,     // no answer: it cannot (blocked, stopped), or the deadline passed
                             // first (then it returns at once if it comes)
  CRUMBS__SLOT_GONE = 4,     // exited since the listing (no status, or tgkill ESRCH): not listed
  CRUMBS__SLOT_NOT_ASKED = 5 // no signal could ask it (both someone else's), or tgkill failed
};

/// One other thread, while captured. Entry `index` of the record's table is slot `index`
/// (slot 0, the crashing thread, is never asked).
typedef struct crumbs__capture_slot {
  uint32_t tid;
  uint32_t state;         // atomic
  int32_t asked_with;     // the signal sent (0: none)
  int32_t also_crashed;   // the signal of a thread that crashed too, else 0
  uint32_t register_count;
  crumbs__context_registers context;
  crumbs__unwind_registers unwind; // every register the CFI unwinder may start from
  uint64_t stack_low, stack_high; // registered bounds (crumbs__crash_this_thread), or 0
  uint64_t registers[CRUMBS_CRASH_THREAD_MAX_REGISTERS];
  char name[16];
} crumbs__capture_slot;

static crumbs__capture_slot crumbs__slots[CRUMBS__CAPTURE_SLOTS];
static uint32_t crumbs__slot_count;  // slots in use (written before any signal is sent)
static uint32_t crumbs__asked;       // signals sent
static uint32_t crumbs__answered;    // futex word: threads that answered
static uint32_t crumbs__released;    // futex word: 1 once parked threads may go
static uint32_t crumbs__capturing;   // 1 from the first request to the release
static uint32_t crumbs__ending;      // 1: answering threads end instead of parking
static uint32_t crumbs__holding;     // 1: parked threads stay parked to the end (a core, a tracer)
static uint64_t crumbs__requested_ns;
static int crumbs__capture_signal;   // 0: none installed
static struct sigaction crumbs__capture_previous;
static int crumbs__sigprof_state;    // crashing thread: 0 not looked at, 1 ours, -1 someone's
static uint32_t crumbs__skip_mask_check; // tests only: ask threads whatever they block
// How long the asked threads have to answer: CRUMBS__CAPTURE_DEADLINE_NS, or what a test set
// (crumbs_crash_testing_capture_deadline_ms) so that threads a busy machine schedules late
// still answer before it.
static uint64_t crumbs__capture_deadline_ns = CRUMBS__CAPTURE_DEADLINE_NS;

static void crumbs__thread_capture_finish(crumbs_crash_record *record);

// MARK: - Small signal-safe helpers

static long crumbs__futex(uint32_t *word, int operation, uint32_t value, uint64_t timeout_ns) {
  struct timespec timeout = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
  return syscall(SYS_futex, word, operation, value, timeout_ns != 0 ? &timeout : NULL, NULL, 0);
}

static bool crumbs__handles(int signal_number) {
  struct sigaction current;
  if (signal_number == 0 || sigaction(signal_number, NULL, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == crumbs__capture_signal_handler;
}

static bool crumbs__capture_signal_is_ours(void) { return crumbs__handles(crumbs__capture_signal); }

/// Installs the capture handler for `signal_number` (SA_SIGINFO | SA_ONSTACK | SA_RESTART: a
/// thread interrupted in a system call resumes it once released).
static bool crumbs__take(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__capture_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  return sigaction(signal_number, &action, NULL) == 0;
}

/// Whether SIGPROF can ask threads: ours already, or taken now when nobody handles it.
static bool crumbs__sigprof_usable(void) {
  if (crumbs__sigprof_state != 0) return crumbs__sigprof_state > 0;
  crumbs__sigprof_state = -1;
  struct sigaction current;
  if (sigaction(SIGPROF, NULL, &current) != 0) return false;
  bool ours = crumbs__handles(SIGPROF);
  bool nobody = !(current.sa_flags & SA_SIGINFO) &&
                (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN);
  if (!ours && nobody) ours = crumbs__take(SIGPROF);
  if (ours) crumbs__sigprof_state = 1;
  return ours;
}

/// The signal that can ask a thread blocking `blocked`: the capture signal, else SIGPROF, else 0.
static int crumbs__signal_for(uint64_t blocked, bool capture_usable) {
  if (capture_usable && !(blocked & (1ull << (crumbs__capture_signal - 1)))) return crumbs__capture_signal;
  if (!(blocked & (1ull << (SIGPROF - 1))) && crumbs__sigprof_usable()) return SIGPROF;
  return 0;
}

// MARK: - The other threads' side

void crumbs__capture_signal_handler(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  int saved_errno = errno;
  // Only the crashing thread's request parks a thread: a stray kill of this signal (or one
  // arriving after the capture) does nothing.
  if (!__atomic_load_n(&crumbs__capturing, __ATOMIC_ACQUIRE) || info == NULL ||
      info->si_code != SI_TKILL || info->si_pid != getpid()) {
    errno = saved_errno;
    return;
  }
  uint32_t tid = (uint32_t)syscall(SYS_gettid);
  uint32_t count = __atomic_load_n(&crumbs__slot_count, __ATOMIC_ACQUIRE);
  crumbs__capture_slot *slot = NULL;
  for (uint32_t index = 1; index < count; index++) {
    if (crumbs__slots[index].tid == tid) {
      slot = &crumbs__slots[index];
      break;
    }
  }
  if (slot == NULL || __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != CRUMBS__SLOT_ASKED) {
    errno = saved_errno;
    return;
  }
  // A thread that crashed too waits in the crash handler for the first one to end the process:
  // its own fault's context is the one worth showing.
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  const void *shown = context;
  if (thread->depth > 0 && thread->crash_context != NULL) {
    shown = thread->crash_context;
    slot->also_crashed = thread->original_signal;
  }
  slot->register_count = crumbs__context_copy_registers(shown, slot->registers,
                                                         CRUMBS_CRASH_THREAD_MAX_REGISTERS, &slot->context);
  crumbs__context_unwind_registers(shown, &slot->unwind);
  slot->stack_low = thread->stack_low;
  slot->stack_high = thread->stack_high;
  prctl(PR_GET_NAME, (unsigned long)slot->name, 0, 0, 0);
  slot->name[sizeof slot->name - 1] = '\0';

  uint32_t expected = CRUMBS__SLOT_ASKED;
  if (!__atomic_compare_exchange_n(&slot->state, &expected, CRUMBS__SLOT_ANSWERED, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    errno = saved_errno; // too late: the crashing thread listed us as not answering
    return;
  }
  __atomic_fetch_add(&crumbs__answered, 1, __ATOMIC_RELEASE);
  crumbs__futex(&crumbs__answered, FUTEX_WAKE_PRIVATE, 1, 0);

  // The process is sure to die (the request's `process_ends`): this thread ends
  // here rather than park, be woken again and then be killed. Its stack and the slot stay as
  // they are (the thread's memory is not unmapped and nothing unwinds), so the crashing thread
  // walks it all the same, and the kernel has one thread fewer to wake and end at the death.
  if (__atomic_load_n(&crumbs__ending, __ATOMIC_ACQUIRE) != 0) syscall(SYS_exit, 0);

  // Parked: the stack must not change while the crashing thread walks it.
  uint64_t parked = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  while (__atomic_load_n(&crumbs__released, __ATOMIC_ACQUIRE) == 0) {
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now - parked >= CRUMBS__CAPTURE_PARK_LIMIT_NS) break;
    crumbs__futex(&crumbs__released, FUTEX_WAIT_PRIVATE, 0, CRUMBS__CAPTURE_PARK_LIMIT_NS - (now - parked));
  }
  errno = saved_errno;
}

// MARK: - The crashing thread's side

/// crumbs__thread_capture_request's listing: each other thread gets a slot.
typedef struct crumbs__listing {
  crumbs_crash_thread_table *table;
  uint32_t own_tid;
  uint32_t count;
} crumbs__listing;

/// One tid of /proc/self/task into the slots (slot 0 stays the crashing thread).
static bool crumbs__list_thread(uint32_t tid, void *context) {
  crumbs__listing *listing = (crumbs__listing *)context;
  if (tid == listing->own_tid) return true;
  listing->table->threads_seen++;
  if (listing->count >= CRUMBS__CAPTURE_SLOTS) return true;
  crumbs__capture_slot *slot = &crumbs__slots[listing->count++];
  memset(slot, 0, sizeof *slot);
  slot->tid = tid;
  slot->state = CRUMBS__SLOT_ASKED;
  return true;
}

/// Lists /proc/self/task into the slots. Returns false when the directory cannot be read.
static bool crumbs__list_threads(crumbs_crash_thread_table *table, uint32_t own_tid) {
  crumbs__listing listing = {table, own_tid, 1};
  if (!crumbs__proc_each_thread(crumbs__list_thread, &listing)) return false;
  __atomic_store_n(&crumbs__slot_count, listing.count, __ATOMIC_RELEASE);
  return true;
}

void crumbs__thread_capture_request(crumbs_crash_record *record, uint32_t own_tid, bool process_ends) {
  crumbs_crash_thread_table *table = &record->threads;
  crumbs_crash_thread *own = &table->threads[0];
  own->tid = own_tid;
  own->state = CRUMBS_THREAD_CRASHING;
  table->threads_seen = 1;
  table->thread_count = 1;
  table->capture_signal = crumbs__capture_signal;
  table->deadline_ns = __atomic_load_n(&crumbs__capture_deadline_ns, __ATOMIC_RELAXED);
  crumbs__requested_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  crumbs__asked = 0;
  if (!crumbs__list_threads(table, own_tid)) {
    table->flags |= CRUMBS_THREADS_LISTING_FAILED;
    return;
  }
  bool ours = crumbs__capture_signal_is_ours();
  if (!ours && crumbs__capture_signal != 0) table->flags |= CRUMBS_THREADS_SIGNAL_TAKEN;
  // A process about to die whose death is watched keeps its threads for the core / debugger.
  bool hold = process_ends && crumbs__proc_death_is_watched();
  if (hold) process_ends = false;
  __atomic_store_n(&crumbs__holding, hold ? 1u : 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__ending, process_ends ? 1u : 0u, __ATOMIC_RELEASE);
  if (process_ends) table->flags |= CRUMBS_THREADS_ENDED;
  if (hold) table->flags |= CRUMBS_THREADS_KEPT_FOR_DUMP;
  __atomic_store_n(&crumbs__capturing, 1u, __ATOMIC_RELEASE);
  uint32_t count = crumbs__slot_count;
  int pid = getpid();
  for (uint32_t index = 1; index < count; index++) {
    crumbs__capture_slot *slot = &crumbs__slots[index];
    char state = '?';
    uint64_t blocked = 0;
    // A zombie is a thread that has exited: the main thread after pthread_exit stays listed,
    // as a zombie, until the whole process ends; a signal sent to it is never handled.
    if (!crumbs__proc_thread_status(slot->tid, &state, &blocked) || state == 'Z' || state == 'X' || state == 'x') {
      slot->state = CRUMBS__SLOT_GONE; // exited since the listing (or before it): not listed
      continue;
    }
    if (__atomic_load_n(&crumbs__skip_mask_check, __ATOMIC_RELAXED)) blocked = 0;
    int signal_number = crumbs__signal_for(blocked, ours);
    if (state == 'T' || state == 't') signal_number = 0; // stopped or traced: cannot run
    if (signal_number == 0) {
      // Blocked or stopped: no answer can come, so none is waited for. Not asked at all when
      // no signal could be used (the capture signal taken, SIGPROF someone's).
      bool could_ask = ours || crumbs__sigprof_state > 0;
      slot->state = could_ask ? CRUMBS__SLOT_LATE : CRUMBS__SLOT_NOT_ASKED;
      continue;
    }
    slot->asked_with = signal_number;
    if (signal_number == SIGPROF) table->flags |= CRUMBS_THREADS_USED_SIGPROF;
    if (syscall(SYS_tgkill, pid, slot->tid, signal_number) == 0) {
      crumbs__asked++;
    } else {
      // ESRCH: it exited since the listing (not listed); anything else: not asked.
      __atomic_store_n(&slot->state, errno == ESRCH ? CRUMBS__SLOT_GONE : CRUMBS__SLOT_NOT_ASKED,
                       __ATOMIC_RELEASE);
    }
  }
}

/// Waits for the asked threads until the deadline, then closes the slots still waiting.
static void crumbs__wait_for_answers(crumbs_crash_thread_table *table) {
  uint64_t deadline = crumbs__requested_ns + __atomic_load_n(&crumbs__capture_deadline_ns, __ATOMIC_RELAXED);
  while (true) {
    uint32_t answered = __atomic_load_n(&crumbs__answered, __ATOMIC_ACQUIRE);
    if (answered >= crumbs__asked) return;
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now >= deadline) break;
    crumbs__futex(&crumbs__answered, FUTEX_WAIT_PRIVATE, answered, deadline - now);
  }
  uint32_t count = crumbs__slot_count;
  for (uint32_t index = 1; index < count; index++) {
    uint32_t expected = CRUMBS__SLOT_ASKED;
    if (__atomic_compare_exchange_n(&crumbs__slots[index].state, &expected, CRUMBS__SLOT_LATE, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      table->flags |= CRUMBS_THREADS_DEADLINE_PASSED;
    }
  }
}

/// The stack to walk: the registered bounds when they hold the SP (or, after an overflow, the
/// FP), else found in /proc/thread-self/maps by crumbs__find_stacks.
typedef struct crumbs__stack_query {
  uint64_t low[CRUMBS__CAPTURE_SLOTS], high[CRUMBS__CAPTURE_SLOTS];
  uint32_t source[CRUMBS__CAPTURE_SLOTS];
} crumbs__stack_query;
static crumbs__stack_query crumbs__stacks;

/// One maps line against every answered thread still without bounds: the file is read once.
static bool crumbs__find_stacks(const char *line, size_t length, void *context) {
  (void)context;
  crumbs__maps_entry entry;
  if (!crumbs__crash_parse_maps_line(line, length, &entry) || entry.perms[0] != 'r') return true;
  uint32_t count = crumbs__slot_count;
  for (uint32_t index = 1; index < count; index++) {
    const crumbs__capture_slot *slot = &crumbs__slots[index];
    if (slot->state != CRUMBS__SLOT_ANSWERED || crumbs__stacks.source[index] != CRUMBS_STACK_UNKNOWN) continue;
    uint64_t probe = slot->context.sp != 0 ? slot->context.sp : slot->context.fp;
    if (probe >= entry.start && probe < entry.end) {
      crumbs__stacks.low[index] = entry.start;
      crumbs__stacks.high[index] = entry.end;
      crumbs__stacks.source[index] = CRUMBS_STACK_PROC_MAPS;
    }
  }
  return true;
}

static void crumbs__find_stack_bounds(void) {
  uint32_t count = crumbs__slot_count;
  bool need_maps = false;
  for (uint32_t index = 1; index < count; index++) {
    const crumbs__capture_slot *slot = &crumbs__slots[index];
    crumbs__stacks.source[index] = CRUMBS_STACK_UNKNOWN;
    if (slot->state != CRUMBS__SLOT_ANSWERED) continue;
    uint64_t sp = slot->context.sp, fp = slot->context.fp;
    if (slot->stack_high != 0 && ((sp >= slot->stack_low && sp < slot->stack_high) ||
                                  (fp >= slot->stack_low && fp < slot->stack_high))) {
      crumbs__stacks.low[index] = slot->stack_low;
      crumbs__stacks.high[index] = slot->stack_high;
      crumbs__stacks.source[index] = CRUMBS_STACK_REGISTERED;
    } else {
      need_maps = true;
    }
  }
  if (need_maps) crumbs__crash_each_maps_line(crumbs__find_stacks, NULL);
}

/// Another thread's backtrace from the registers its capture handler saved: the crashing
/// thread's unwinder (crumbs__crash_unwind: CFI, then frame records, then a checked stack scan,
/// each frame marked how it was found), so a thread stopped deep in glibc (pthread_cond_wait,
/// whose frame pointer register holds anything) still shows its callers. Safe to call from a
/// signal handler (crumbs_unwind.c says what it reads).
static uint32_t crumbs__thread_unwind(const crumbs_crash_record *record, const crumbs__unwind_registers *registers,
                                      uint64_t low, uint64_t high, uint64_t *frames, uint8_t *marks,
                                      uint32_t capacity, uint32_t *stop) {
  for (uint32_t index = 0; index < capacity; index++) marks[index] = 0;
  return crumbs__crash_unwind(record, registers, low, high, frames, marks, capacity, stop);
}

void crumbs__thread_capture_collect(crumbs_crash_record *record) {
  crumbs_crash_thread_table *table = &record->threads;
  crumbs_crash_thread *own = &table->threads[0];
  crumbs__format_copy(own->name, sizeof own->name, record->thread_name);
  own->stack_low = record->stack_low;
  own->stack_high = record->stack_high;
  own->stack_source = record->stack_source;
  if (crumbs__slot_count <= 1) {
    crumbs__thread_capture_finish(record);
    return;
  }
  crumbs__wait_for_answers(table);
  crumbs__find_stack_bounds();

  // A crash while walking (a stack changed under us) leaves this flag set: the entries after
  // thread_count were not written.
  table->flags |= CRUMBS_THREADS_INTERRUPTED;
  static uint64_t unknown[CRUMBS_CRASH_MAX_FRAMES];
  uint32_t unknown_count = 0;
  uint32_t count = crumbs__slot_count, written = 1;
  for (uint32_t index = 1; index < count; index++) {
    const crumbs__capture_slot *slot = &crumbs__slots[index];
    uint32_t state = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
    if (state == CRUMBS__SLOT_GONE) continue;
    crumbs_crash_thread *entry = &table->threads[written];
    entry->tid = slot->tid;
    entry->asked_with = slot->asked_with;
    if (state == CRUMBS__SLOT_ANSWERED) {
      entry->state = slot->also_crashed != 0 ? CRUMBS_THREAD_ALSO_CRASHED : CRUMBS_THREAD_CAPTURED;
      entry->signal_number = slot->also_crashed;
      crumbs__format_copy(entry->name, sizeof entry->name, slot->name);
      for (uint32_t r = 0; r < slot->register_count; r++) entry->registers[r] = slot->registers[r];
      entry->register_count = slot->register_count;
      entry->stack_low = crumbs__stacks.low[index];
      entry->stack_high = crumbs__stacks.high[index];
      entry->stack_source = crumbs__stacks.source[index];
      uint64_t low = entry->stack_source != CRUMBS_STACK_UNKNOWN ? entry->stack_low : 0;
      uint64_t high = entry->stack_source != CRUMBS_STACK_UNKNOWN ? entry->stack_high : 0;
      uint32_t stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
      entry->frame_count = crumbs__thread_unwind(record, &slot->unwind, low, high, entry->frames,
                                                 entry->frame_marks, CRUMBS_CRASH_THREAD_MAX_FRAMES, &stop);
      entry->backtrace_stop = stop;
      table->captured++;
      for (uint32_t frame = 0; frame < entry->frame_count && unknown_count < CRUMBS_CRASH_MAX_FRAMES; frame++) {
        // Return addresses point after the call: look up address - 1 (as for the crashing thread).
        uint64_t address = frame == 0 ? entry->frames[0] : entry->frames[frame] - 1;
        if (crumbs__crash_module_for_text(record, address) < 0) unknown[unknown_count++] = address;
      }
    } else {
      entry->state = state == CRUMBS__SLOT_LATE ? CRUMBS_THREAD_NO_ANSWER : CRUMBS_THREAD_NOT_ASKED;
      if (state == CRUMBS__SLOT_LATE) table->no_answer++;
      crumbs__proc_thread_name(slot->tid, entry->name);
    }
    table->thread_count = ++written;
  }
  table->flags &= ~(uint32_t)CRUMBS_THREADS_INTERRUPTED;
  crumbs__thread_capture_finish(record);
  // Frames in libraries loaded since the last module scan: found in /proc/self/maps, as for the
  // crashing thread's.
  if (unknown_count > 0) {
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_STALE, __ATOMIC_RELAXED);
    crumbs__crash_add_modules_at_crash(record, unknown, unknown_count);
  }
}

/// The capture's end: the parked threads are released, unless they are kept for a core dump or
/// a tracer (crumbs__holding; the fatal signal ends them, or the park limit).
static void crumbs__thread_capture_finish(crumbs_crash_record *record) {
  if (!__atomic_load_n(&crumbs__holding, __ATOMIC_ACQUIRE)) {
    crumbs__thread_capture_release(record);
    return;
  }
  if (record != NULL && crumbs__requested_ns != 0) {
    record->threads.capture_duration_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC) - crumbs__requested_ns;
  }
}

void crumbs__thread_capture_release(crumbs_crash_record *record) {
  if (__atomic_exchange_n(&crumbs__released, 1u, __ATOMIC_ACQ_REL) != 0) return;
  crumbs__futex(&crumbs__released, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  __atomic_store_n(&crumbs__capturing, 0u, __ATOMIC_RELEASE);
  if (record != NULL && crumbs__requested_ns != 0) {
    record->threads.capture_duration_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC) - crumbs__requested_ns;
  }
}

// MARK: - Install (not signal-safe)

void crumbs__thread_capture_install(void) {
  if (crumbs__capture_signal != 0 && crumbs__capture_signal_is_ours()) return;
  crumbs__capture_signal = 0;
  for (int candidate = SIGRTMAX; candidate >= SIGRTMIN; candidate--) {
    struct sigaction current;
    if (sigaction(candidate, NULL, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue; // someone's
    if (!crumbs__take(candidate)) continue;
    crumbs__capture_previous = current;
    crumbs__capture_signal = candidate;
    break;
  }
  // Bind the calls only the capture makes (futex; getdents64, getrlimit, prctl through
  // crumbs_proc_threads.c) now, not at crash time (open/read/close are bound already).
  uint32_t word = 1;
  crumbs__futex(&word, FUTEX_WAKE_PRIVATE, 1, 0);
  crumbs__proc_threads_resolve();
}

void crumbs__thread_capture_uninstall(void) {
  if (crumbs__capture_signal == 0) return;
  if (crumbs__capture_signal_is_ours()) sigaction(crumbs__capture_signal, &crumbs__capture_previous, NULL);
  crumbs__capture_signal = 0;
}

int crumbs__thread_capture_signal(void) { return crumbs__capture_signal; }

void crumbs__thread_capture_testing_deadline_ns(uint64_t deadline_ns) {
  __atomic_store_n(&crumbs__capture_deadline_ns, deadline_ns != 0 ? deadline_ns : CRUMBS__CAPTURE_DEADLINE_NS,
                   __ATOMIC_RELAXED);
}

void crumbs__thread_capture_testing_skip_mask_check(bool skip) {
  __atomic_store_n(&crumbs__skip_mask_check, skip ? 1u : 0u, __ATOMIC_RELEASE);
}
