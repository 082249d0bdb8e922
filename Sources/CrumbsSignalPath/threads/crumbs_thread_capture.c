// crumbs_thread_capture.c — the capture of every other thread, shared by the crash capture
// (crumbs_thread_capture_crash.c) and the live one (crumbs_thread_capture_live.c): the listing,
// the asking, the capture signal's handler on every other thread, the walk of each parked thread.
// Design (protocol, who captures, generations, SIGPROF): docs/crash-capture.md#the-capture-protocol
//
// Entry points, in call order (install, request, collect and release are in the files above):
//   crumbs__capture_list             lists /proc/self/task under a new generation, a slot each
//   crumbs__capture_ask              reads a thread's status, sends the capture signal or SIGPROF
//   crumbs__capture_signal_handler   (every other thread) answers into its slot, parks or ends
//   crumbs__capture_find_stacks      stack bounds from /proc/thread-self/maps where none registered
//   crumbs__capture_write_entry      walks a parked thread's stack into its entry
//
// ASYNC-SIGNAL-SAFE: everything here. No malloc, no locks, no stdio; static buffers. libc calls:
// syscall(SYS_gettid, SYS_tgkill, SYS_futex, SYS_exit), getpid, prctl(PR_GET_NAME), sigaction
// (libc's own, kit/crumbs_libc_sigaction.h), sigemptyset, sigaddset, sigismember, sigprocmask,
// memset; through crumbs_proc_threads.c open, read, close, syscall(SYS_getdents64), memcmp,
// memcpy, getrlimit, prctl(PR_GET_DUMPABLE); clock_gettime (crumbs_context.c); the unwinder's;
// an armed test hook's (kit/crumbs_hooks.h). Each is bound at install (crumbs_crash_install.c,
// crumbs__thread_capture_install).

#define _GNU_SOURCE
#include "threads/crumbs_thread_capture.h"
#include "kit/crumbs_format.h"
#include "kit/crumbs_hooks.h"
#include "kit/crumbs_libc_sigaction.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

crumbs__capture_state crumbs__capture = {.deadline_ns = CRUMBS__CAPTURE_DEADLINE_NS};
__thread crumbs__thread_state crumbs__this_thread __attribute__((tls_model("initial-exec")));

// MARK: - Small signal-safe helpers

long crumbs__capture_futex(uint32_t *word, int operation, uint32_t value, uint64_t timeout_ns) {
  struct timespec timeout = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
  return syscall(SYS_futex, word, operation, value, timeout_ns != 0 ? &timeout : NULL, NULL, 0);
}

