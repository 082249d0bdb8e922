// crumbs_thread_capture.h — what the two thread captures share: the crash handler's
// (crumbs_thread_capture_crash.c: every thread at once, at crash time) and the live one
// (crumbs_thread_capture_live.c: a few threads at a time, the process running on). One set of
// slots, one capture signal handler, one listing, one way to ask a thread, walk its stack and
// release it (crumbs_thread_capture.c); docs/crash-capture.md#who-captures says who may use
// them when; the tests
// reach into them through kit/crumbs_hooks.h. Internal to CrumbsSignalPath.
//
// ASYNC-SIGNAL-SAFE: every function declared here (their libc calls are listed in
// crumbs_thread_capture.c and crumbs_thread_capture_live.c).

#ifndef CRUMBS_THREAD_CAPTURE_H
#define CRUMBS_THREAD_CAPTURE_H

#include "threads/crumbs_threads.h"
#include "unwind/crumbs_unwind.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#if __has_include(<linux/futex.h>)
#include <linux/futex.h>
#else
// musl-gcc's include path has no kernel headers: the futex ABI's values (linux/futex.h).
#define FUTEX_WAIT_PRIVATE (0 | 128)
#define FUTEX_WAKE_PRIVATE (1 | 128)
#endif

/// How long the asked threads have to answer by default, from their request: long enough for
/// 100 threads on a busy 2-core machine (they answer within a few ms), short enough that a
/// thread that is asked but not scheduled in time costs at most this. (A thread that cannot
/// answer, blocking both signals or stopped, is known from its status and not waited for.)
#define CRUMBS__CAPTURE_DEADLINE_NS (50u * 1000000u)
/// How long a parked thread waits to be released before it goes back on its own (the capturing
/// thread hung or was stopped): it only keeps "never a hang" true.
#define CRUMBS__CAPTURE_PARK_LIMIT_NS (10ull * 1000000000u)
/// The same for a thread kept parked until the process dies (`holding`): a core dump of a large
/// process, or the Swift runtime's backtracer symbolicating, may take longer than the park
/// limit. Past it the thread runs on (a chained handler that recovered, or never ended).
#define CRUMBS__CAPTURE_HOLD_LIMIT_NS (60ull * 1000000000u)
#define CRUMBS__CAPTURE_SLOTS CRUMBS_CRASH_MAX_THREADS
/// `crumbs__capture_state.stack_source[i]` before slot i's stack was looked for.
#define CRUMBS__STACK_NOT_LOOKED 0xFFFFFFFFu

/// A slot's state: the low 3 bits of `crumbs__capture_slot.state`; the bits above are the
/// generation of the capture that wrote it, so an answer (or a wait) left over from an earlier
/// capture never counts for the next one.
enum {
  CRUMBS__SLOT_ASKED = 1,     // the signal is (about to be) sent
  CRUMBS__SLOT_ANSWERED = 2,  // the thread filled the slot and is parked
  CRUMBS__SLOT_LATE = 3,      // no answer: it cannot (blocked, stopped), or its deadline passed
                              // first (then it returns at once if it comes)
  CRUMBS__SLOT_GONE = 4,      // exited since the listing (no status, or tgkill ESRCH): not listed
  CRUMBS__SLOT_NOT_ASKED = 5, // no signal could ask it (both someone else's), or tgkill failed
  CRUMBS__SLOT_RELEASED = 6,  // answered, walked, and let go: it leaves its handler
  CRUMBS__SLOT_READ = 7,      // live only: walked where it blocks in a system call, never
                              // signalled (crumbs_thread_capture_live.c); its entry is written
};
#define CRUMBS__SLOT_WORD(generation, state) (((generation) << 3) | (uint32_t)(state))
#define CRUMBS__SLOT_STATE(word) ((word)&7u)

/// One other thread, while captured. Entry `index` of a table is slot `index` (slot 0, the
/// capturing thread, is never asked). Written by the capturing thread (tid, state at listing)
/// and by the thread it names (the rest, before it answers).
typedef struct crumbs__capture_slot {
  uint32_t tid;
  uint32_t state;       // atomic: CRUMBS__SLOT_WORD; the parked thread's futex word
  int32_t asked_with;   // the signal sent (0: none)
  int32_t also_crashed; // the signal of a thread that crashed too, else 0
  uint32_t register_count;
  /// 1 while the thread's answer waits for it to leave the capture handler: asked, it blocked
  /// both request signals because it was inside the handler (for an earlier request), so no
  /// signal was sent yet; crumbs__capture_ask_again asks it once it has left.
  uint32_t deferred;
  uint64_t asked_ns;   // CLOCK_MONOTONIC: when the signal was sent
  uint64_t entered_ns; // CLOCK_MONOTONIC: when its handler started (the pause's start)
  crumbs__context_registers context;
  crumbs__unwind_registers unwind; // every register the CFI unwinder may start from
  uint64_t stack_low, stack_high;  // registered bounds (crumbs__crash_this_thread), or 0
  uint64_t registers[CRUMBS_CRASH_THREAD_MAX_REGISTERS];
  char name[16];
  /// Why no signal asked it (CRUMBS_NOT_SIGNALLED_*), written by the capturing thread.
  uint32_t not_signalled;
  /// Live only, capturing thread: 1 while its stack is read where it blocks in `blocked`
  /// (status read with `switches` context switches), before the frames are trusted.
  uint32_t reading;
  uint32_t seccomp;
  uint64_t switches;
  crumbs__blocked_syscall blocked;
} crumbs__capture_slot;

