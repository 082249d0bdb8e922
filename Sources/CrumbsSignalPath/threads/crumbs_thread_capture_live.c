// crumbs_thread_capture_live.c — every thread's stack while the process lives on: the crash
// handler's thread capture (crumbs_thread_capture.c's slots, signal handler, listing, walk),
// taken by an ordinary thread (a watchdog, a thread dump), each thread parked for as short a
// time as its own walk. Design (blocked threads, SIGPROF): docs/crash-capture.md#live-captures
//
// crumbs_capture_threads_live (crumbs_live_capture.h), in order: the caller's own entry; take
// the capture; walk the threads blocked in a system call where they block
// (crumbs__live_read_blocked), ask a window of the others at a time, walk and release each as it
// answers; give the capture back. Never ends a thread nor holds one for a core.
//
// NOT SIGNAL-SAFE as a whole (its first step allocates; it is never called from a signal
// handler). While threads are parked it calls only what the crash handler calls:
// syscall(SYS_gettid, SYS_futex, SYS_tgkill), getpid, prctl(PR_GET_NAME), sigaction,
// clock_gettime (crumbs_context.c), open/read/close and getdents64 (crumbs_proc_threads.c,
// crumbs_maps.c), memset, memmove, and the unwinder's (crumbs_unwind.c); and an armed test
// hook's (kit/crumbs_hooks.h). crumbs__capture_pending_somewhere is async-signal-safe
// (open/read/close of /proc status files).

#define _GNU_SOURCE
#include "crumbs_live_capture.h"
#include "kit/crumbs_hooks.h"
#include "crumbs_stack_capture.h"
#include "threads/crumbs_thread_capture.h"

#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CRUMBS__LIVE_WINDOW 4u
#define CRUMBS__LIVE_MIN_LIMIT_NS (250ull * 1000000u)

// MARK: - The capture

/// How one live capture runs (options with the defaults filled in).
typedef struct crumbs__live_run {
  const crumbs_crash_record *record;
  crumbs__module_table modules; // the record's, for the unwinder
  crumbs_crash_thread_table *table;
  crumbs_live_capture_stats *stats;
  uint64_t answer_deadline_ns;
  uint64_t stop_at; // CLOCK_MONOTONIC: nobody more is asked after it
  uint32_t window;
} crumbs__live_run;

/// Walks slot `index`'s parked thread into its entry, then lets it go at once.
static void crumbs__live_walk_and_release(crumbs__live_run *run, uint32_t index) {
  crumbs_crash_thread *entry = &run->table->threads[index];
  crumbs__capture_write_entry(&run->modules, index, entry, run->table);
  CRUMBS__HOOK0(live_parked); // tests only: a fault while a thread is parked
  uint64_t released = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  if (!crumbs__capture_release_slot(index)) return;
  uint64_t entered = crumbs__capture.slots[index].entered_ns;
  entry->paused_ns = released > entered ? released - entered : 0;
  run->stats->parked++;
  if (entry->paused_ns > run->stats->longest_pause_ns) {
    run->stats->longest_pause_ns = entry->paused_ns;
    run->stats->longest_pause_tid = entry->tid;
  }
}

