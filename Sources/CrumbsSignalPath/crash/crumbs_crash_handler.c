// crumbs_crash_handler.c — the fatal-signal handler: when to record, whom to call before and
// after, die honestly. What the record holds is crumbs_crash_record_write.c's.
// Design (the steps, SA_NODEFER): docs/crash-capture.md#crash-the-handler-and-its-record
//
// Entry points: crumbs__crash_signal_handler (the kernel, or a handler that chains to it), which
// in order: another process → chain and die; re-entry → partial record and die; first chance;
// first crash wins; record (crumbs_crash_record_write.c) and termination message; chain; die.
// crumbs__crash_note_action (the signal watch: another library set one of our signals).
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio. libc calls here:
// clock_gettime (vDSO, crumbs_context.c), syscall(SYS_gettid), sigaction (query only; libc's own,
// kit/crumbs_libc_sigaction.h), nanosleep, getpid, _exit; for a looping first chance open/read/
// close of /proc/thread-self/maps (crumbs_maps.c) and syscall(SYS_process_vm_readv); memset,
// sigaction, sigemptyset/sigaddset, sigprocmask, syscall(SYS_tgkill) (crumbs_die_by_signal.c).
// Through the record: sysinfo, prctl(PR_GET_NAME), sigaltstack (query); the thread capture's
// (tgkill, futex, SYS_exit, open/getdents64/read/close, getrlimit, prctl(PR_GET_DUMPABLE));
// open/read/close of /proc/thread-self/maps, process_vm_readv, memset, memcmp, memcpy (unwinder,
// modules); sched_getcpu (the append); open, fstat, pread, write, close (the termination
// message). Each is bound at install (crumbs_crash_install.c).

#define _GNU_SOURCE
#include "crash/crumbs_crash.h"
#include "threads/crumbs_threads.h"
#include "unwind/crumbs_unwind.h"
#include "kit/crumbs_die_by_signal.h"
#include "kit/crumbs_libc_sigaction.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

// First crash wins: tid of the thread writing the record, 0 when none.
static uint32_t crumbs__winner_tid;

// MARK: - Small signal-safe helpers

/// Dies by `signal_number` (crumbs_die_by_signal.c). If the signal does not end the process (a
/// default action that ignores it, or an init process the kernel shields), exit with the
/// shell's code for it: a crashed thread must not run on.
static void crumbs__die_now(int signal_number) {
  crumbs__die_by_signal(signal_number);
  _exit(128 + signal_number);
}

// MARK: - The chain

/// Chain entry `index` of `signal_number`, in the order they are called: 0 the action of a
/// library that replaced ours and that a re-install kept (crumbs_crash_install.c), 1 the action
/// before ours. NULL when that entry calls nothing (none, SIG_DFL, SIG_IGN: a fault cannot be
/// ignored). Safe to call from a signal handler (pure).
static const struct sigaction *crumbs__chain_entry(int signal_number, uint32_t index) {
  if (signal_number <= 0 || signal_number >= CRUMBS__CRASH_MAX_SIGNAL || index > 1) return NULL;
  const struct sigaction *action = index == 0 ? &crumbs__crash_installed.replacer[signal_number]
                                              : &crumbs__crash_installed.previous[signal_number];
  if (action->sa_handler == SIG_DFL || action->sa_handler == SIG_IGN) return NULL;
  return action;
}

/// Whether chain entry `index` is known to fix a fault and return (see crumbs__crash_state).
static bool crumbs__chain_entry_may_recover(int signal_number, uint32_t index) {
  uint64_t mask = __atomic_load_n(index == 0 ? &crumbs__crash_installed.replacer_may_recover
                                             : &crumbs__crash_installed.previous_may_recover,
                                  __ATOMIC_ACQUIRE);
  return (mask >> signal_number) & 1u;
}

/// The function `action` calls. Pure.
static uint64_t crumbs__handler_address(const struct sigaction *action) {
  return (action->sa_flags & SA_SIGINFO) ? (uint64_t)(uintptr_t)action->sa_sigaction
                                         : (uint64_t)(uintptr_t)action->sa_handler;
}

