// crumbs_crash_internal.h — what the crash-capture C files share and Swift need not see: the
// state install prepares for the handler, the per-thread state, and the unwinder and module
// table functions. Internal to CrumbsSignalPath (not in include/, so not imported by Swift).
//
// The files of crash capture, one idea each:
//   crumbs_crash_install.c   install, re-assert, refresh modules, uninstall (set-up, not signal-safe)
//   crumbs_crash_handler.c   the fatal-signal handler: when to record, whom to call (async-signal-safe)
//   crumbs_crash_record_write.c  what the record holds, written by the crashing thread
//   crumbs_crash_state.c     the state install prepares and each thread's crash state (data)
//   crumbs_signal_watch.c    sigaction/signal in front of the next definition (a preloaded
//                            interposer, else libc's): a crash signal's action set by another
//                            library is noticed when it happens; libc's own sigaction for
//                            code in signal handlers is crumbs_libc_sigaction.c
//   crumbs_altstack.c        the alternate signal stacks (pool, first-append hook)
//   crumbs_unwind.c          the crashing thread's backtrace (async-signal-safe); its pieces
//                            crumbs_unwind_memory.c, crumbs_unwind_async.c, crumbs_unwind_scan.c
//                            (crumbs_unwind.h)
//   crumbs_thread_capture.c  every other thread's registers and stack (capture signal, parked
//                            threads; async-signal-safe but for install), shared by the crash
//                            (crumbs_thread_capture_crash.c) and the live capture
//                            (crumbs_thread_capture_live.c); crumbs_thread_capture.h
//   crumbs_context.c         every read of a signal context (ucontext_t) and of a clock
//                            (crumbs_context.h)
//   crumbs_maps.c            /proc/self/maps, read in the handler (async-signal-safe)
//   crumbs_proc_threads.c    /proc/self/task: the threads, their state and names, and whether a
//                            core dump or a tracer watches the death (async-signal-safe)
//   crumbs_modules.c         the module table (scan at set-up; lookups and crash-time additions
//                            in the handler)
//   crumbs_stack_capture.c   the calling thread's backtrace, for non-fatal reports
//   crumbs_termination_message.c  the one line for the orchestrator after the record, named
//                            from the executable's symbols (crumbs_elf_symbol.c)
//   crumbs_terminate.cpp     the std::terminate handler: an uncaught C++ exception's type and
//                            what(), kept for the handler (crumbs_terminate.h)

#ifndef CRUMBS_CRASH_INTERNAL_H
#define CRUMBS_CRASH_INTERNAL_H

#include "unwind/crumbs_cfi.h"
#include "kit/crumbs_context.h"
#include "crumbs_crash_handler.h"

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
  crumbs_crash_record *volatile record; // NULL when not installed
  const crumbs_ring *volatile ring;     // the installer's handle (immortal), or NULL
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
  uint32_t wait_ms;    // how long a second crashing thread waits for the first
  /// The Swift runtime's `std::atomic<const char *>` holding its last fatal-error message
  /// (swift_getFatalErrorMessageBuffer, looked up with dlsym at install); NULL without a Swift
  /// runtime. The handler loads the pointer and copies a bounded prefix of the text.
  const char *const *swift_fatal_message;
  char record_path[CRUMBS_RING_FILE_PATH_SIZE]; // `record`'s file; a forked child rewrites it
} crumbs__crash_state;
extern crumbs__crash_state crumbs__crash_installed;

/// Per thread: depth inside our handler (re-entry detection), the original signal, and stack
/// bounds registered outside the handler (pthread_getattr_np, by install and prepare_thread);
/// `crash_context` is a thread's fault context while it waits in the handler behind another
/// crashing thread (the thread capture shows it instead of the capture signal's context).
///
/// `chain_*` describe a handler we are calling from ours on this thread (the first chance, or
/// the chain after a record), so a re-entry from inside it can tell "it passed the signal on to
/// us" or "it gave up" from a crash of our own handler; `chain_frame` is our frame's address,
/// to tell such a re-entry (deeper on the same stack) from a fresh signal after the handler we
/// called left by longjmp (at or above it).
typedef struct crumbs__crash_thread {
  uint32_t depth;
  int original_signal;
  uint64_t stack_low;
  uint64_t stack_high;
  const void *volatile crash_context;
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
  /// The signal context of the thread capture handler running on this thread (NULL when none):
  /// asked again while still in it (SIGPROF, since the capture signal is blocked there), the
  /// thread answers with where the first one found it, not with the handler's own frames.
  const void *volatile capture_context;
  /// Runs of the capture handler on this thread (a second one nests inside the first when
  /// SIGPROF asks a thread in the capture signal's handler): a crash on this thread inside one
  /// does not wait for itself to leave (crumbs__capture_wait_for_leavers).
  uint32_t capture_depth;
  uint32_t capture_tid_entry; // 1 + its entry in crumbs__capture.inside_tids, 0 when none
} crumbs__crash_thread;