bool crumbs__capture_handles(int signal_number) {
  struct sigaction current;
  if (signal_number == 0 || crumbs__libc_sigaction(signal_number, NULL, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == crumbs__capture_signal_handler;
}

/// The capture handler's action (SA_SIGINFO | SA_ONSTACK | SA_RESTART: a thread interrupted in
/// a system call that restarts resumes it once released; nanosleep, poll, epoll_wait never do,
/// which is why a live capture signals no thread blocked in a system call).
struct sigaction crumbs__capture_action(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__capture_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  return action;
}

bool crumbs__capture_sigprof_usable(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (capture->sigprof_state != 0) return capture->sigprof_state > 0;
  capture->sigprof_state = -1;
  if (crumbs__capture_handles(SIGPROF)) {
    capture->sigprof_state = 1;
    return true;
  }
  // An exchange, not a query then a set: a profiler's handler installed in between is seen in
  // `previous` and put straight back.
  struct sigaction ours = crumbs__capture_action(), previous;
  if (crumbs__libc_sigaction(SIGPROF, &ours, &previous) != 0) return false;
  bool nobody = !(previous.sa_flags & SA_SIGINFO) &&
                (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN);
  if (!nobody) {
    crumbs__libc_sigaction(SIGPROF, &previous, NULL);
    return false;
  }
  capture->sigprof_previous = previous;
  __atomic_store_n(&capture->sigprof_taken, 1u, __ATOMIC_RELEASE);
  capture->sigprof_state = 1;
  return true;
}

void crumbs__capture_sigprof_give_back(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (!__atomic_load_n(&capture->sigprof_taken, __ATOMIC_ACQUIRE)) return;
  if (crumbs__capture_handles(SIGPROF)) crumbs__libc_sigaction(SIGPROF, &capture->sigprof_previous, NULL);
  __atomic_store_n(&capture->sigprof_taken, 0u, __ATOMIC_RELEASE);
}

/// The signal that can ask a thread blocking `blocked`: the capture signal, else SIGPROF, else 0.
static int crumbs__signal_for(uint64_t blocked, bool capture_usable) {
  int capture_signal = crumbs__capture.capture_signal;
  if (capture_usable && !(blocked & (1ull << (capture_signal - 1)))) return capture_signal;
  if (!(blocked & (1ull << (SIGPROF - 1))) && crumbs__capture_sigprof_usable()) return SIGPROF;
  return 0;
}

// MARK: - The other threads' side

/// Leaving the handler, before it counts itself out (`inside`): the two signals that ask a
/// thread (the capture signal, SIGPROF) unblocked again where the interrupted code had them
/// unblocked. Until the handler returns, the kernel blocks the one it was asked with (and a
/// Dispatch worker blocks every other one), so a capture that asks it once `inside` is 0 would
/// read both blocked in its status and list it as not answering. A request that comes from here
/// on runs this handler again at once and, while capture_context is still set, answers with
/// where the first request found it. Only these two: any other signal still waits for the
/// handler's return, so no handler of someone else's (one that might longjmp) runs on top of
/// this one's bookkeeping.
static void crumbs__unblock_requests(const void *context) {
  if (context == NULL) return;
  const sigset_t *interrupted = &((const ucontext_t *)context)->uc_sigmask;
  sigset_t requests;
  sigemptyset(&requests);
  int capture_signal = crumbs__capture.capture_signal;
  if (capture_signal != 0 && sigismember(interrupted, capture_signal) == 0)
    sigaddset(&requests, capture_signal);
  if (sigismember(interrupted, SIGPROF) == 0) sigaddset(&requests, SIGPROF);
  sigprocmask(SIG_UNBLOCK, &requests, NULL);
}

/// The handler's first step on this thread: counted in `inside` (and its tid listed in
/// `inside_tids`, once per thread) before anything else, so that a capture that finds it blocking
/// both request signals knows it is only in here and waits for it instead of listing it as not
/// answering; and the context this run shows if asked again while inside (the outermost run's).
static void crumbs__capture_enter(crumbs__thread_state *thread, uint32_t tid, const void *context) {
  crumbs__capture_state *capture = &crumbs__capture;
  __atomic_fetch_add(&capture->inside, 1, __ATOMIC_ACQ_REL);
  if (thread->capture_depth++ == 0) {
    thread->capture_tid_entry = 0;
    for (uint32_t entry = 0; entry < CRUMBS__CAPTURE_SLOTS; entry++) {
      uint32_t free_entry = 0;
      if (__atomic_compare_exchange_n(&capture->inside_tids[entry], &free_entry, tid, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED)) {
        thread->capture_tid_entry = entry + 1;
        break;
      }
    }
  }
  if (thread->capture_context == NULL) thread->capture_context = context;
}

/// The handler's last step, on every way out (before SYS_exit too): the request signals
/// unblocked (crumbs__unblock_requests), then counted out, then `answered` bumped so that a
/// capture waiting to ask this thread again wakes. `capture_context` stays this run's until the
/// handler returns (the caller puts `outer` back): a request from here on shows the interrupted
/// code, not the handler.
static void crumbs__capture_leave(crumbs__thread_state *thread, const void *context) {
  crumbs__capture_state *capture = &crumbs__capture;
  crumbs__unblock_requests(context);
  if (--thread->capture_depth == 0 && thread->capture_tid_entry != 0) {
    __atomic_store_n(&capture->inside_tids[thread->capture_tid_entry - 1], 0u, __ATOMIC_RELEASE);
    thread->capture_tid_entry = 0;
  }
  if (__atomic_sub_fetch(&capture->inside, 1, __ATOMIC_ACQ_REL) == 0) {
    crumbs__capture_futex(&capture->inside, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  }
  __atomic_fetch_add(&capture->answered, 1, __ATOMIC_RELEASE);
  crumbs__capture_futex(&capture->answered, FUTEX_WAKE_PRIVATE, 1, 0);
}

/// The request itself, between crumbs__capture_enter and crumbs__capture_leave: fills the slot,
/// answers and parks (or ends the thread: `ending`). Returns the signal it was asked with
/// when it parked, 0 when it did not answer (a stray signal, or a request after its capture).
static int crumbs__capture_answer(siginfo_t *info, uint32_t tid, const void *context, const void *outer,
                                  uint64_t entered) {
  crumbs__capture_state *capture = &crumbs__capture;
  // Only a capture's request parks a thread: a stray kill of this signal (or one arriving
  // after its capture) does nothing.
  if (!__atomic_load_n(&capture->capturing, __ATOMIC_ACQUIRE) || info == NULL || info->si_code != SI_TKILL ||
      (uint32_t)info->si_pid != __atomic_load_n(&capture->pid, __ATOMIC_ACQUIRE)) {
    return 0;
  }
  uint32_t asked = CRUMBS__SLOT_WORD(crumbs__capture_generation(), CRUMBS__SLOT_ASKED);
  uint32_t count = __atomic_load_n(&capture->slot_count, __ATOMIC_ACQUIRE);
  crumbs__capture_slot *slot = NULL;
  for (uint32_t index = 1; index < count && index < CRUMBS__CAPTURE_SLOTS; index++) {
    if (capture->slots[index].tid == tid) {
      slot = &capture->slots[index];
      break;
    }
  }
  if (slot == NULL || __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != asked) return 0;
  // A thread that crashed waits in the crash handler (for the first crash to end the process,
  // or for a live capture to finish): its own fault's context is the one worth showing. One
  // asked again while still in this handler (released, not yet back: a crash's request right
  // after a live capture) shows where the first request found it.
  crumbs__thread_state *thread = &crumbs__this_thread;
  const void *shown = outer != NULL ? outer : context;
  slot->also_crashed = 0;
  if (thread->depth > 0 && thread->crash_context != NULL) {
    shown = thread->crash_context;
    slot->also_crashed = thread->original_signal;
  }
  slot->register_count = crumbs__context_copy_registers(shown, slot->registers,
                                                        CRUMBS_CRASH_THREAD_MAX_REGISTERS, &slot->context);
  crumbs__context_unwind_registers(shown, &slot->unwind);
  slot->stack_low = thread->stack_low;
  slot->stack_high = thread->stack_high;
  slot->entered_ns = entered;
  prctl(PR_GET_NAME, (unsigned long)slot->name, 0, 0, 0);
  slot->name[sizeof slot->name - 1] = '\0';

  const crumbs__hooks *hooks = crumbs__hooks_get();
  bool late = hooks != NULL && hooks->late_stop != NULL && hooks->late_stop(slot); // tests only
  int asked_with = slot->asked_with;
  uint32_t expected = asked, parked = asked - CRUMBS__SLOT_ASKED + CRUMBS__SLOT_ANSWERED;
  if (!__atomic_compare_exchange_n(&slot->state, &expected, parked, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    if (late) CRUMBS__HOOK0(late_done);
    return 0; // too late: the capture listed us as not answering
  }
  __atomic_fetch_add(&capture->answered, 1, __ATOMIC_RELEASE);
  crumbs__capture_futex(&capture->answered, FUTEX_WAKE_PRIVATE, 1, 0);
  if (late) CRUMBS__HOOK0(late_done);

  // The process is sure to die (the crash request's `ending`): this thread ends here
  // rather than park, be woken again and then be killed. Its stack and the slot stay as they
  // are (the thread's memory is not unmapped and nothing unwinds), so the crashing thread walks
  // it all the same, and the kernel has one thread fewer to wake and end at the death.
  if (__atomic_load_n(&capture->ending, __ATOMIC_ACQUIRE) != 0) {
    crumbs__capture_leave(thread, context);
    syscall(SYS_exit, 0);
  }

  // Kept parked until the process dies: the request signals unblocked again (as when leaving),
  // so a handler chained after the crash's that suspends threads itself with SIGPROF (the Swift
  // runtime's backtracer, for Dispatch's workers) reaches this one too; it interrupts the
  // futex wait, and its return lands back in this loop.
  bool held = __atomic_load_n(&capture->holding, __ATOMIC_ACQUIRE) != 0;
  if (held) crumbs__unblock_requests(context);
  uint64_t limit = held ? CRUMBS__CAPTURE_HOLD_LIMIT_NS : CRUMBS__CAPTURE_PARK_LIMIT_NS;
  // Parked: the stack must not change while it is walked. The slot's word changes when it is
  // released (or rewritten by a later capture's listing).
  while (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) == parked) {
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now - entered >= limit) break;
    crumbs__capture_futex(&slot->state, FUTEX_WAIT_PRIVATE, parked, limit - (now - entered));
  }
  return asked_with;
}

void crumbs__capture_signal_handler(int signal_number, siginfo_t *info, void *context) {
  int saved_errno = errno;
  // Asked by the kernel, not from TLS: a raw clone() shares this TLS (crumbs__thread_state).
  uint32_t tid = (uint32_t)syscall(SYS_gettid);
  CRUMBS__HOOK(stale_hold, signal_number, tid); // tests only
  uint64_t entered = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  crumbs__thread_state *thread = &crumbs__this_thread;
  const void *outer = thread->capture_context;
  crumbs__capture_enter(thread, tid, context);
  int asked_with = crumbs__capture_answer(info, tid, context, outer, entered);
  if (asked_with == 0) CRUMBS__HOOK(stale_linger, tid); // tests only
  crumbs__capture_leave(thread, context);
  CRUMBS__HOOK(slow_leaver_stop, asked_with); // tests only
  thread->capture_context = outer;
  errno = saved_errno;
}

// MARK: - The capturing thread's side (crash and live)

/// crumbs__capture_list's listing: each other thread gets a slot.
typedef struct crumbs__listing {
  crumbs_crash_thread_table *table;
  uint32_t own_tid;
  uint32_t count;
  uint32_t asked; // CRUMBS__SLOT_WORD(generation, ASKED)
} crumbs__listing;

/// One tid of /proc/self/task into the slots (slot 0 stays the capturing thread).
static bool crumbs__list_thread(uint32_t tid, void *context) {
  crumbs__listing *listing = (crumbs__listing *)context;
  if (tid == listing->own_tid) return true;
  listing->table->threads_seen++;
  if (listing->count >= CRUMBS__CAPTURE_SLOTS) return true;
  uint32_t index = listing->count++;
  crumbs__capture_slot *slot = &crumbs__capture.slots[index];
  memset(slot, 0, sizeof *slot);
  slot->tid = tid;
  crumbs__capture.stack_source[index] = CRUMBS__STACK_NOT_LOOKED;
  __atomic_store_n(&slot->state, listing->asked, __ATOMIC_RELEASE);
  return true;
}

bool crumbs__capture_list(crumbs_crash_thread_table *table, uint32_t own_tid) {
  crumbs__capture_state *capture = &crumbs__capture;
  // 29 bits of generation fit above a slot's 3 state bits; 0 is skipped.
  uint32_t generation = (crumbs__capture_generation() + 1u) & 0x1FFFFFFFu;
  if (generation == 0) generation = 1;
  __atomic_store_n(&capture->generation, generation, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->answered, 0u, __ATOMIC_RELEASE);
  capture->sigprof_state = 0;
  capture->signals_sent = 0;
  __atomic_store_n(&capture->pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
  __atomic_store_n(&capture->slot_count, 1u, __ATOMIC_RELEASE);
  crumbs__listing listing = {table, own_tid, 1, CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_ASKED)};
  if (!crumbs__proc_each_thread(crumbs__list_thread, &listing)) return false;
  __atomic_store_n(&capture->slot_count, listing.count, __ATOMIC_RELEASE);
  return true;
}

/// Slot `slot` leaves ASKED for `state` (compare-exchange: an answer that came first, to a
/// signal left over from an earlier capture, stands).
static void crumbs__settle_slot(crumbs__capture_slot *slot, uint32_t state) {
  uint32_t generation = crumbs__capture_generation();
  uint32_t expected = CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_ASKED);
  __atomic_compare_exchange_n(&slot->state, &expected, CRUMBS__SLOT_WORD(generation, state), false,
                              __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/// Whether thread `tid` is inside the capture handler now (`inside_tids`).
static bool crumbs__inside_handler(uint32_t tid) {
  for (uint32_t entry = 0; entry < CRUMBS__CAPTURE_SLOTS; entry++) {
    if (__atomic_load_n(&crumbs__capture.inside_tids[entry], __ATOMIC_ACQUIRE) == tid) return true;
  }
  return false;
}

bool crumbs__capture_ask(uint32_t index, bool capture_usable, crumbs_crash_thread_table *table) {
  crumbs__capture_state *capture = &crumbs__capture;
  crumbs__capture_slot *slot = &capture->slots[index];
  uint32_t asked = CRUMBS__SLOT_WORD(crumbs__capture_generation(), CRUMBS__SLOT_ASKED);
  capture->capture_usable = capture_usable ? 1u : 0u;
  slot->deferred = 0;
  // Answered already: a signal an earlier capture sent reached it once this one was listed.
  if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != asked) return true;
  // Read before the status: a thread that leaves the handler between the two bumps it.
  uint32_t news = __atomic_load_n(&capture->answered, __ATOMIC_ACQUIRE);
  crumbs__thread_facts facts;
  // A zombie is a thread that has exited: the main thread after pthread_exit stays listed, as
  // a zombie, until the whole process ends; a signal sent to it is never handled.
  if (!crumbs__proc_thread_read(slot->tid, false, &facts) || facts.state == 'Z' || facts.state == 'X' ||
      facts.state == 'x') {
    crumbs__settle_slot(slot, CRUMBS__SLOT_GONE); // exited since the listing (or before it): not listed
    return __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) !=
           CRUMBS__SLOT_WORD(crumbs__capture_generation(), CRUMBS__SLOT_GONE);
  }
  if (facts.seccomp != 0) {
    // Under a seccomp filter: the handler's own system calls (gettid, futex…) could kill the
    // thread (strict mode allows only read, write, exit and sigreturn) or, with
    // SECCOMP_RET_KILL_PROCESS, the whole process. Never signalled, in a crash too: a process
    // killed that way would leave its crash record unfinished. A crash walks it where it blocks
    // when it is blocked in a system call (crumbs__capture_write_entry); a live capture has done
    // so already (crumbs_thread_capture_live.c).
    slot->not_signalled |= CRUMBS_NOT_SIGNALLED_SECCOMP;
    if (!__atomic_load_n(&capture->live, __ATOMIC_ACQUIRE) &&
        crumbs__proc_thread_read(slot->tid, true, &facts)) {
      (void)crumbs__capture_note_blocked(slot, &facts);
    }
    crumbs__settle_slot(slot, CRUMBS__SLOT_NOT_ASKED);
    return false;
  }
  uint64_t blocked = facts.blocked;
  if (CRUMBS__HOOK_ON(ask_blocked_threads)) blocked = 0; // tests only
  int signal_number = crumbs__signal_for(blocked, capture_usable);
  bool stopped = facts.state == 'T' || facts.state == 't';
  if (stopped) signal_number = 0; // stopped or traced: cannot run
  if (signal_number == 0 && !stopped &&
      (crumbs__inside_handler(slot->tid) || __atomic_load_n(&capture->answered, __ATOMIC_ACQUIRE) != news)) {
    // Both blocked, but perhaps only because it is inside the capture handler (a request that
    // came after its capture ended, still being turned away; a live capture's thread not yet
    // out): the kernel blocks the signal a handler runs for until it returns. Asked again once
    // it has left (crumbs__capture_ask_again; its leaving bumps `answered`).
    slot->deferred = 1;
    slot->asked_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    return true;
  }
  if (signal_number == 0) {
    // Blocked or stopped: no answer can come, so none is waited for. Not asked at all when no
    // signal could be used (the capture signal taken, SIGPROF someone's).
    bool could_ask = capture_usable || capture->sigprof_state > 0;
    slot->not_signalled |= stopped     ? CRUMBS_NOT_SIGNALLED_STOPPED
                           : could_ask ? CRUMBS_NOT_SIGNALLED_BLOCKS_SIGNALS
                                       : CRUMBS_NOT_SIGNALLED_NO_SIGNAL;
    crumbs__settle_slot(slot, could_ask ? CRUMBS__SLOT_LATE : CRUMBS__SLOT_NOT_ASKED);
    return false;
  }
  slot->asked_with = signal_number;
  if (signal_number == SIGPROF) table->flags |= CRUMBS_THREADS_USED_SIGPROF;
  slot->asked_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  if (syscall(SYS_tgkill, (pid_t)capture->pid, slot->tid, signal_number) == 0) {
    capture->signals_sent++;
    return true;
  }
  // ESRCH: it exited since the listing (not listed); anything else: not asked.
  crumbs__settle_slot(slot, errno == ESRCH ? CRUMBS__SLOT_GONE : CRUMBS__SLOT_NOT_ASKED);
  return false;
}

bool crumbs__capture_ask_again(uint32_t index, crumbs_crash_thread_table *table) {
  crumbs__capture_slot *slot = &crumbs__capture.slots[index];
  uint32_t asked = CRUMBS__SLOT_WORD(crumbs__capture_generation(), CRUMBS__SLOT_ASKED);
  if (!slot->deferred || __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != asked) return true;
  if (crumbs__inside_handler(slot->tid)) return true; // not out yet: its leaving wakes us again
  return crumbs__capture_ask(index, crumbs__capture.capture_usable != 0, table);
}

void crumbs__capture_wait_for_leavers(uint64_t timeout_ns) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint64_t deadline = crumbs__context_clock_ns(CLOCK_MONOTONIC) + timeout_ns;
  // The caller's own runs of the handler (it crashed in there) never leave before it does.
  uint32_t self = crumbs__this_thread.capture_depth;
  while (true) {
    uint32_t inside = __atomic_load_n(&capture->inside, __ATOMIC_ACQUIRE);
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (inside <= self || now >= deadline) return;
    crumbs__capture_futex(&capture->inside, FUTEX_WAIT_PRIVATE, inside, deadline - now);
  }
}