/// The one capture in progress (crash or live), and who holds it.
typedef struct crumbs__capture_state {
  crumbs__capture_slot slots[CRUMBS__CAPTURE_SLOTS];
  uint32_t slot_count; // slots in use (written before any signal is sent)
  /// Futex word, bumped by every answer and by every thread leaving the handler: what the
  /// capturing thread waits on (an answer came, or a thread that could not be asked while it was
  /// inside the handler can be asked now).
  uint32_t answered;
  /// Futex word: runs of the capture handler in progress, each counted from its first
  /// instruction to its last (answering, parked, released and not yet out, or going back at
  /// once: a request that came after its capture ended). The next capture waits for it to drop
  /// to 0 before it asks anyone: a thread still inside blocks the signal it was asked with, and
  /// could not answer again (a leaving thread counts itself out once it has unblocked the two
  /// request signals again).
  uint32_t inside;
  /// The tids of the threads inside the handler (`inside`), one entry per thread, 0 where free:
  /// a thread asked while it is in there is not "blocking both signals" for good, only until it
  /// leaves (crumbs__capture_ask defers it). A thread that finds no free entry is not listed.
  uint32_t inside_tids[CRUMBS__CAPTURE_SLOTS];
  uint32_t capture_usable; // this capture: the capture signal is ours (crumbs__capture_ask_again)
  /// This process's pid, set by the capturing thread at its listing: the handler checks a
  /// request's sender against it instead of asking the kernel (one system call fewer in every
  /// asked thread).
  uint32_t pid;
  uint32_t signals_sent; // this capture: signals sent (tgkill succeeded)
  uint32_t generation;   // atomic: bumped by every capture's listing
  uint32_t capturing;    // atomic: 1 from the first request to the release
  uint32_t ending;       // atomic, crash only: answering threads end instead of parking
  uint32_t holding;      // atomic, crash only: parked threads stay parked (a core, a tracer, a chain)
  /// Futex word: the tid of the thread holding the capture (a live capture's caller, or the
  /// crashing thread), 0 when free. See docs/crash-capture.md#who-captures.
  uint32_t owner;
  uint32_t live;         // atomic: 1 while the owner is a live capture
  int capture_signal;    // 0: none installed
  int sigprof_state;     // this capture: 0 not looked at, 1 usable (ours), -1 someone's
  uint64_t requested_ns; // CLOCK_MONOTONIC: the capture's start
  uint64_t limit_ns;     // a live capture's bound on its whole run (the crash waits that long)
  uint64_t deadline_ns;  // how long an asked thread has to answer
  /// SIGPROF's action before a capture took it (sa_handler SIG_DFL or SIG_IGN); `sigprof_taken`
  /// 1 while ours and not given back (crumbs_thread_capture_live.c gives it back).
  struct sigaction sigprof_previous;
  uint32_t sigprof_taken;
  /// The stack each answered slot is walked in (registered bounds, or /proc/thread-self/maps).
  uint64_t stack_low[CRUMBS__CAPTURE_SLOTS], stack_high[CRUMBS__CAPTURE_SLOTS];
  uint32_t stack_source[CRUMBS__CAPTURE_SLOTS];
} crumbs__capture_state;
extern crumbs__capture_state crumbs__capture;
/// The capture's generation (atomic): a slot word belongs to the capture whose generation it
/// carries (CRUMBS__SLOT_WORD). Safe to call from a signal handler.
static inline uint32_t crumbs__capture_generation(void) {
  return __atomic_load_n(&crumbs__capture.generation, __ATOMIC_ACQUIRE);
}