/// `crumbs__crash_thread.chain_stage`.
typedef enum crumbs__chain_stage {
  CRUMBS__CHAIN_NONE = 0,
  CRUMBS__CHAIN_FIRST_CHANCE = 1, // calling a handler that may recover, nothing recorded yet
  CRUMBS__CHAIN_AFTER_RECORD = 2, // calling the handlers after the record, before the death
} crumbs__chain_stage;
extern __thread crumbs__crash_thread crumbs__crash_this_thread
    __attribute__((tls_model("initial-exec")));

/// The fatal-signal handler (installed with SA_SIGINFO | SA_ONSTACK | SA_NODEFER).
void crumbs__crash_signal_handler(int signal_number, siginfo_t *info, void *context);

/// Whether `action` is our crash handler. Safe to call from a signal handler (pure).
bool crumbs__crash_is_ours(const struct sigaction *action);

/// Called by crumbs_signal_watch.c after `signal_number`'s action was set to `action` by anyone:
/// for a signal install took, outside our handler, marks it replaced in the record (or no longer
/// replaced, when the action is ours); inside a first chance on this thread, an action set to
/// SIG_DFL or SIG_IGN for the signal being chained means the handler gave up, and the crash is
/// recorded at once. Safe to call from a signal handler (getpid, atomics; the crash record).
void crumbs__crash_note_action(int signal_number, const struct sigaction *action);

// MARK: - The record (crumbs_crash_record_write.c)

/// The installed record, unless it is another process's: a child forked without our fork
/// handler (vfork, clone, _Fork) still maps its parent's, and must not write it. Safe to call
/// from a signal handler (getpid).
crumbs_crash_record *crumbs__crash_own_record(void);
/// Writes the whole record of the crash `signal_number` on the calling thread (the first crash's
/// winner), ending with the complete marker. `process_ends`: nothing runs after the record
/// (crumbs__thread_capture_request). Safe to call from a signal handler.
void crumbs__crash_write_record(crumbs_crash_record *record, int signal_number, siginfo_t *info,
                                void *context, uint32_t thread_id, uint64_t started_ns, bool process_ends);
/// The handler's duration, state COMPLETE and the complete marker, last (release). Safe to
/// call from a signal handler.
void crumbs__crash_finish_record(crumbs_crash_record *record, uint64_t started_ns);

/// Writes the termination message line for the complete `record` when a file was given
/// (crumbs_termination_message.h); nothing otherwise. Safe to call from a signal handler
/// (crumbs_termination_message.c lists its calls).
void crumbs__termination_message_write(const crumbs_crash_record *record);

// MARK: - Every thread (crumbs_thread_capture.c)

/// Takes the capture signal (the highest real-time signal nobody handles). Not signal-safe.
void crumbs__thread_capture_install(void);
/// Gives the capture signal back if it is still ours. Not signal-safe.
void crumbs__thread_capture_uninstall(void);
/// The capture signal in use, 0 when none. Any context.
int crumbs__thread_capture_signal(void);
/// The capture signal's handler, on every other thread.
void crumbs__capture_signal_handler(int signal_number, siginfo_t *info, void *context);
/// Crashing thread: lists the other threads into the record's table and asks each for its
/// registers. `process_ends`: nothing is chained after the crash handler, so the process dies
/// once the record is written; the asked threads then end as soon as they have answered instead
/// of parking until released (CRUMBS_THREADS_ENDED). Safe to call from a signal handler.
void crumbs__thread_capture_request(crumbs_crash_record *record, uint32_t own_tid, bool process_ends);
/// Crashing thread, after its own backtrace: waits (bounded) for the answers, walks the parked
/// threads' stacks into the table, then releases them (or, when `process_ends` was asked but a
/// core dump or a tracer watches the death, keeps them parked: CRUMBS_THREADS_KEPT_FOR_DUMP).
/// Safe to call from a signal handler.
void crumbs__thread_capture_collect(crumbs_crash_record *record);
/// Lets parked threads go (idempotent). Safe to call from a signal handler.
void crumbs__thread_capture_release(crumbs_crash_record *record);
/// A forked child's capture state: no live capture of the parent's other threads holds it.
/// Safe to call from a signal handler (atomic stores; the fork handler calls it).
void crumbs__thread_capture_forked(void);