static void crumbs__call(const struct sigaction *action, int signal_number, siginfo_t *info, void *context) {
  if (action->sa_flags & SA_SIGINFO) {
    action->sa_sigaction(signal_number, info, context);
  } else {
    action->sa_handler(signal_number);
  }
}

/// Whether a chain entry this thread has not called yet would be called after the record.
static bool crumbs__chains(int signal_number) {
  for (uint32_t index = crumbs__crash_this_thread.chain_next; index < 2; index++) {
    if (crumbs__chain_entry(signal_number, index) != NULL) return true;
  }
  return false;
}

bool crumbs__crash_is_ours(const struct sigaction *action) {
  return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == crumbs__crash_signal_handler;
}

/// Whether `action`, set by a handler we gave the first chance, means it gave up: the default
/// action (or ignoring, which for a fault is the same), or the Swift runtime's backtracer put
/// back (its saved action), which never recovers either. Safe to call from a signal handler
/// (module table lookups).
static bool crumbs__gives_up(const struct sigaction *action) {
  if (action->sa_handler == SIG_DFL || action->sa_handler == SIG_IGN) return true;
  uint64_t runtime = crumbs__crash_installed.swift_runtime_address;
  const crumbs_crash_record *record = crumbs__crash_installed.record;
  if (runtime == 0 || record == NULL) return false;
  const crumbs__module_table modules = crumbs__module_table_of(record);
  uint64_t handler = crumbs__handler_address(action);
  int module = crumbs__modules_for_text(&modules, handler);
  return module >= 0 && module == crumbs__modules_for_text(&modules, runtime);
}

/// Whether the kernel called us for `signal_number`, not another library's handler that took the
/// signal after us and chains to us (it may still want the other threads once we return).
/// sigaction is only queried. Safe to call from a signal handler.
static bool crumbs__called_by_the_kernel(int signal_number) {
  struct sigaction current;
  return crumbs__libc_sigaction(signal_number, NULL, &current) == 0 && crumbs__crash_is_ours(&current);
}

// MARK: - The handler

/// Whether returning from the handler makes the kernel deliver the signal again by itself: a
/// fault raised by the instruction at the PC re-executes it. Anything sent (kill, tgkill,
/// abort's raise) or trap-like (int3 / brk continue past the instruction) must be re-raised.
static bool crumbs__redelivered_on_return(int signal_number, const siginfo_t *info) {
  if (info == NULL || info->si_code <= 0) return false;
  return signal_number == SIGSEGV || signal_number == SIGBUS || signal_number == SIGILL ||
         signal_number == SIGFPE;
}

/// Dies after the record: the default action, delivered again by the kernel when we return
/// from a fault, else raised here.
static void crumbs__die_after_record(int signal_number, const siginfo_t *info) {
  if (crumbs__redelivered_on_return(signal_number, info)) {
    crumbs__die_by_signal_set_default(signal_number);
  } else {
    crumbs__die_by_signal(signal_number);
  }
}

static void crumbs__nested_crash(int signal_number, siginfo_t *info) {
  int original = crumbs__this_thread.original_signal;
  crumbs_crash_record *record = crumbs__crash_own_record();
  if (record != NULL &&
      __atomic_load_n(&record->complete_marker, __ATOMIC_ACQUIRE) != CRUMBS_CRASH_COMPLETE_MARKER) {
    // The handler itself crashed before finishing: keep what was written, say so.
    record->nested_signal_number = signal_number;
    record->nested_signal_code = info != NULL ? info->si_code : 0;
    record->nested_fault_address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_PARTIAL, __ATOMIC_RELAXED);
    crumbs__crash_finish_record(record, record->crash_monotonic_ns);
  }
  // Threads parked by the capture go back (the process is about to die anyway).
  crumbs__thread_capture_release(record);
  // Whatever happened, nothing of ours runs again: default actions, then the original signal.
  crumbs__die_by_signal_set_default(signal_number);
  crumbs__die_now(original != 0 ? original : signal_number);
}

