// crumbs_threads.h — the face of threads/: what every room may know of the calling thread, the
// thread capture's entry points for the crash and for set-up, and this process's threads in
// /proc (docs/crash-capture.md#threads-every-other-thread). Internal to CrumbsSignalPath.
//
// ASYNC-SIGNAL-SAFE: every function declared here but where it says otherwise.

#ifndef CRUMBS_THREADS_H
#define CRUMBS_THREADS_H

#include "crumbs_crash_record.h"
#include "crumbs_live_capture.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

// MARK: - The calling thread

/// Per thread: depth inside the crash handler (re-entry detection), the original signal, and
/// stack bounds registered outside the handler (pthread_getattr_np, by install and
/// prepare_thread); `crash_context` is a thread's fault context while it waits in the crash
/// handler behind another crashing thread (the thread capture shows it instead of the capture
/// signal's context). Written by crash/ and process/, read by the thread capture.
typedef struct crumbs__thread_state {
  uint32_t depth;
  int original_signal;
  uint64_t stack_low;
  uint64_t stack_high;
  const void *volatile crash_context;
  /// The signal context of the thread capture handler running on this thread (NULL when none):
  /// asked again while still in it (SIGPROF, since the capture signal is blocked there), the
  /// thread answers with where the first one found it, not with the handler's own frames.
  const void *volatile capture_context;
  /// Runs of the capture handler on this thread (a second one nests inside the first when
  /// SIGPROF asks a thread in the capture signal's handler): a crash on this thread inside one
  /// does not wait for itself to leave (crumbs__capture_wait_for_leavers).
  uint32_t capture_depth;
  uint32_t capture_tid_entry; // 1 + its entry in crumbs__capture.inside_tids, 0 when none
} crumbs__thread_state;
extern __thread crumbs__thread_state crumbs__this_thread __attribute__((tls_model("initial-exec")));

// MARK: - Every thread (crumbs_thread_capture.c)

/// Takes the capture signal (the highest real-time signal nobody handles). Not signal-safe.
void crumbs__thread_capture_install(void);
/// Gives the capture signal back if it is still ours. Not signal-safe.
void crumbs__thread_capture_uninstall(void);
/// The capture signal in use, 0 when none. Any context.
int crumbs__thread_capture_signal(void);
/// The capture signal's handler, on every other thread.
void crumbs__capture_signal_handler(int signal_number, siginfo_t *info, void *context);
/// What follows the crash record, which decides what the threads asked for it do once walked.
typedef enum crumbs__after_record {
  /// The handler returns to a library that called it from its own handler, which may still want
  /// the threads (or recover): they are released.
  CRUMBS__AFTER_RECORD_RETURN = 0,
  /// Handlers chained after ours (the Swift runtime's backtracer), then the death: they stay
  /// parked until the process dies (CRUMBS_THREADS_KEPT_FOR_CHAIN), so no other thread runs the
  /// app's code after the fault.
  CRUMBS__AFTER_RECORD_CHAIN = 1,
  /// The death at once: they end as soon as they have answered (CRUMBS_THREADS_ENDED), or stay
  /// parked when a core dump or a tracer watches the death (CRUMBS_THREADS_KEPT_FOR_DUMP).
  CRUMBS__AFTER_RECORD_DEATH = 2,
} crumbs__after_record;

/// Crashing thread: lists the other threads into the record's table and asks each for its
/// registers; `after` says what they do once walked. Safe to call from a signal handler.
void crumbs__thread_capture_request(crumbs_crash_record *record, uint32_t own_tid,
                                    crumbs__after_record after);
/// Crashing thread, after its own backtrace: waits (bounded) for the answers, walks the parked
/// threads' stacks into the table, then releases them (or keeps them parked: see
/// crumbs__after_record). Safe to call from a signal handler.
void crumbs__thread_capture_collect(crumbs_crash_record *record);
/// Lets parked threads go (idempotent). Safe to call from a signal handler.
void crumbs__thread_capture_release(crumbs_crash_record *record);
/// A forked child's capture state: no live capture of the parent's other threads holds it.
/// Safe to call from a signal handler (atomic stores; the fork handler calls it).
void crumbs__thread_capture_forked(void);

// MARK: - This process's threads in /proc (crumbs_proc_threads.c)