bool crumbs__capture_waiting(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t asked = CRUMBS__SLOT_WORD(crumbs__capture_generation(), CRUMBS__SLOT_ASKED);
  uint32_t count = __atomic_load_n(&capture->slot_count, __ATOMIC_ACQUIRE);
  for (uint32_t index = 1; index < count && index < CRUMBS__CAPTURE_SLOTS; index++) {
    if (__atomic_load_n(&capture->slots[index].state, __ATOMIC_ACQUIRE) == asked) return true;
  }
  return false;
}

void crumbs__capture_wake_all(void) {
  for (uint32_t index = 1; index < CRUMBS__CAPTURE_SLOTS; index++) {
    crumbs__capture_futex(&crumbs__capture.slots[index].state, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  }
}

bool crumbs__capture_close(uint32_t index) {
  uint32_t generation = crumbs__capture_generation();
  uint32_t expected = CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_ASKED);
  return __atomic_compare_exchange_n(&crumbs__capture.slots[index].state, &expected,
                                     CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_LATE), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

bool crumbs__capture_release_slot(uint32_t index) {
  uint32_t generation = crumbs__capture_generation();
  crumbs__capture_slot *slot = &crumbs__capture.slots[index];
  uint32_t expected = CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_ANSWERED);
  if (!__atomic_compare_exchange_n(&slot->state, &expected,
                                   CRUMBS__SLOT_WORD(generation, CRUMBS__SLOT_RELEASED), false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return false;
  }
  crumbs__capture_futex(&slot->state, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  return true;
}

bool crumbs__capture_note_blocked(crumbs__capture_slot *slot, const crumbs__thread_facts *facts) {
  if (facts->state != 'S' && facts->state != 'D') return false;
  // The status (its switch count) first, then the call: a count read before the call line
  // covers it.
  if (!crumbs__proc_thread_syscall(slot->tid, &slot->blocked)) return false;
  slot->seccomp = facts->seccomp;
  slot->switches = facts->switches;
  slot->reading = 1;
  return true;
}