/// Records the crash unless another thread is recording one (first crash wins): that thread is
/// waited for, then this one dies by its own signal. Returns once this thread holds the record,
/// at once if it recorded it already (a handler we chained to gave up twice).
static void crumbs__record_crash(int signal_number, siginfo_t *info, void *context, uint32_t thread_id,
                                 uint64_t started_ns) {
  crumbs_crash_record *record = crumbs__crash_own_record();
  uint32_t expected = 0;
  if (!__atomic_compare_exchange_n(&crumbs__winner_tid, &expected, thread_id, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    if (expected == thread_id) return;
    // Another thread is recording. Count ourselves, wait for it to end the process, then die by
    // our own signal if it did not (it hung, or its chained handler returned without dying).
    if (record != NULL) {
      __atomic_fetch_add(&record->threads_crashed, 1, __ATOMIC_RELAXED);
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_CONCURRENT_CRASH, __ATOMIC_RELAXED);
    }
    // The thread capture shows this fault's context if it asks this thread while it waits.
    crumbs__this_thread.crash_context = context;
    struct timespec millisecond = {0, 1000000};
    for (uint32_t waited = 0; waited < crumbs__crash_installed.wait_ms; waited++)
      nanosleep(&millisecond, NULL);
    crumbs__die_now(signal_number);
    return;
  }
  if (record != NULL) {
    __atomic_fetch_add(&record->threads_crashed, 1, __ATOMIC_RELAXED);
    if (crumbs__crash_this_thread.looped) {
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_FIRST_CHANCE_LOOPED, __ATOMIC_RELAXED);
    }
    // A library that replaced our handler and called us from its own may still want the
    // threads when we return: released. Otherwise the process dies after the record, at once or
    // after the handlers chained after ours: the threads the capture asks end as soon as they
    // have answered (one wake-up each fewer on the way to the death), or, with handlers to
    // call, stay parked until the death, so no request is served after the fault while the
    // Swift runtime's backtracer symbolicates for seconds (it suspends them again itself).
    crumbs__after_record after = !crumbs__called_by_the_kernel(signal_number) ? CRUMBS__AFTER_RECORD_RETURN
                                 : crumbs__chains(signal_number)              ? CRUMBS__AFTER_RECORD_CHAIN
                                                                              : CRUMBS__AFTER_RECORD_DEATH;
    crumbs__crash_write_record(record, signal_number, info, context, thread_id, started_ns, after);
    // After the record is complete: the orchestrator's line never delays or endangers it.
    crumbs__termination_message_write(record);
  }
}

/// Marks this thread as calling a chain entry from our handler (see crumbs__crash_thread).
static void crumbs__enter_chain(uint32_t stage, int signal_number, siginfo_t *info, void *context,
                                uint64_t started_ns) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  thread->chain_stage = stage;
  thread->chain_signal = signal_number;
  thread->chain_info = info;
  thread->chain_context = context;
  thread->chain_frame = (uintptr_t)__builtin_frame_address(0);
  thread->chain_started_ns = started_ns;
  thread->chain_tid = (uint32_t)syscall(SYS_gettid);
}

/// Calls the chain entries this thread has not called yet, after the record, then dies.
static void crumbs__chain_rest_and_die(int signal_number, siginfo_t *info, void *context,
                                       uint64_t started_ns) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  crumbs__enter_chain(CRUMBS__CHAIN_AFTER_RECORD, signal_number, info, context, started_ns);
  while (thread->chain_next < 2) {
    const struct sigaction *action = crumbs__chain_entry(signal_number, thread->chain_next++);
    if (action != NULL) crumbs__call(action, signal_number, info, context);
  }
  thread->chain_stage = CRUMBS__CHAIN_NONE;
  crumbs__die_after_record(signal_number, info);
}

/// How a first chance ended.
typedef enum crumbs__first_chance_result {
  CRUMBS__RECOVERED, // it returned with our handler in place, having fixed the fault (it seems)
  CRUMBS__GAVE_UP,   // it put back an action that kills the process (crumbs__gives_up) for the fault
  CRUMBS__RECORD,    // nothing (more) is known to recover, or it loops: record, then the rest of the chain
} crumbs__first_chance_result;

