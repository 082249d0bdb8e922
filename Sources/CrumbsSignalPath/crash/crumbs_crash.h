// crumbs_crash.h — the face of crash/: the state install prepares for the handler, the
// handler's per-thread chain state, the handler and the record it writes
// (docs/crash-capture.md#crash-the-handler-and-its-record). Internal to CrumbsSignalPath.
//
// ASYNC-SIGNAL-SAFE: every function declared here but where it says otherwise.

#ifndef CRUMBS_CRASH_H
#define CRUMBS_CRASH_H

#include "crumbs_crash_handler.h"
#include "threads/crumbs_threads.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Signals 1…63 (a mask bit each).
#define CRUMBS__CRASH_MAX_SIGNAL 64

// MARK: - Installed state and per-thread state (crumbs_crash_state.c defines them)

/// What install prepared for the handler. Written by install and uninstall (ordinary threads,
/// serialized by the Swift wrapper); read by the handler on any thread. `record` and `ring` are
/// published with release stores and read once per crash; the rest is written before them.
typedef struct crumbs__crash_state {
  crumbs_crash_record *volatile record;                // NULL when not installed
  const crumbs_ring *volatile ring;                    // the installer's handle (immortal), or NULL
  struct sigaction previous[CRUMBS__CRASH_MAX_SIGNAL]; // the actions before ours
  /// The action of a library that replaced ours after install, kept when install takes the
  /// signal back (it chains to us, and may recover its own faults); sa_handler SIG_DFL: none.
  struct sigaction replacer[CRUMBS__CRASH_MAX_SIGNAL];
  /// A bit per signal whose `previous` (`replacer`) action is known to recover a fault and
  /// return — declared by the app, or a recognised runtime's (crumbs_crash_install.c): it is
  /// called first for a fault the kernel raised, and a crash is recorded only if it gives up
  /// or loops (crumbs_crash_handler.c, "First chance"). Any other handler is called after the
  /// record. Atomic: every install classifies them again.
  uint64_t previous_may_recover;
  uint64_t replacer_may_recover;
  /// What the app declared (crumbs_crash_config.first_chance_*), kept by install.
  uint64_t first_chance_handlers[CRUMBS_CRASH_MAX_FIRST_CHANCE_HANDLERS];
  uint32_t first_chance_handler_count;
  char first_chance_modules[CRUMBS_CRASH_FIRST_CHANCE_MODULES_SIZE];
  /// The signals install took (atomic: crumbs_signal_watch.c reads it on any thread).
  uint64_t installed_mask;
  /// An address in the Swift runtime's code (dlsym at install), 0 without one found: an action
  /// whose handler is in the same module is the Swift runtime's backtracer, which never recovers.
  uint64_t swift_runtime_address;
  uint32_t wait_ms; // how long a second crashing thread waits for the first
  /// The Swift runtime's `std::atomic<const char *>` holding its last fatal-error message
  /// (swift_getFatalErrorMessageBuffer, looked up with dlsym at install); NULL without a Swift
  /// runtime. The handler loads the pointer and copies a bounded prefix of the text.
  const char *const *swift_fatal_message;
  char record_path[CRUMBS_RING_FILE_PATH_SIZE]; // `record`'s file; a forked child rewrites it
} crumbs__crash_state;
extern crumbs__crash_state crumbs__crash_installed;

