// crumbs_thread_capture_crash.c — the crash handler's capture of every other thread: the
// crashing thread takes the capture (waiting for a live one, or taking over its own), asks every
// thread at once, walks them all once they have answered, then releases them (or lets them end,
// or keeps them for a core). The whole protocol: docs/crash-capture.md#the-capture-protocol;
// the pieces shared with the live capture are declared in crumbs_thread_capture.h.
//
// ASYNC-SIGNAL-SAFE: everything in this file (the crash handler calls it). No malloc, no locks,
// no stdio. libc calls: syscall(SYS_futex), and what crumbs_thread_capture.c's pieces, the
// waits (crumbs_thread_waits.c), the unwinder (crumbs_unwind.c) and the module table
// (crumbs_modules.c) call.

#define _GNU_SOURCE
#include "threads/crumbs_thread_capture.h"
#include "kit/crumbs_hooks.h"
#include "kit/crumbs_format.h"

/// How much longer than a live capture's own limit a crash waits for it to finish.
#define CRUMBS__LIVE_WAIT_MARGIN_NS (100u * 1000000u)

static bool crumbs__crash_holds;        // crashing thread: the capture is the crash's
static uint32_t crumbs__crash_released; // atomic: the crash's parked threads were let go

static void crumbs__thread_capture_finish(crumbs_crash_record *record);

/// Takes the capture for the crash on thread `own_tid` (see "Who captures"). False when a live
/// capture held it past the wait (the table says CRUMBS_THREADS_BUSY).
static bool crumbs__acquire_for_crash(crumbs_crash_thread_table *table, uint32_t own_tid) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (__atomic_load_n(&capture->owner, __ATOMIC_ACQUIRE) == own_tid) {
    // This thread crashed inside its own live capture: the threads it parked go first; the
    // crash asks every thread again under a new generation. A request not answered yet is
    // closed, not left open: a thread already inside the handler (past its `capturing` check)
    // would answer it after this loop and park for a capture nobody releases any more, and the
    // crash would wait its whole deadline for that thread to leave
    // (crumbs__capture_wait_for_leavers). Closed, its answer fails (compare-exchange: exactly
    // one side wins) and it goes back at once.
    uint32_t count = __atomic_load_n(&capture->slot_count, __ATOMIC_ACQUIRE);
    for (uint32_t index = 1; index < count && index < CRUMBS__CAPTURE_SLOTS; index++) {
      if (!crumbs__capture_close(index)) crumbs__capture_release_slot(index);
    }
    CRUMBS__HOOK0(late_go); // tests only: an answer after the take-over
    __atomic_store_n(&capture->capturing, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&capture->live, 0u, __ATOMIC_RELEASE);
    table->flags |= CRUMBS_THREADS_TOOK_OVER_LIVE;
    return true;
  }
  uint64_t limit = __atomic_load_n(&capture->limit_ns, __ATOMIC_RELAXED);
  uint64_t deadline = crumbs__context_clock_ns(CLOCK_MONOTONIC) +
                      (limit != 0 ? limit : CRUMBS__CAPTURE_DEADLINE_NS) + CRUMBS__LIVE_WAIT_MARGIN_NS;
  while (true) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(&capture->owner, &expected, own_tid, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      return true;
    }
    table->flags |= CRUMBS_THREADS_WAITED_FOR_LIVE;
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now >= deadline) {
      table->flags |= CRUMBS_THREADS_BUSY;
      return false;
    }
    crumbs__capture_futex(&capture->owner, FUTEX_WAIT_PRIVATE, expected, deadline - now);
  }
}

void crumbs__thread_capture_request(crumbs_crash_record *record, uint32_t own_tid,
                                    crumbs__after_record after) {
  crumbs__capture_state *capture = &crumbs__capture;
  crumbs_crash_thread_table *table = &record->threads;
  crumbs_crash_thread *own = &table->threads[0];
  own->tid = own_tid;
  own->state = CRUMBS_THREAD_CRASHING;
  table->threads_seen = 1;
  table->thread_count = 1;
  table->capture_signal = capture->capture_signal;
  table->deadline_ns = __atomic_load_n(&capture->deadline_ns, __ATOMIC_RELAXED);
  if (!crumbs__acquire_for_crash(table, own_tid)) return;
  crumbs__crash_holds = true;
  // Threads a live capture just released may still be leaving its handler, blocking the signal
  // they were asked with: they could not answer the crash's. They are on their way out.
  crumbs__capture_wait_for_leavers(__atomic_load_n(&capture->deadline_ns, __ATOMIC_RELAXED));
  CRUMBS__HOOK0(stale_go); // tests only
  capture->requested_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  bool listed = crumbs__capture_list(table, own_tid);
  // A thread the taken-over capture parked just before the listing rewrote its slot waits on a
  // word nobody will change again: it goes back now, and answers the crash's own signal.
  if (table->flags & CRUMBS_THREADS_TOOK_OVER_LIVE) crumbs__capture_wake_all();
  if (!listed) {
    table->flags |= CRUMBS_THREADS_LISTING_FAILED;
    return;
  }
  bool ours = crumbs__capture_handles(capture->capture_signal);
  if (!ours && capture->capture_signal != 0) table->flags |= CRUMBS_THREADS_SIGNAL_TAKEN;
  // A process about to die whose death is watched keeps its threads for the core / debugger;
  // one that calls handlers before it dies keeps them from running on meanwhile.
  bool watched = after == CRUMBS__AFTER_RECORD_DEATH && crumbs__proc_death_is_watched();
  bool process_ends = after == CRUMBS__AFTER_RECORD_DEATH && !watched;
  bool hold = watched || after == CRUMBS__AFTER_RECORD_CHAIN;
  __atomic_store_n(&capture->holding, hold ? 1u : 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->ending, process_ends ? 1u : 0u, __ATOMIC_RELEASE);
  if (process_ends) table->flags |= CRUMBS_THREADS_ENDED;
  if (watched) table->flags |= CRUMBS_THREADS_KEPT_FOR_DUMP;
  if (after == CRUMBS__AFTER_RECORD_CHAIN) table->flags |= CRUMBS_THREADS_KEPT_FOR_CHAIN;
  __atomic_store_n(&capture->capturing, 1u, __ATOMIC_RELEASE);
  CRUMBS__HOOK0(uninstall_meet); // tests only
  uint32_t count = capture->slot_count;
  for (uint32_t index = 1; index < count; index++) {
    // Before the ask: once asked, the thread shows the capture's wait, not its own.
    crumbs__thread_wait_note(record, capture->slots[index].tid);
    crumbs__capture_ask(index, ours, table);
  }
  CRUMBS__HOOK0(slow_leaver_go); // tests only
}