// MARK: - The first chance's mark and loop

/// Writes the mark (crumbs_crash_first_chance) before `handler` is given the fault: counted in
/// `calling` first, so a death inside the handler always shows; the fields only when no other
/// thread is writing them at this instant (never torn by two writers). Safe to call from a
/// signal handler (atomics, clock_gettime).
static void crumbs__first_chance_mark(crumbs_crash_record *record, int signal_number, const siginfo_t *info,
                                      uint64_t pc, uint64_t handler, uint32_t thread_id) {
  if (record == NULL) return;
  crumbs_crash_first_chance *mark = &record->first_chance;
  __atomic_fetch_add(&mark->count, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&mark->calling, 1, __ATOMIC_RELEASE);
  crumbs__crash_this_thread.first_chance_marked = 1;
  uint32_t idle = 0;
  if (!__atomic_compare_exchange_n(&mark->writing, &idle, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return;
  mark->thread_id = thread_id;
  mark->signal_number = signal_number;
  mark->signal_code = info != NULL ? info->si_code : 0;
  mark->pc = pc;
  mark->fault_address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
  mark->handler = handler;
  mark->wall_ns = crumbs__context_clock_ns(CLOCK_REALTIME);
  mark->repeats = crumbs__crash_this_thread.loop_repeats;
  __atomic_store_n(&mark->writing, 0, __ATOMIC_RELEASE);
}

/// The first chance this thread marked is over: it returned to us, or left by longjmp. Safe to
/// call from a signal handler (atomics).
static void crumbs__first_chance_unmark(void) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  crumbs_crash_record *record = crumbs__crash_own_record();
  if (!thread->first_chance_marked || record == NULL) return;
  thread->first_chance_marked = 0;
  __atomic_fetch_sub(&record->first_chance.calling, 1, __ATOMIC_RELEASE);
}

/// Whether the access that raised `info` at `context` would succeed now: the mapping at its
/// address allows it (/proc/self/maps), and for a read, the kernel can read it (which a guard
/// region inside a mapping, or a file mapping's page past the file's end, refuses). Only for
/// SIGSEGV and SIGBUS with an address; SIGILL and SIGFPE at an unchanged pc fault again. When
/// the kernel refuses the read itself (seccomp), the maps alone answer. Safe to call from a
/// signal handler (crumbs__crash_mapping_protection: open, read, close;
/// syscall(SYS_process_vm_readv), getpid).
static bool crumbs__access_allowed_now(int signal_number, const siginfo_t *info, const void *context) {
  if ((signal_number != SIGSEGV && signal_number != SIGBUS) || info == NULL) return false;
  uint64_t address = (uint64_t)(uintptr_t)info->si_addr;
  int protection = crumbs__crash_mapping_protection(address);
  if (protection < 0) return false;
  uint32_t access = crumbs__context_fault_access(context);
  if (access & CRUMBS__ACCESS_EXECUTE) return (protection & PROT_EXEC) != 0;
  if ((access & CRUMBS__ACCESS_WRITE) && !(protection & PROT_WRITE)) return false;
  if (!(protection & PROT_READ)) return false;
  uint8_t byte = 0;
  struct iovec local = {&byte, 1}, remote = {(void *)(uintptr_t)address, 1};
  long copied = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1ul, &remote, 1ul, 0ul);
  return copied == 1 || errno != EFAULT;
}

