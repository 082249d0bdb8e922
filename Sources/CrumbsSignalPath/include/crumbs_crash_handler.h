// crumbs_crash_handler.h — the crash handler: install, check, uninstall; and what it records.
//
// Why C: the handler runs inside a signal handler, after memory may be corrupt, where the Swift
// runtime (allocation, reference counting, locks) must not run.
//
// Entry points, in call order:
//   crumbs_crash_record_format        write the header of a fresh, zeroed record mapping (ARMED)
//   crumbs_crash_install              take the signals, give this thread an alternate stack,
//                                     scan modules into the record, find the Swift runtime's
//                                     fatal-message buffer, set the std::terminate handler;
//                                     tell which chained handlers get the first chance at a
//                                     fault (declared, or a recognised runtime's);
//                                     idempotent, re-asserts
//   crumbs_crash_prepare_thread       (any thread, optional) alternate stack + stack bounds;
//                                     every thread created after install runs it at its start
//   crumbs_crash_covers_new_threads   whether that start hook reaches every module's threads
//   crumbs_crash_refresh_modules      re-scan modules after dlopen/dlclose (cheap when unchanged)
//   crumbs_crash_replaced_signals     which of our signals another library has taken since
//   [crash] crumbs__crash_signal_handler  records, appends the fatal breadcrumb, writes the
//                                     termination message line when given a file
//                                     (crumbs_termination_message.h), chains, dies
//   crumbs_crash_uninstall            give every signal back its previous action
// Where they live: crumbs_crash_install.c (every function declared here), crumbs_crash_handler.c
// (the handler), crumbs_altstack.c (the alternate stacks), crumbs_unwind.c and crumbs_modules.c
// (backtrace and module table), crumbs_terminate.cpp (an uncaught C++ exception's type and
// what(), for the SIGABRT that follows); crash/crumbs_crash.h is what they share.
//
// SIGNAL SAFETY: only the handler itself and the ring's first-append hook (crumbs_altstack.c,
// which hands a thread its alternate stack) run in signal context; both are async-signal-safe
// (see their files for the libc they call). Every function declared here is set-up code:
// not signal-safe, call it from ordinary threads (they are not thread-safe against each other
// either: the Swift wrapper serializes them). The one exception is crumbs_crash_record_format,
// which the fork handler also calls in a forked child.
// The handler writes only a record and a ring whose header names getpid(): a child forked
// without our fork handler (vfork, clone, _Fork) still maps its parent's, and must not write
// them (crumbs_fork.h).
//
// Which threads have an alternate signal stack (needed to record a stack overflow; other crashes
// are recorded on the thread's own stack):
//   - the thread that calls crumbs_crash_install (normally the main thread);
//   - every thread created after install with pthread_create, by anyone (Dispatch's workers,
//     Swift concurrency's pool, a library's private threads): our pthread_create, which every
//     module's calls reach (crumbs_thread_start.c), gives the new thread one before its start
//     routine runs: from the pool, which grows by a chunk of stacks (one mapping, guards that do
//     not split it where the kernel has guard regions) when used up, so their number is not
//     bounded by the pool and each costs about 1/64 of a mapping (crumbs_altstack.c);
//   - every thread that appends a breadcrumb, on its first append (the ring's once-per-thread
//     slow path calls our hook), from a pool prepared at install: one sigaltstack call, no scan;
//     a thread's stack returns to the pool when it exits;
//   - every thread that calls crumbs_crash_prepare_thread (pool, grown when used up).
// Left without one: a thread that existed before install and neither appends nor prepares,
// while the pool is used up (its first append cannot map a stack: signal-safe); a thread made
// by raw clone() or started by libc itself (thrd_create, SIGEV_THREAD timers: see
// crumbs_thread_start.c). A stack overflow there kills the process by SIGSEGV without a record.

#ifndef CRUMBS_CRASH_HANDLER_H
#define CRUMBS_CRASH_HANDLER_H

#include "crumbs_crash_record.h"
#include "crumbs_fork.h"
#include "crumbs_ring_append.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What to install. The record mapping must stay valid until crumbs_crash_uninstall; the ring
/// handle (not copied) and its mapping for the process's life, since a handler already running
/// on another thread may still use them (BreadcrumbRing keeps both: see crumbs_ring_install).
typedef struct crumbs_crash_config {
  crumbs_crash_record *record; // a formatted record mapping (crumbs_crash_record_format)
  /// The record's file (copied; at most CRUMBS_RING_FILE_PATH_SIZE - 1 bytes, else ""), which
  /// crumbs_crash_record_path returns; a forked child's is its own (crumbs_fork.h).
  const char *record_path;
  const crumbs_ring *ring;          // where the final fatal breadcrumb goes; may be NULL
  uint64_t signal_mask;             // bit (1 << signo) for each signal to catch (signo < 64)
  uint32_t altstack_size;           // bytes per alternate stack; 0: 64 KiB
  uint32_t altstack_pool_count;     // alternate stacks for other threads; 0: 64 (max 1024)
  uint32_t wait_for_first_crash_ms; // a second crashing thread waits at most this; 0: 3000
  /// 0: every thread created after install gets an alternate stack at its start (our
  /// pthread_create, crumbs_thread_start.c); 1: only on its first append or prepare_thread.
  uint32_t skip_new_threads;
  /// Alternate stacks whose guard page install sets; the others' wait for
  /// crumbs_crash_guard_alternate_stacks. 0: all at install.
  uint32_t eager_stack_guards;
  /// Handlers the app declares fix their own faults and return, as crashpad's first-chance
  /// handler is declared: each the address given to sigaction (sa_sigaction or sa_handler). A
  /// fault goes to such a handler before anything is recorded (crumbs_crash_handler.c, "First
  /// chance"); every other handler but the recognised runtimes' is called after the record.
  /// At most CRUMBS_CRASH_MAX_FIRST_CHANCE_HANDLERS are kept (copied).
  const uint64_t *first_chance_handlers;
  uint32_t first_chance_handler_count;
  /// Modules whose handlers the app declares recover, beside the recognised runtimes: base
  /// names (or their beginnings: "libmyvm.so"), separated by ':'. NULL or "": none. Copied, at
  /// most CRUMBS_CRASH_FIRST_CHANCE_MODULES_SIZE - 1 bytes (longer: none).
  const char *first_chance_modules;
} crumbs_crash_config;