/// syscall(SYS_futex) on `word`; `timeout_ns` 0: none.
long crumbs__capture_futex(uint32_t *word, int operation, uint32_t value, uint64_t timeout_ns);
/// Whether `signal_number`'s action is the capture handler.
bool crumbs__capture_handles(int signal_number);
/// Lists /proc/self/task into the slots under a new generation, slot 0 being `own_tid`
/// (threads_seen counted into `table`). False when the directory cannot be read.
bool crumbs__capture_list(crumbs_crash_thread_table *table, uint32_t own_tid);
/// Asks slot `index`'s thread (status read, signal chosen, tgkill): true when an answer is to
/// be waited for (a signal was sent) or is there already (a signal an earlier capture sent got
/// there first); otherwise the slot says why not (GONE, LATE, NOT_ASKED). `capture_usable`: the
/// capture signal is ours. Sets `table`'s USED_SIGPROF flag when SIGPROF asked it.
bool crumbs__capture_ask(uint32_t index, bool capture_usable, crumbs_crash_thread_table *table);
/// Asks slot `index`'s thread again when its first ask was deferred (`deferred`: it was inside
/// the capture handler then) and it has left the handler since: true when an answer is still to
/// be waited for. Call after reading `answered`, before waiting on it.
bool crumbs__capture_ask_again(uint32_t index, crumbs_crash_thread_table *table);
/// Waits (at most `timeout_ns`) until no thread but the caller (when it is inside the capture
/// handler itself: it crashed there) is left inside it from an earlier capture (`inside`).
void crumbs__capture_wait_for_leavers(uint64_t timeout_ns);
/// Whether some slot still waits for its answer (ASKED in this generation).
bool crumbs__capture_waiting(void);
/// Wakes whatever waits on any slot's word: a thread that parked for an earlier generation just
/// before a listing rewrote its slot (a crash taking over a live capture) goes back.
void crumbs__capture_wake_all(void);
/// Slot `index` still waiting for its answer becomes LATE (compare-exchange: exactly one side
/// wins against the answer). True when it did.
bool crumbs__capture_close(uint32_t index);
/// The stacks of the parked slots (and those being read where they block: `reading`) not
/// looked for yet: registered bounds that hold the SP (or the FP), else one read of
/// /proc/thread-self/maps for all of them.
void crumbs__capture_find_stacks(void);
/// Whether slot `slot`'s thread, whose status `facts` holds (read with its switch counts), is
/// blocked in a system call now: its syscall line noted (`blocked`, `switches`, `seccomp`) and
/// `reading` set, to be walked where it blocks (crumbs__capture_walk_blocked) once its stack is
/// found (crumbs__capture_find_stacks).
bool crumbs__capture_note_blocked(crumbs__capture_slot *slot, const crumbs__thread_facts *facts);
/// Walks slot `index` (`reading`) from where it blocks into `entry`, then reads its syscall line
/// and status again: true when it stayed in that same call the whole time (same line, still
/// asleep, not one context switch since the first reading), so the frames are those of a stack
/// that did not change (CAPTURED, CRUMBS_NOT_SIGNALLED_IN_SYSCALL, no registers). Otherwise the
/// entry is cleared.
bool crumbs__capture_walk_blocked(const crumbs__module_table *modules, uint32_t index,
                                  crumbs_crash_thread *entry);
/// Writes slot `index` into `entry`: an answered thread's registers and the walk of its stack
/// (crumbs__unwind over `record`'s modules, read only), or tid and name of one that did
/// not answer. Counts it into `table`. False for a GONE slot (nothing written).
bool crumbs__capture_write_entry(const crumbs__module_table *modules, uint32_t index,
                                 crumbs_crash_thread *entry, crumbs_crash_thread_table *table);
/// Lets slot `index`'s parked thread go (compare-exchange ANSWERED → RELEASED, then a futex
/// wake). True when it was parked there.
bool crumbs__capture_release_slot(uint32_t index);
/// Whether SIGPROF can ask threads in this capture: ours already, or taken now when nobody
/// handles it (then `sigprof_previous` keeps the action it replaced).
bool crumbs__capture_sigprof_usable(void);
/// Gives SIGPROF back its action from before a capture took it, unless another library set
/// its own since. Not for a signal still pending for some thread (SIG_DFL would kill it).
void crumbs__capture_sigprof_give_back(void);
/// The capture handler's action (SA_SIGINFO | SA_ONSTACK | SA_RESTART).
struct sigaction crumbs__capture_action(void);
/// Remembers that thread `tid` was sent `signal_number` by a live capture and had not run it
/// when the capture closed its slot (crumbs_thread_capture_signals.c).
void crumbs__capture_owe(uint32_t tid, int signal_number);
/// Whether a thread a live capture asked with `signal_number` and that never ran its handler
/// still has it pending (crumbs_thread_capture_live.c keeps them; forgets those that have not).
bool crumbs__capture_pending_somewhere(int signal_number);

#endif // CRUMBS_THREAD_CAPTURE_H