/// After a first chance returned with our handler in place: whether the fault is a loop rather
/// than fixed. The handler moved the pc (a runtime redirecting to its own code): fixed. The same
/// (signal, pc, address) came back CRUMBS_CRASH_FIRST_CHANCE_REPEATS times in a row on this
/// thread, the pc unchanged each time, and the access still would not succeed: a loop — a
/// handler that logs and returns, or fixes the wrong thing — recorded as the crash it is. A
/// handler that truly fixes the page (mprotect) and returns before the program faults on it again
/// passes that check, and runs on however often it happens: each time it passes, the next check
/// of that same fault comes twice as many returns later (at most every 4096), so the maps file
/// (hundreds of microseconds to read) costs a recovering runtime almost nothing. Safe to call
/// from a signal handler (crumbs__access_allowed_now).
static bool crumbs__first_chance_loops(crumbs_crash_record *record, int signal_number, const siginfo_t *info,
                                       const void *context, uint64_t pc_before) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  uint64_t address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
  if (crumbs__context_pc(context) != pc_before) {
    thread->loop_repeats = 0;
    return false;
  }
  if (thread->loop_signal != signal_number || thread->loop_pc != pc_before ||
      thread->loop_address != address || thread->loop_repeats == 0) {
    thread->loop_signal = signal_number;
    thread->loop_pc = pc_before;
    thread->loop_address = address;
    thread->loop_repeats = 0;
    thread->loop_check_at = CRUMBS_CRASH_FIRST_CHANCE_REPEATS;
  }
  if (thread->loop_repeats < UINT32_MAX) thread->loop_repeats++;
  if (record != NULL) record->first_chance.repeats = thread->loop_repeats;
  if (thread->loop_repeats < thread->loop_check_at) return false;
  if (!crumbs__access_allowed_now(signal_number, info, context)) return true;
  uint32_t step = thread->loop_check_at < 4096u ? thread->loop_check_at : 4096u;
  thread->loop_check_at = thread->loop_check_at > UINT32_MAX - step ? UINT32_MAX
                                                                    : thread->loop_check_at + step;
  return false;
}

/// First chance: a fault the kernel raised goes first to the next chain entry known to fix it
/// and return (one the app declared, or a recognised runtime's: crumbs_crash_install.c), before
/// anything is recorded, parked or written but the mark, so a recovered fault costs the process
/// nothing and leaves no report (crashpad lets a registered first-chance handler do the same).
/// An entry not known to recover never gets it: the crash is recorded first, then the entry is
/// called (crumbs__chain_rest_and_die), as before first chances existed — a handler that exits,
/// resets the action behind our back (a raw rt_sigaction, a library's signal() that does not
/// reach crumbs_signal_watch.c) and raises, or logs and returns, loses nothing.
/// Before the call, the mark (signal, pc, address, handler) goes into the mapped record: a
/// handler that ends the process leaves it for the next launch. After it returns, the signal's
/// action tells what it did: ours still → recovered, unless the same fault keeps coming back
/// (crumbs__first_chance_loops: recorded); SIG_DFL, SIG_IGN or the Swift runtime's backtracer →
/// it gave up (runtimes restore their saved action for a fault they do not own), and the fault
/// comes back to an action that ends the process: a crash, recorded now, while this thread's
/// context is still the fault's; another library's handler → that one takes it. A handler that
/// gives up by resetting the action and raising the signal, or that calls abort(), or that
/// passes the fault on to its own saved action (ours), re-enters our handler from inside the
/// call: crumbs__crash_signal_handler records the crash then (see crumbs__chained_reentry).
/// Safe to call from a signal handler (sigaction queried; the mark and loop check above; what
/// the entry itself calls is its own).
static crumbs__first_chance_result crumbs__first_chance(int signal_number, siginfo_t *info, void *context,
                                                        uint32_t thread_id, uint64_t started_ns) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  // Only a fault that re-executes on return: what a runtime's handler fixes (a JVM's implicit
  // null checks and safepoint polls, a wasm engine's bounds checks, libsigsegv's protection).
  if (!crumbs__redelivered_on_return(signal_number, info)) return CRUMBS__RECORD;
  for (; thread->chain_next < 2; thread->chain_next++) {
    uint32_t index = thread->chain_next;
    const struct sigaction *action = crumbs__chain_entry(signal_number, index);
    if (action == NULL) continue;
    if (!crumbs__chain_entry_may_recover(signal_number, index)) return CRUMBS__RECORD;
    thread->chain_next = index + 1; // a re-entry from inside it goes on with the next one
    crumbs_crash_record *record = crumbs__crash_own_record();
    uint64_t pc = crumbs__context_pc(context);
    crumbs__first_chance_mark(record, signal_number, info, pc, crumbs__handler_address(action), thread_id);
    crumbs__enter_chain(CRUMBS__CHAIN_FIRST_CHANCE, signal_number, info, context, started_ns);
    crumbs__call(action, signal_number, info, context);
    thread->chain_stage = CRUMBS__CHAIN_NONE;
    crumbs__first_chance_unmark();
    struct sigaction now;
    if (crumbs__libc_sigaction(signal_number, NULL, &now) != 0 || crumbs__crash_is_ours(&now)) {
      if (!crumbs__first_chance_loops(record, signal_number, info, context, pc)) return CRUMBS__RECOVERED;
      thread->looped = 1;
      return CRUMBS__RECORD;
    }
    return crumbs__gives_up(&now) ? CRUMBS__GAVE_UP : CRUMBS__RECOVERED;
  }
  return CRUMBS__RECORD;
}