// MARK: - Unwinder (crumbs_unwind.c and its pieces: crumbs_unwind.h)

/// Walks frame pointers from (pc, fp) within [low, high): frames[0] = pc, then return
/// addresses. Returns the count; `stop` gets a crumbs_crash_backtrace_stop.
/// Safe to call from a signal handler (reads memory only inside [low, high)).
uint32_t crumbs__crash_walk_frames(uint64_t pc, uint64_t fp, uint64_t sp, uint64_t low,
                                   uint64_t high, uint64_t *frames, uint32_t capacity,
                                   uint32_t *stop);
/// Whether `address` is a return address: in a module's text, right after a call instruction
/// (crumbs_unwind_scan.c). Safe to call from a signal handler (reads only that module's text).
bool crumbs__crash_is_return_address(const crumbs_crash_record *record, uint64_t address);
/// The backtrace of the thread whose registers are `registers` and whose stack is [low, high):
/// frames[0] = pc, then return addresses (and async resume points), innermost first, with
/// marks[i] the CRUMBS_FRAME_* bits saying how frame i was found. Uses `record`'s module table
/// and the CFI recorded with it (crumbs_unwind.c has the order of methods). Returns the count;
/// `stop` gets a crumbs_crash_backtrace_stop. Any thread's registers will do (the crashing
/// thread's from the handler's context, another thread's from its own signal context).
/// Safe to call from a signal handler (see crumbs_unwind.c for what it reads and calls).
uint32_t crumbs__crash_unwind(const crumbs_crash_record *record, const crumbs__unwind_registers *registers,
                              uint64_t low, uint64_t high, uint64_t *frames, uint8_t *marks,
                              uint32_t capacity, uint32_t *stop);
/// Copies `size` bytes at `address` of this process without ever faulting
/// (crumbs_unwind_memory.c): through process_vm_readv (EFAULT for unmapped memory and guard
/// regions, which /proc/self/maps does not show), or, where the kernel refuses that call
/// (seccomp, ENOSYS), by plain loads. Safe to call from a signal handler (syscall(SYS_process_vm_readv, SYS_gettid)).
bool crumbs__crash_read_memory(uint64_t address, void *out, size_t size);
/// The lowest address of a stack [low, high) that holds `probe` (an SP or a fault address) once
/// the unreadable pages at and right above the probe are left out: a guard region inside the
/// mapping (MADV_GUARD_INSTALL) is not part of the stack. `low` when the probe's page reads or
/// the probe is outside. Safe to call from a signal handler (crumbs__crash_read_memory).
uint64_t crumbs__crash_readable_floor(uint64_t low, uint64_t high, uint64_t probe);
/// An address in the Swift concurrency runtime (swift_job_run, found with dlsym at install), 0
/// without one: async frames are those it resumes (crumbs_unwind_async.c).
extern uint64_t crumbs__unwind_concurrency_runtime;

// MARK: - /proc/self/maps (crumbs_maps.c)

/// One line of /proc/self/maps, parsed in place.
typedef struct crumbs__maps_entry {
  uint64_t start, end; // [start, end)
  uint64_t offset;     // in the file
  uint64_t device;     // major << 32 | minor
  uint64_t inode;      // 0 for anonymous mappings
  char perms[4];       // "r-xp"
  const char *path;    // into the line, not NUL-terminated; path_length 0 when anonymous
  size_t path_length;
} crumbs__maps_entry;

/// Calls `line` with each line of /proc/self/maps (without its newline; a line longer than the
/// internal buffer is cut) until it returns false. Returns false when the file cannot be read.
/// Safe to call from a signal handler (open/read/close into static buffers: not reentrant, one
/// caller at a time, which the handler's first-crash-wins rule gives).
bool crumbs__crash_each_maps_line(bool (*line)(const char *text, size_t length, void *context),
                                  void *context);