/// Before any signal: every thread blocked in a system call is walked from where it blocks
/// (/proc/self/task/<tid>/syscall: the call, the user sp and pc), without a signal. Its user
/// stack cannot change while it stays in the kernel, and a reading before and after the walk
/// proves it stayed (crumbs__capture_walk_blocked). Such a slot becomes READ; one that left its call
/// meanwhile stays ASKED and is asked with a signal like a running thread. A blocked call is
/// never interrupted this way: a hang report must not change what the app's calls return.
static void crumbs__live_read_blocked(crumbs__live_run *run) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (CRUMBS__HOOK_ON(signal_blocked)) return; // tests only
  uint32_t count = capture->slot_count, candidates = 0;
  uint32_t asked =
      CRUMBS__SLOT_WORD(__atomic_load_n(&capture->generation, __ATOMIC_ACQUIRE), CRUMBS__SLOT_ASKED);
  for (uint32_t index = 1; index < count; index++) {
    crumbs__capture_slot *slot = &capture->slots[index];
    if (crumbs__context_clock_ns(CLOCK_MONOTONIC) >= run->stop_at) break;
    if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != asked) continue;
    crumbs__thread_facts facts;
    // The status first, then the call: a switch count read before the call line covers it.
    if (!crumbs__proc_thread_read(slot->tid, true, &facts)) continue;
    if (crumbs__capture_note_blocked(slot, &facts)) candidates++;
  }
  if (candidates == 0) return;
  crumbs__capture_find_stacks();
  uint32_t read_word = asked - CRUMBS__SLOT_ASKED + CRUMBS__SLOT_READ;
  for (uint32_t index = 1; index < count; index++) {
    crumbs__capture_slot *slot = &capture->slots[index];
    if (!slot->reading) continue;
    bool walked = crumbs__context_clock_ns(CLOCK_MONOTONIC) < run->stop_at &&
                  crumbs__capture_walk_blocked(&run->modules, index, &run->table->threads[index]);
    slot->reading = 0;
    uint32_t expected = asked;
    // An answer to a signal an earlier capture left pending wins: that thread ran, so the
    // walk was already refused; compare-exchange all the same.
    if (walked && __atomic_compare_exchange_n(&slot->state, &expected, read_word, false, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE)) {
      crumbs__proc_thread_name(slot->tid, run->table->threads[index].name);
      run->table->captured++;
      run->stats->read_blocked++;
      continue;
    }
    if (walked) memset(&run->table->threads[index], 0, sizeof run->table->threads[index]);
    // Asked with a signal like a running thread (or answering one an earlier capture left
    // pending): its stack is looked for again where it answers.
    capture->stack_source[index] = CRUMBS__STACK_NOT_LOOKED;
  }
}