/// After a first chance or the record: what the signal's handling ends with on this thread.
/// `recovered` returns to the interrupted code; anything else records (once) and dies.
static void crumbs__handle(int signal_number, siginfo_t *info, void *context, uint32_t thread_id,
                           uint64_t started_ns) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  switch (crumbs__first_chance(signal_number, info, context, thread_id, started_ns)) {
  case CRUMBS__RECOVERED: return;
  case CRUMBS__GAVE_UP:
    // It chose the action the fault comes back to: nothing else of the chain is called.
    thread->chain_next = 2;
    crumbs__record_crash(signal_number, info, context, thread_id, started_ns);
    return;
  case CRUMBS__RECORD:
    crumbs__record_crash(signal_number, info, context, thread_id, started_ns);
    crumbs__chain_rest_and_die(signal_number, info, context, started_ns);
    return;
  }
}

/// Our handler entered again on a thread that is calling a chain entry from it. Same signal and
/// siginfo, during a first chance: the entry passed the fault on to its saved action (ours) —
/// the next entry gets its chance, then the record; and if that one recovers, we return into
/// the entry. Anything else during a first chance (the entry raised the signal after resetting
/// it, called abort(), or crashed): the fault it was given is a crash, recorded now with its
/// context, then this signal ends the process. After the record: the entry passed the signal
/// on to us; the rest of the chain, then the death.
static void crumbs__chained_reentry(int signal_number, siginfo_t *info, void *context, uint32_t thread_id,
                                    uint64_t started_ns) {
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  if (thread->chain_stage == CRUMBS__CHAIN_FIRST_CHANCE && signal_number == thread->chain_signal &&
      info == thread->chain_info) {
    crumbs__crash_thread outer = *thread;
    crumbs__handle(signal_number, info, context, thread_id, outer.chain_started_ns);
    // Recovered further down: back into the entry that passed it on, as it was.
    *thread = outer;
    return;
  }
  if (thread->chain_stage == CRUMBS__CHAIN_FIRST_CHANCE) {
    thread->chain_next = 2;
    crumbs__record_crash(thread->chain_signal, thread->chain_info, thread->chain_context, thread_id,
                         thread->chain_started_ns);
    crumbs__die_by_signal_set_default(signal_number);
    crumbs__die_now(signal_number);
    return;
  }
  if (signal_number == thread->chain_signal) {
    crumbs__chain_rest_and_die(signal_number, info, context, started_ns);
    crumbs__die_now(signal_number);
    return;
  }
  crumbs__nested_crash(signal_number, info);
}

/// A process that is not the one the record belongs to runs our handler: a vfork() child
/// (which shares our memory and this thread's TLS until it execs or exits) or a child forked
/// without our fork handler (crumbs_fork.h). It touches none of the crash state (a vfork child
/// would leave the parent's first-crash and re-entry state taken): default action, the action
/// before ours, death.
static void crumbs__foreign_process(int signal_number, siginfo_t *info, void *context) {
  crumbs__die_by_signal_set_default(signal_number);
  const struct sigaction *previous = crumbs__chain_entry(signal_number, 1);
  if (previous != NULL) crumbs__call(previous, signal_number, info, context);
  if (!crumbs__redelivered_on_return(signal_number, info)) crumbs__die_now(signal_number);
}