/// Per thread, the crash handler's own: `chain_*` describe a handler we are calling from ours on
/// this thread (the first chance, or the chain after a record), so a re-entry from inside it can
/// tell "it passed the signal on to us" or "it gave up" from a crash of our own handler;
/// `chain_frame` is our frame's address, to tell such a re-entry (deeper on the same stack) from
/// a fresh signal after the handler we called left by longjmp (at or above it). What the thread
/// capture reads too (depth, original signal, stack bounds) is crumbs__this_thread
/// (threads/crumbs_threads.h).
typedef struct crumbs__crash_thread {
  uint32_t chain_stage; // crumbs__chain_stage
  int chain_signal;
  uint32_t chain_next; // the first chain entry not yet called (0: replacer, 1: previous, 2: none)
  siginfo_t *chain_info;
  void *chain_context;
  uintptr_t chain_frame;
  uint64_t chain_started_ns;
  uint32_t chain_tid; // the kernel thread calling it: a raw clone() shares this TLS (the Swift
                      // backtracer's memory server does), and is not that thread
  /// A first chance on this thread counted in the record's first_chance.calling (1), not yet
  /// taken back. The last fault a first chance returned from with the pc unchanged (signal,
  /// pc, address), how many times in a row, and at which count the access is checked next;
  /// `looped`: the fault being recorded is such a loop (crumbs__first_chance_loops).
  uint32_t first_chance_marked;
  int loop_signal;
  uint64_t loop_pc;
  uint64_t loop_address;
  uint32_t loop_repeats;
  uint32_t loop_check_at;
  uint32_t looped;
} crumbs__crash_thread;

/// `crumbs__crash_thread.chain_stage`.
typedef enum crumbs__chain_stage {
  CRUMBS__CHAIN_NONE = 0,
  CRUMBS__CHAIN_FIRST_CHANCE = 1, // calling a handler that may recover, nothing recorded yet
  CRUMBS__CHAIN_AFTER_RECORD = 2, // calling the handlers after the record, before the death
} crumbs__chain_stage;
extern __thread crumbs__crash_thread crumbs__crash_this_thread __attribute__((tls_model("initial-exec")));

/// The fatal-signal handler (installed with SA_SIGINFO | SA_ONSTACK | SA_NODEFER).
void crumbs__crash_signal_handler(int signal_number, siginfo_t *info, void *context);

/// Whether a crash of this process has begun its record (the record's state left ARMED): the
/// process is dying, and whatever happens from here on (handlers chained after the record
/// changing signal actions, their helper processes ending) is part of its death, not of its
/// life. Safe to call from a signal handler (getpid, atomics).
bool crumbs__crash_started(void);

/// Whether `action` is our crash handler. Safe to call from a signal handler (pure).
bool crumbs__crash_is_ours(const struct sigaction *action);

/// Called by crumbs_signal_watch.c after `signal_number`'s action was set to `action` by anyone:
/// for a signal install took, outside our handler and before any crash began, marks it replaced
/// in the record (or no longer replaced, when the action is ours); inside a first chance on this
/// thread, an action set to SIG_DFL or SIG_IGN for the signal being chained means the handler
/// gave up, and the crash is recorded at once. Safe to call from a signal handler (getpid,
/// atomics; the crash record).
void crumbs__crash_note_action(int signal_number, const struct sigaction *action);

// MARK: - The record (crumbs_crash_record_write.c)

/// The installed record, unless it is another process's: a child forked without our fork
/// handler (vfork, clone, _Fork) still maps its parent's, and must not write it. Safe to call
/// from a signal handler (getpid).
crumbs_crash_record *crumbs__crash_own_record(void);
/// Writes the whole record of the crash `signal_number` on the calling thread (the first crash's
/// winner), ending with the complete marker. `after`: what follows the record, which decides
/// what the other threads do once walked (crumbs__thread_capture_request). Safe to call from a
/// signal handler.
void crumbs__crash_write_record(crumbs_crash_record *record, int signal_number, siginfo_t *info,
                                void *context, uint32_t thread_id, uint64_t started_ns,
                                crumbs__after_record after);
/// The handler's duration, state COMPLETE and the complete marker, last (release). Safe to
/// call from a signal handler.
void crumbs__crash_finish_record(crumbs_crash_record *record, uint64_t started_ns);

/// Writes the termination message line for the complete `record` when a file was given
/// (crumbs_termination_message.h); nothing otherwise. Safe to call from a signal handler
/// (crumbs_termination_message.c lists its calls).
void crumbs__termination_message_write(const crumbs_crash_record *record);

#endif // CRUMBS_CRASH_H