/// Asks the threads a window at a time; walks and releases each as it answers.
static void crumbs__live_ask_all(crumbs__live_run *run) {
  crumbs__capture_state *capture = &crumbs__capture;
  bool ours = crumbs__capture_handles(capture->capture_signal);
  if (!ours && capture->capture_signal != 0) run->table->flags |= CRUMBS_THREADS_SIGNAL_TAKEN;
  uint32_t generation = __atomic_load_n(&capture->generation, __ATOMIC_ACQUIRE);
  uint32_t parked_word = CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_ANSWERED);
  uint32_t read_word = CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_READ);
  __atomic_store_n(&capture->capturing, 1u, __ATOMIC_RELEASE);
  crumbs__live_read_blocked(run);
  uint32_t count = capture->slot_count, next = 1;
  uint32_t waiting[CRUMBS__CAPTURE_SLOTS];
  uint32_t waiting_count = 0;
  while (true) {
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    while (waiting_count < run->window && next < count && now < run->stop_at) {
      uint32_t index = next++;
      if (__atomic_load_n(&capture->slots[index].state, __ATOMIC_ACQUIRE) == read_word) continue;
      if (crumbs__capture_ask(index, ours, run->table)) waiting[waiting_count++] = index;
    }
    if (waiting_count == 0) {
      if (next >= count || now >= run->stop_at) break;
      continue;
    }
    // Wait for an answer, at most until the earliest deadline among the waiting (a thread asked
    // while inside the handler is asked again once it has left: crumbs__capture_ask_again).
    uint32_t answered = __atomic_load_n(&capture->answered, __ATOMIC_ACQUIRE);
    uint32_t still = 0;
    for (uint32_t k = 0; k < waiting_count; k++) {
      if (crumbs__capture_ask_again(waiting[k], run->table)) waiting[still++] = waiting[k];
    }
    waiting_count = still;
    if (waiting_count == 0) continue;
    bool any = false;
    uint64_t earliest = run->stop_at;
    for (uint32_t k = 0; k < waiting_count; k++) {
      const crumbs__capture_slot *slot = &capture->slots[waiting[k]];
      if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) == parked_word) any = true;
      uint64_t due = slot->asked_ns + run->answer_deadline_ns;
      if (due < earliest) earliest = due;
    }
    if (!any && now < earliest) {
      crumbs__capture_futex(&capture->answered, FUTEX_WAIT_PRIVATE, answered, earliest - now);
      continue;
    }
    if (any) CRUMBS__HOOK(live_answered, run->record); // tests only: a crash meets it
    if (any) crumbs__capture_find_stacks();
    now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    uint32_t kept = 0;
    for (uint32_t k = 0; k < waiting_count; k++) {
      uint32_t index = waiting[k];
      const crumbs__capture_slot *slot = &capture->slots[index];
      bool parked = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) == parked_word;
      // An answer that came after the stacks were looked for waits for the next round.
      if (parked && capture->stack_source[index] != CRUMBS__STACK_NOT_LOOKED) {
        crumbs__live_walk_and_release(run, index);
      } else if (!parked && (now >= slot->asked_ns + run->answer_deadline_ns || now >= run->stop_at) &&
                 crumbs__capture_close(index)) {
        run->table->flags |= CRUMBS_THREADS_DEADLINE_PASSED;
        if (slot->asked_with != 0)
          crumbs__capture_owe(slot->tid, slot->asked_with); // 0: deferred, never sent
      } else {
        waiting[kept++] = index;
      }
    }
    waiting_count = kept;
  }
  // Past the limit: the threads never asked are listed as not answering; one that answered
  // anyway (a signal left from an earlier capture) is walked and let go.
  for (uint32_t index = next; index < count; index++) {
    if (crumbs__capture_close(index)) {
      run->table->flags |= CRUMBS_THREADS_DEADLINE_PASSED;
    } else if (__atomic_load_n(&capture->slots[index].state, __ATOMIC_ACQUIRE) == parked_word) {
      crumbs__capture_find_stacks();
      crumbs__live_walk_and_release(run, index);
    }
  }
  __atomic_store_n(&capture->capturing, 0u, __ATOMIC_RELEASE);
  // Every other entry (not answering, not asked), while the slots are still ours; a slot that
  // exited since the listing leaves its entry empty (state 0), dropped below.
  for (uint32_t index = 1; index < count; index++) {
    uint32_t state = CRUMBS__SLOT_STATE(__atomic_load_n(&capture->slots[index].state, __ATOMIC_ACQUIRE));
    if (state == CRUMBS__SLOT_RELEASED || state == CRUMBS__SLOT_READ) continue;
    crumbs_crash_thread *entry = &run->table->threads[index];
    if (!crumbs__capture_write_entry(&run->modules, index, entry, run->table))
      memset(entry, 0, sizeof *entry);
  }
}

/// The caller's own entry but its frames (crumbs_capture_threads_live walks them itself, so
/// that the walk starts from its own frame whatever the compiler inlines).
static void crumbs__live_own_entry(crumbs_crash_thread_table *out, uint32_t own_tid) {
  memset(out, 0, offsetof(crumbs_crash_thread_table, threads));
  crumbs_crash_thread *own = &out->threads[0];
  memset(own, 0, sizeof *own);
  own->tid = own_tid;
  own->state = CRUMBS_THREAD_REQUESTING;
  prctl(PR_GET_NAME, (unsigned long)own->name, 0, 0, 0);
  own->name[sizeof own->name - 1] = '\0';
  own->backtrace_stop = CRUMBS_BACKTRACE_END_OF_CHAIN;
  out->threads_seen = 1;
  out->thread_count = 1;
}