void crumbs__crash_signal_handler(int signal_number, siginfo_t *info, void *context) {
  int saved_errno = errno;
  crumbs_crash_record *installed = crumbs__crash_installed.record;
  if (installed != NULL && installed->pid != (uint32_t)getpid()) {
    crumbs__foreign_process(signal_number, info, context);
    errno = saved_errno;
    return;
  }
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  if (crumbs__this_thread.depth > 0 && thread->chain_stage != CRUMBS__CHAIN_NONE &&
      (uintptr_t)__builtin_frame_address(0) >= thread->chain_frame) {
    // Not called from inside the entry: it left our handler by longjmp (a runtime recovering
    // that way). That handling is over, and so is its first chance.
    crumbs__this_thread.depth = 0;
    thread->chain_stage = CRUMBS__CHAIN_NONE;
    crumbs__first_chance_unmark();
  }
  uint64_t started_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  uint32_t thread_id = (uint32_t)syscall(SYS_gettid);
  if (crumbs__this_thread.depth > 0) {
    if (thread->chain_stage != CRUMBS__CHAIN_NONE) {
      crumbs__chained_reentry(signal_number, info, context, thread_id, started_ns);
    } else {
      crumbs__nested_crash(signal_number, info); // does not return
    }
    errno = saved_errno;
    return;
  }
  crumbs__this_thread.depth = 1;
  crumbs__this_thread.original_signal = signal_number;
  thread->chain_next = 0;
  thread->looped = 0;
  crumbs__handle(signal_number, info, context, thread_id, started_ns);
  // Returning: a recovered fault runs on; a fault re-executes and meets SIG_DFL; a raised
  // signal is delivered at the latest when the kernel restores the interrupted mask.
  thread->chain_stage = CRUMBS__CHAIN_NONE;
  crumbs__this_thread.depth = 0;
  errno = saved_errno;
}

// MARK: - Actions set by others (crumbs_signal_watch.c)

void crumbs__crash_note_action(int signal_number, const struct sigaction *action) {
  if (signal_number <= 0 || signal_number >= CRUMBS__CRASH_MAX_SIGNAL || action == NULL) return;
  uint64_t bit = 1ull << signal_number;
  if (!(__atomic_load_n(&crumbs__crash_installed.installed_mask, __ATOMIC_ACQUIRE) & bit)) return;
  crumbs_crash_record *record = crumbs__crash_own_record();
  if (record == NULL) return; // not installed, or a vfork child: nothing of ours is touched
  crumbs__crash_thread *thread = &crumbs__crash_this_thread;
  if (crumbs__this_thread.depth > 0) {
    // Inside our handler on this thread: our own death, or a handler we chained to. One given
    // the first chance that puts the default back for the signal gave up: record now, before
    // it raises the signal or returns to the fault. (A raw clone() sharing this thread's TLS,
    // as the Swift backtracer's memory server does, is not that thread: it changes nothing.)
    uint32_t thread_id = (uint32_t)syscall(SYS_gettid);
    if (thread->chain_stage == CRUMBS__CHAIN_FIRST_CHANCE && thread_id == thread->chain_tid &&
        signal_number == thread->chain_signal && crumbs__gives_up(action)) {
      crumbs__record_crash(thread->chain_signal, thread->chain_info, thread->chain_context, thread_id,
                           thread->chain_started_ns);
    }
    return;
  }
  // The process is dying: a handler chained after the record (the Swift runtime's backtracer
  // puts SIG_DFL back for every signal it handles, on its own helper threads too) changes
  // actions on the way to the death. No crash is lost to that: the record keeps what was
  // replaced when the crash began.
  if (crumbs__crash_started()) return;
  if (crumbs__crash_is_ours(action)) {
    __atomic_fetch_and(&record->replaced_signals, ~bit, __ATOMIC_RELAXED);
  } else {
    __atomic_fetch_or(&record->replaced_signals, bit, __ATOMIC_RELAXED);
  }
}