/// Calls `line` with each line of the file at `path` (a /proc file: read in chunks, so a line of
/// any length is seen, cut to the internal buffer), until it returns false. Returns false when
/// the file cannot be opened. Safe to call from a signal handler (same static buffers as
/// crumbs__crash_each_maps_line: one caller at a time, never nested).
bool crumbs__crash_each_line(const char *path, bool (*line)(const char *text, size_t length, void *context),
                             void *context);
/// Parses one maps line. Safe to call from a signal handler (pure).
bool crumbs__crash_parse_maps_line(const char *line, size_t length, crumbs__maps_entry *entry);
/// The readable mapping holding `address`, from /proc/self/maps. Safe to call from a signal
/// handler (see crumbs__crash_each_maps_line).
bool crumbs__crash_mapping_containing(uint64_t address, uint64_t *start, uint64_t *end);
/// The protection (PROT_READ | PROT_WRITE | PROT_EXEC bits) /proc/self/maps gives the mapping
/// holding `address`, or -1 when none does (or the file cannot be read). Safe to call from a
/// signal handler on any number of threads at once (open, read, close; a buffer on the stack,
/// not the static ones above).
int crumbs__crash_mapping_protection(uint64_t address);

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

// MARK: - Module table (crumbs_modules.c)

/// Where module row i's .eh_frame_hdr is loaded, and the readable segment [low, high) holding it
/// (and, in every linker's output, .eh_frame too). header 0: the module has none.
typedef struct crumbs__module_cfi {
  uint64_t header, low, high;
} crumbs__module_cfi;
/// One per row of the record's module table, written with the row (scan, crash-time additions).
extern crumbs__module_cfi crumbs__crash_module_cfi[CRUMBS_CRASH_MAX_MODULES];

/// Scans loaded modules into `record` (dl_iterate_phdr). Not signal-safe.
uint32_t crumbs__crash_scan_modules(crumbs_crash_record *record, uint32_t *adds_seen);
/// dl_iterate_phdr's current load counter (dlpi_adds + dlpi_subs). Not signal-safe.
uint64_t crumbs__crash_module_changes(void);
/// The module whose executable range holds `address`, or -1; at crash time only a row checked
/// present (crumbs__crash_check_modules). Safe to call from a signal handler.
int crumbs__crash_module_for_text(const crumbs_crash_record *record, uint64_t address);
/// Starts checking `record`'s rows at crash time: from now on a lookup
/// (crumbs__crash_module_for_text) checks the row it lands in, once, and flags it
/// CRUMBS_CRASH_MODULE_UNLOADED and skips it when its library is gone (its text unreadable, or
/// another build ID mapped there), so the handler never reads an unloaded library's text or
/// CFI. Safe to call from a signal handler (memset; the lookups: crumbs__crash_read_memory).
void crumbs__crash_check_modules(crumbs_crash_record *record);
/// crumbs__crash_check_modules for a live capture: rows are checked the same way, but a row
/// found unloaded is only skipped, not flagged in the record (which it never writes), until
/// crumbs__crash_check_modules_stop. Safe to call from a signal handler (memset).
void crumbs__crash_check_modules_read_only(const crumbs_crash_record *record);
/// Ends crumbs__crash_check_modules_read_only: lookups trust every row again.
void crumbs__crash_check_modules_stop(void);
/// The CFI region and .eh_frame_hdr of the module whose text holds `address`: false when the
/// module has none. Safe to call from a signal handler (crumbs__crash_module_for_text).
bool crumbs__crash_module_cfi_for(const crumbs_crash_record *record, uint64_t address,
                                  crumbs__cfi_region *region, uint64_t *header);
/// Start of the function holding `address` according to its module's FDE table, or 0. Safe to
/// call from a signal handler (loads inside the module's .eh_frame_hdr segment only).
uint64_t crumbs__crash_function_start(const crumbs_crash_record *record, uint64_t address);
/// Adds to `record`'s module table every module holding one of `addresses` that the table lacks
/// (a library loaded after the last scan), as /proc/self/maps and the module's mapped ELF
/// headers describe it, flagged CRUMBS_CRASH_MODULE_FOUND_AT_CRASH; takes the table's seqlock
/// (does nothing while a refresh holds it). Returns how many it added. Safe to call from a
/// signal handler (crumbs__crash_each_maps_line; loads only from mappings the maps file says
/// are readable).
uint32_t crumbs__crash_add_modules_at_crash(crumbs_crash_record *record, const uint64_t *addresses,
                                            uint32_t count);

#endif // CRUMBS_CRASH_INTERNAL_H