/// Declared first-chance handlers kept (crumbs_crash_config.first_chance_handlers).
#define CRUMBS_CRASH_MAX_FIRST_CHANCE_HANDLERS 16u
/// Bytes kept of crumbs_crash_config.first_chance_modules, its NUL included.
#define CRUMBS_CRASH_FIRST_CHANCE_MODULES_SIZE 512u

/// Errors of crumbs_crash_install (0 is success).
enum {
  CRUMBS_CRASH_INSTALL_OK = 0,
  CRUMBS_CRASH_INSTALL_BAD_RECORD = 1,       // not a formatted record
  CRUMBS_CRASH_INSTALL_ALTSTACK_FAILED = 2,  // mmap of the alternate stacks failed (errno)
  CRUMBS_CRASH_INSTALL_SIGACTION_FAILED = 3, // sigaction failed (errno)
  CRUMBS_CRASH_INSTALL_BAD_SIGNALS = 4,      // empty mask or a signal that cannot be caught
};

/// Sets the guard pages of the alternate stacks that install left for later (see
/// crumbs_crash_config.eager_stack_guards). Idempotent; any thread. Not signal-safe.
void crumbs_crash_guard_alternate_stacks(void);

/// Writes the header of a fresh zero-filled record: magic, version, sizes, identity, state
/// ARMED. Safe to call from a signal handler (memcpy, clock_gettime), which the fork handler
/// relies on in a forked child (crumbs_fork.h); otherwise set-up code.
void crumbs_crash_record_format(crumbs_crash_record *record, uint32_t pid, const uint8_t session_id[16],
                                const uint8_t boot_id[16], uint64_t process_start_boottime_ns);

/// Installs (or re-asserts) the handler. Idempotent: a second call with the same record only
/// re-takes signals another library replaced since; with another record or ring it switches
/// to them. The previous actions saved by the first install are kept (and chained to).
/// Returns a CRUMBS_CRASH_INSTALL_* code (errno is set for the system failures).
/// Not signal-safe.
int crumbs_crash_install(const crumbs_crash_config *config);

/// The file of the record the handler writes: the one install was given, or in a forked child
/// the child's own (crumbs_fork.h); "" when not installed, or in a forked child that could not
/// make one (its crashes are then not recorded). Not signal-safe (meant for set-up threads).
const char *crumbs_crash_record_path(void);

/// Bit set (1 << signo) of the signals we installed whose current action is no longer ours;
/// once a crash of this process began, what the record kept when it began (the handlers chained
/// after it change actions while the process dies). Not signal-safe (sigaction only, but meant
/// for ordinary threads).
uint64_t crumbs_crash_replaced_signals(void);

/// Gives the calling thread an alternate signal stack from the pool, grown by a chunk when it
/// is used up (unless it has one of at least our size), and records its stack bounds
/// (pthread_getattr_np: allocates, not signal-safe). Returns true when the thread has an
/// alternate stack afterwards. Thread-safe (every new thread calls it at its start).
bool crumbs_crash_prepare_thread(void);

/// Whether every thread created from now on, by any module, gets an alternate stack at its
/// start: installed without `skip_new_threads`, and our pthread_create is the one the dynamic
/// linker gives every module, or the program is linked statically (crumbs_thread_start.c).
/// Not signal-safe (dlsym).
bool crumbs_crash_covers_new_threads(void);

/// Re-scans the loaded modules into the record when dlopen/dlclose changed them since the last
/// scan (or always with `force`). Returns the number of modules in the table. Not signal-safe
/// (dl_iterate_phdr takes the loader lock).
uint32_t crumbs_crash_refresh_modules(bool force);

/// Restores the previous action of every signal still ours, the install thread's previous
/// alternate stack, and stops handing out alternate stacks. The pool stays mapped: threads may
/// still point their alternate stack at it. A crash being recorded on another thread keeps
/// what it uses: the capture's two signals stay ours while it holds the capture (waited for at
/// most the capture's own bound, then left as they are), and the return value says the record
/// holds a crash (its state is no longer ARMED): the caller keeps the record file then, for the
/// next launch. Not signal-safe.
bool crumbs_crash_uninstall(void);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_CRASH_HANDLER_H