/// Waits for the asked threads until the deadline, then closes the slots still waiting.
static void crumbs__wait_for_answers(crumbs_crash_thread_table *table) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint64_t deadline = capture->requested_ns + __atomic_load_n(&capture->deadline_ns, __ATOMIC_RELAXED);
  while (true) {
    // Read before the slots: an answer (or a thread leaving the handler) after it changes the
    // word, so the wait returns at once.
    uint32_t answered = __atomic_load_n(&capture->answered, __ATOMIC_ACQUIRE);
    for (uint32_t index = 1; index < capture->slot_count; index++) crumbs__capture_ask_again(index, table);
    if (!crumbs__capture_waiting()) return;
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now >= deadline) break;
    crumbs__capture_futex(&capture->answered, FUTEX_WAIT_PRIVATE, answered, deadline - now);
  }
  uint32_t count = capture->slot_count;
  for (uint32_t index = 1; index < count; index++) {
    if (crumbs__capture_close(index)) table->flags |= CRUMBS_THREADS_DEADLINE_PASSED;
  }
}

void crumbs__thread_capture_collect(crumbs_crash_record *record) {
  crumbs__capture_state *capture = &crumbs__capture;
  const crumbs__module_table modules = crumbs__module_table_of(record);
  crumbs_crash_thread_table *table = &record->threads;
  crumbs_crash_thread *own = &table->threads[0];
  crumbs__format_copy(own->name, sizeof own->name, record->thread_name);
  own->stack_low = record->stack_low;
  own->stack_high = record->stack_high;
  own->stack_source = record->stack_source;
  if (!crumbs__crash_holds || capture->slot_count <= 1) {
    crumbs__thread_capture_finish(record);
    return;
  }
  crumbs__wait_for_answers(table);
  crumbs__capture_find_stacks();

  // A crash while walking (a stack changed under us) leaves this flag set: the entries after
  // thread_count were not written.
  table->flags |= CRUMBS_THREADS_INTERRUPTED;
  static uint64_t unknown[CRUMBS_CRASH_MAX_FRAMES];
  uint32_t unknown_count = 0;
  uint32_t count = capture->slot_count, written = 1;
  for (uint32_t index = 1; index < count; index++) {
    crumbs_crash_thread *entry = &table->threads[written];
    if (!crumbs__capture_write_entry(&modules, index, entry, table)) continue;
    table->thread_count = ++written;
    for (uint32_t frame = 0; frame < entry->frame_count && unknown_count < CRUMBS_CRASH_MAX_FRAMES; frame++) {
      // Return addresses point after the call: look up address - 1 (as for the crashing thread).
      uint64_t address = frame == 0 ? entry->frames[0] : entry->frames[frame] - 1;
      if (crumbs__modules_for_text(&modules, address) < 0) unknown[unknown_count++] = address;
    }
  }
  table->flags &= ~(uint32_t)CRUMBS_THREADS_INTERRUPTED;
  crumbs__thread_capture_finish(record);
  // Frames in libraries loaded since the last module scan: found in /proc/self/maps, as for the
  // crashing thread's.
  if (unknown_count > 0) {
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_STALE, __ATOMIC_RELAXED);
    crumbs__modules_add_at_crash(&modules, unknown, unknown_count);
  }
}

/// The capture's end: the parked threads are released, unless they are kept (`holding`) for a
/// core dump or a tracer, or while the handlers chained after ours run: the fatal signal ends
/// them, or the hold limit.
static void crumbs__thread_capture_finish(crumbs_crash_record *record) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (!__atomic_load_n(&capture->holding, __ATOMIC_ACQUIRE)) {
    crumbs__thread_capture_release(record);
    return;
  }
  if (record != NULL && capture->requested_ns != 0) {
    record->threads.capture_duration_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC) - capture->requested_ns;
  }
}

void crumbs__thread_capture_release(crumbs_crash_record *record) {
  crumbs__capture_state *capture = &crumbs__capture;
  // Only the crash's own capture: a live one another thread still runs releases its threads.
  if (!crumbs__crash_holds || __atomic_exchange_n(&crumbs__crash_released, 1u, __ATOMIC_ACQ_REL) != 0) return;
  uint32_t count = __atomic_load_n(&capture->slot_count, __ATOMIC_ACQUIRE);
  for (uint32_t index = 1; index < count && index < CRUMBS__CAPTURE_SLOTS; index++) {
    crumbs__capture_release_slot(index);
  }
  __atomic_store_n(&capture->capturing, 0u, __ATOMIC_RELEASE);
  if (record != NULL && capture->requested_ns != 0) {
    record->threads.capture_duration_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC) - capture->requested_ns;
  }
}