/// Calls `thread` with each tid listed in /proc/self/task (open + getdents64, once) until it
/// returns false. Returns false when the directory cannot be read. Safe to call from a signal
/// handler (a static buffer: one caller at a time).
bool crumbs__proc_each_thread(bool (*thread)(uint32_t tid, void *context), void *context);
/// What a thread's /proc/self/task/<tid>/status says (crumbs__proc_thread_read).
typedef struct crumbs__thread_facts {
  char state;        // the State letter ('?' unread)
  uint32_t seccomp;  // Seccomp: 0 none, 1 strict, 2 filter
  uint64_t blocked;  // SigBlk (bit n - 1 for signal n)
  uint64_t pending;  // SigPnd: its own pending signals
  uint64_t switches; // voluntary + nonvoluntary context switches (when asked for)
  uint32_t found;    // which lines were seen (internal)
} crumbs__thread_facts;
/// Reads thread `tid`'s status into `facts`; `switches`: read on to the context-switch counts
/// at the file's end. False when it cannot be read (the thread exited) or holds neither State
/// nor SigBlk. Safe to call from a signal handler (crumbs__crash_each_line).
bool crumbs__proc_thread_read(uint32_t tid, bool switches, crumbs__thread_facts *facts);
/// A thread blocked in a system call, as /proc/self/task/<tid>/syscall shows it: the call's
/// number and arguments, and the user sp and pc the kernel saved at its entry.
typedef struct crumbs__blocked_syscall {
  int32_t number;
  uint64_t arguments[6];
  uint64_t sp, pc;
} crumbs__blocked_syscall;
/// Whether thread `tid` is blocked in a system call now (not "running", not blocked outside one,
/// as in a page fault): fills `out`. Safe to call from a signal handler (open, read, close;
/// a static buffer).
bool crumbs__proc_thread_syscall(uint32_t tid, crumbs__blocked_syscall *out);
/// Reads thread `tid`'s /proc/self/task/<tid>/syscall line into `text` (at most `size` bytes,
/// not NUL-terminated): the bytes read, 0 when it cannot be read. Safe to call from a signal
/// handler (open, read, close; a static path buffer).
size_t crumbs__proc_thread_syscall_text(uint32_t tid, char *text, size_t size);
/// Parses a syscall line (`length` bytes of `text`) into `out`: true for "NR A1 … A6 SP PC"
/// (blocked in a system call), false for "running", "-1 SP PC" or anything else. Pure; safe to
/// call from a signal handler (memset).
bool crumbs__proc_syscall_parse(const char *text, size_t length, crumbs__blocked_syscall *out);
/// A thread's scheduling state letter, blocked-signal mask and (when `pending` is not NULL) its
/// own pending signals (bit n - 1 for signal n), from /proc/self/task/<tid>/status read line by
/// line. False when it cannot be read (the thread exited) or holds neither line. Safe to call
/// from a signal handler (crumbs__crash_each_line).
bool crumbs__proc_thread_status(uint32_t tid, char *state, uint64_t *blocked, uint64_t *pending);
/// Reads /proc/self/task/<tid>/comm into `name` (16 bytes, NUL-terminated, newline dropped; ""
/// when unreadable). Safe to call from a signal handler (open, read, close).
void crumbs__proc_thread_name(uint32_t tid, char name[16]);
/// Whether someone will look at the process as the fatal signal leaves it: a core dump will be
/// written, or a tracer is attached. Safe to call from a signal handler (prctl, getrlimit,
/// open/read/close).
bool crumbs__proc_death_is_watched(void);
/// Calls once what the functions above call, so no lazy binding happens at crash time.
/// Not signal-safe (install).
void crumbs__proc_threads_resolve(void);

// MARK: - Waits at crash time (threads/crumbs_thread_waits.c)

/// Notes into `record->waits` what thread `tid` is blocked in (its syscall line) and, in a futex
/// call, the 16 bytes at the futex address (read through the kernel only). Call before the
/// thread is asked: once asked it waits in the capture instead. Safe to call from a signal
/// handler (open, read, close, syscall(SYS_process_vm_readv, SYS_gettid), clock_gettime).
void crumbs__thread_wait_note(crumbs_crash_record *record, uint32_t tid);
/// Reads the word at each of the crashing thread's registers (`record->registers`) that could
/// address a lock, and keeps those naming another thread of the table in their low 30 bits
/// (record->waits.candidates). Call once the thread table is written. Safe to call from a signal
/// handler (syscall(SYS_process_vm_readv, SYS_gettid)).
void crumbs__thread_wait_candidates(crumbs_crash_record *record);

// MARK: - The live capture (threads/crumbs_thread_capture_live.c)

/// crumbs_capture_threads_live (include/crumbs_live_capture.h) on `record`, the installed crash
/// record whose module table the unwinder uses (NULL: not installed).
int crumbs__thread_capture_live(const crumbs_crash_record *record, crumbs_crash_thread_table *out,
                                const crumbs_live_capture_options *options, crumbs_live_capture_stats *stats);

#endif // CRUMBS_THREADS_H