__attribute__((noinline)) int crumbs__thread_capture_live(const crumbs_crash_record *record,
                                                          crumbs_crash_thread_table *out,
                                                          const crumbs_live_capture_options *options,
                                                          crumbs_live_capture_stats *stats) {
  crumbs_live_capture_stats unused;
  if (stats == NULL) stats = &unused;
  memset(stats, 0, sizeof *stats);
  if (record == NULL || out == NULL) return CRUMBS_LIVE_CAPTURE_NOT_INSTALLED;
  uint32_t own_tid = (uint32_t)syscall(SYS_gettid);
  crumbs__live_own_entry(out, own_tid);
  crumbs_crash_thread *own = &out->threads[0];
  uint32_t walked = crumbs_capture_current_stack(own->frames, CRUMBS_CRASH_THREAD_MAX_FRAMES);
  // frames[0] is the call just above, inside this function, frames[1] the call inside the public
  // entry (crash/crumbs_crash_state.c, never a tail call): the caller's frames follow them.
  uint32_t dropped = walked < 2 ? walked : 2;
  memmove(own->frames, own->frames + dropped, (walked - dropped) * sizeof own->frames[0]);
  own->frame_count = walked - dropped;
  stats->started_wall_ns = crumbs__context_clock_ns(CLOCK_REALTIME);

  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t free_owner = 0;
  if (!__atomic_compare_exchange_n(&capture->owner, &free_owner, own_tid, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return CRUMBS_LIVE_CAPTURE_BUSY;
  }
  __atomic_store_n(&capture->live, 1u, __ATOMIC_RELEASE);
  crumbs_live_capture_options defaults = {0, 0, 0, 0};
  if (options == NULL) options = &defaults;
  uint64_t deadline = options->answer_deadline_ns != 0
                          ? options->answer_deadline_ns
                          : __atomic_load_n(&capture->deadline_ns, __ATOMIC_RELAXED);
  uint64_t limit = options->limit_ns != 0 ? options->limit_ns : 4 * deadline;
  if (options->limit_ns == 0 && limit < CRUMBS__LIVE_MIN_LIMIT_NS) limit = CRUMBS__LIVE_MIN_LIMIT_NS;
  __atomic_store_n(&capture->limit_ns, limit, __ATOMIC_RELAXED);
  uint32_t window = options->window != 0 ? options->window : CRUMBS__LIVE_WINDOW;
  if (window > CRUMBS__CAPTURE_SLOTS) window = CRUMBS__CAPTURE_SLOTS;
  __atomic_store_n(&capture->ending, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->holding, 0u, __ATOMIC_RELEASE);
  out->capture_signal = capture->capture_signal;
  out->deadline_ns = deadline;
  // The previous capture's threads may still be leaving its handler (see crumbs__capture_state.inside).
  crumbs__capture_wait_for_leavers(deadline);
  uint64_t started = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  capture->requested_ns = started;

  int status = CRUMBS_LIVE_CAPTURE_OK;
  if (crumbs__capture_list(out, own_tid)) {
    crumbs__live_run run = {record, crumbs__module_table_of(record), out, stats, deadline, started + limit,
                            window};
    crumbs__modules_check_read_only(&run.modules);
    crumbs__live_ask_all(&run);
    crumbs__modules_check_stop();
    // SIGPROF goes back once no thread it was sent to can still receive it.
    if (!crumbs__capture_pending_somewhere(SIGPROF)) crumbs__capture_sigprof_give_back();
    stats->signalled = capture->signals_sent;
  } else {
    out->flags |= CRUMBS_THREADS_LISTING_FAILED;
    status = CRUMBS_LIVE_CAPTURE_LISTING_FAILED;
  }
  uint32_t count = capture->slot_count;
  stats->duration_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC) - started;
  out->capture_duration_ns = stats->duration_ns;
  __atomic_store_n(&capture->live, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->owner, 0u, __ATOMIC_RELEASE);
  crumbs__capture_futex(&capture->owner, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);

  // Entries at their slots' indices: close the gaps the exited threads left.
  uint32_t written = 1;
  for (uint32_t index = 1; index < count && status == CRUMBS_LIVE_CAPTURE_OK; index++) {
    if (out->threads[index].state == 0) continue;
    if (index != written) memmove(&out->threads[written], &out->threads[index], sizeof out->threads[0]);
    written++;
  }
  out->thread_count = written;
  return status;
}
