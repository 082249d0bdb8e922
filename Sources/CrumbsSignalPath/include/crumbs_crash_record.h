// crumbs_crash_record.h — THE persisted layout of a Crumbs crash record file. Defined once, here.
//
// Why C: the record is written by the crash handler (C, inside a signal handler) into a file
// mapping prepared at install time, and read after the fact by Swift (`CrashRecord`), which
// imports these structs and never re-declares a byte of them. Sizes and the offsets readers
// depend on are pinned with _Static_assert: the layout is persisted, so changing one is a
// format version change.
//
// The file. Created at install next to the ring (`rings/<session>.crash` beside
// `rings/<session>.ring`, same 0700 directory, mode 0600), sized with posix_fallocate and mapped
// MAP_SHARED, so the handler only ever writes memory: no open(), no write(), nothing that can
// meet a full or read-only disk or block at crash time. A full or read-only disk is an
// install-time error the application sees. The kernel's page cache keeps what the handler wrote
// when the process dies; only a machine crash in the next seconds can lose it.
//
// Lifecycle of `state` (and how the next launch reads it):
//   ARMED     formatted at install; the handler never ran: no crash
//   WRITING   the handler started and did not finish (killed, or another crashing thread gave
//             up waiting for it): fields may be missing, `complete_marker` is 0
//   COMPLETE  the handler finished; `complete_marker` == CRUMBS_CRASH_COMPLETE_MARKER, stored
//             last with release ordering. CRUMBS_CRASH_FLAG_PARTIAL in `flags` says the handler
//             itself crashed part way and only a minimal record was finished (nested_* fields).
//
// File layout (little-endian, the only byte order Crumbs runs on):
//   offset 0       crumbs_crash_record header fields (2048 bytes, below)
//   offset 2048    crumbs_crash_module[CRUMBS_CRASH_MAX_MODULES], 336 bytes each
//   offset 88064   crumbs_crash_message (2048 bytes, since version 2): what the Swift runtime or
//                  an uncaught C++ exception said before the signal
//   offset 90112   crumbs_crash_thread_table (since version 3): every thread of the process at
//                  crash time, 64 bytes of counts, then CRUMBS_CRASH_MAX_THREADS entries of
//                  1024 bytes; entry 0 is the crashing thread (crumbs_thread_capture.c)
//   offset 352320  crumbs_crash_wait_table (since version 4): what each other thread was blocked
//                  in (its /proc/self/task/<tid>/syscall line) and, in a futex call, the words at
//                  the lock's address; and the lock words the crashing thread's registers point at
// Version 1 files end after the module table (88,064 bytes, in a 90,112-byte file), version 2
// files after the message (90,112 bytes), version 3 after the thread table (352,320 bytes); a
// reader accepts all four, and finds no message in a version 1 file, no thread table before
// version 3 and no waits before version 4.
// The module table is written at install and on refresh, under a seqlock (`module_generation`,
// odd while a refresh rewrites it); the handler only appends rows for modules loaded since the
// last scan that hold a frame, taking the same seqlock (crumbs_modules.c).

#ifndef CRUMBS_CRASH_RECORD_H
#define CRUMBS_CRASH_RECORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// "CRUMBCRS" read as a little-endian u64.
#define CRUMBS_CRASH_RECORD_MAGIC 0x535243424D555243ULL
/// "CRUMBEND": stored last, when the handler has finished the record.
#define CRUMBS_CRASH_COMPLETE_MARKER 0x444E45424D555243ULL
/// Bumped on any change to this file's structs that a reader of the previous version would
/// misread. A flag bit or a field carved out of a reserved one (always zero in earlier files),
/// whose zero means "not set", keeps the version: `crumbs_crash_module.flags` and
/// CRUMBS_CRASH_FLAG_MODULES_ADDED_AT_CRASH were added that way (an older reader sees the added
/// modules as ordinary rows, which they are).
/// Version 2 appended `message` (crumbs_crash_message) after the module table; version 3
/// appended `threads` (crumbs_crash_thread_table) after it; version 4 appended `waits`
/// (crumbs_crash_wait_table) after that.
#define CRUMBS_CRASH_RECORD_VERSION 4u
/// sizeof(crumbs_crash_record) of a version 1 file: everything before `message`.
#define CRUMBS_CRASH_RECORD_V1_SIZE 88064u
/// sizeof(crumbs_crash_record) of a version 2 file: everything before `threads`.
#define CRUMBS_CRASH_RECORD_V2_SIZE 90112u
/// sizeof(crumbs_crash_record) of a version 3 file: everything before `waits`.
#define CRUMBS_CRASH_RECORD_V3_SIZE 352320u

#define CRUMBS_CRASH_HEADER_SIZE 2048u
#define CRUMBS_CRASH_MAX_FRAMES 128u
#define CRUMBS_CRASH_MAX_REGISTERS 48u
#define CRUMBS_CRASH_MAX_MODULES 256u
#define CRUMBS_CRASH_PATH_SIZE 256u
#define CRUMBS_CRASH_BUILD_ID_SIZE 32u
#define CRUMBS_CRASH_SWIFT_MESSAGE_SIZE 1024u
#define CRUMBS_CRASH_CXX_TYPE_SIZE 224u
#define CRUMBS_CRASH_CXX_WHAT_SIZE 768u
/// Threads a record lists (the crashing one included); threads_seen counts the rest.
#define CRUMBS_CRASH_MAX_THREADS 256u
/// Frames kept per thread other than the crashing one (which keeps CRUMBS_CRASH_MAX_FRAMES).
#define CRUMBS_CRASH_THREAD_MAX_FRAMES 64u
/// Registers kept per thread (x86_64 has 23, aarch64 36: see crumbs_crash_arch).
#define CRUMBS_CRASH_THREAD_MAX_REGISTERS 40u
/// Bytes of a thread's /proc/self/task/<tid>/syscall line kept: the longest ("NR" and eight
/// "0x" + 16 digit fields) is under 160.
#define CRUMBS_CRASH_WAIT_TEXT_SIZE 208u
/// Lock words read at the crashing thread's registers (see crumbs_crash_wait_table).
#define CRUMBS_CRASH_MAX_LOCK_CANDIDATES 8u

/// `crumbs_crash_record.state`.
typedef enum crumbs_crash_state {
  CRUMBS_CRASH_ARMED = 1,
  CRUMBS_CRASH_WRITING = 2,
  CRUMBS_CRASH_COMPLETE = 3,
} crumbs_crash_state;

/// `crumbs_crash_record.flags`.
enum {
  /// The handler crashed while writing; only the fields written before it (and the nested_*
  /// fields) are meaningful.
  CRUMBS_CRASH_FLAG_PARTIAL = 1u << 0,
  /// Some frame lies outside every module in the table (a library loaded after the last
  /// refresh, JIT code, or a garbage address).
  CRUMBS_CRASH_FLAG_MODULES_STALE = 1u << 1,
  /// The module table was being rewritten when the crash happened: it may be torn.
  CRUMBS_CRASH_FLAG_MODULES_TORN = 1u << 2,
  /// The sender fields are meaningful (si_code was SI_USER, SI_QUEUE or SI_TKILL).
  CRUMBS_CRASH_FLAG_HAS_SENDER = 1u << 3,
  /// The handler ran on an alternate signal stack.
  CRUMBS_CRASH_FLAG_ON_ALTERNATE_STACK = 1u << 4,
  /// frames[1] is `leaf_return_candidate` (the PC was outside every module, as after a call
  /// through a bad pointer, so the return address at [sp] / in LR is the caller).
  CRUMBS_CRASH_FLAG_LEAF_FRAME_INSERTED = 1u << 5,
  /// Another thread crashed while this record was being written (it waited, then died).
  CRUMBS_CRASH_FLAG_CONCURRENT_CRASH = 1u << 6,
  /// Frames after the first few were recovered by scanning the stack for return addresses
  /// (the fault was in code without frame pointers); a stale one may appear among them.
  CRUMBS_CRASH_FLAG_STACK_SCANNED = 1u << 7,
  /// The handler added modules to the table at crash time (CRUMBS_CRASH_MODULE_FOUND_AT_CRASH):
  /// the table was stale, and the frames in those modules were resolved from /proc/self/maps.
  CRUMBS_CRASH_FLAG_MODULES_ADDED_AT_CRASH = 1u << 8,
  /// The fault was given to a handler known to recover (`first_chance`), which returned from it
  /// `first_chance.repeats` times in a row without fixing it: a loop, recorded as the crash it is.
  CRUMBS_CRASH_FLAG_FIRST_CHANCE_LOOPED = 1u << 9,
};

/// Returns in a row from the same fault (signal, pc, address) on one thread, the pc unchanged,
/// at which the handler first checks whether the access would now succeed; if not, the first
/// chance is taken as a loop and recorded. Each check passed doubles the count to the next one
/// (by at most 4096).
#define CRUMBS_CRASH_FIRST_CHANCE_REPEATS 8u

/// The mark of the first chance (crumbs_crash_handler.c): before a fault goes to a handler known
/// to recover, with nothing recorded yet, the handler writes the fault here — a few stores into
/// the mapped file — so that a process the called handler ends (it exits, or leaves by longjmp
/// and the process ends later without a clean exit) leaves more than an untouched record: the
/// next launch says which handler had which fault. Carved out of `reserved` without a version
/// bump: earlier files have zeros ("no first chance given").
typedef struct crumbs_crash_first_chance {
  /// First chances in progress (atomic): added to before the call, taken from when the handler
  /// returns to Crumbs (or when its thread's next fault shows it left by longjmp). Above 0 in a
  /// record left ARMED: the process ended inside one.
  uint32_t calling;
  uint32_t thread_id; // the thread of the last one given
  int32_t signal_number;
  int32_t signal_code;
  uint64_t pc;            // where the fault was
  uint64_t fault_address; // si_addr
  uint64_t handler;       // the handler's address (its module: the module table)
  uint64_t wall_ns;       // CLOCK_REALTIME when it was called
  /// That thread's returns in a row from this same fault with the pc unchanged (see
  /// CRUMBS_CRASH_FIRST_CHANCE_REPEATS).
  uint32_t repeats;
  /// Atomic: non-zero while a thread writes the fields above (they may then be torn); another
  /// thread's first chance meanwhile leaves them as they are.
  uint32_t writing;
  uint64_t count; // first chances given in this process (atomic)
} crumbs_crash_first_chance;
_Static_assert(sizeof(crumbs_crash_first_chance) == 64, "persisted: crumbs_crash_first_chance");

/// `crumbs_crash_record.arch`: how to name `registers`.
typedef enum crumbs_crash_arch {
  /// glibc `gregs` order: r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp rip
  /// eflags csgsfs err trapno oldmask cr2 (23 registers).
  CRUMBS_CRASH_ARCH_X86_64 = 1,
  /// x0..x30, sp, pc, pstate, fault_address, esr (36 registers; records written before esr was
  /// added have 35: `register_count` says, and a reader names what it has). esr is the fault's
  /// exception syndrome from the signal frame's ESR record, 0 when the kernel wrote none (a
  /// signal that is not a fault; qemu-user writes none at all).
  CRUMBS_CRASH_ARCH_AARCH64 = 2,
} crumbs_crash_arch;

/// Why the frame-pointer walk stopped (`crumbs_crash_record.backtrace_stop`).
typedef enum crumbs_crash_backtrace_stop {
  CRUMBS_BACKTRACE_END_OF_CHAIN = 1,    // frame pointer 0 or return address 0: the outermost frame
  CRUMBS_BACKTRACE_OUT_OF_BOUNDS = 2,   // next frame pointer outside the thread's stack
  CRUMBS_BACKTRACE_NOT_ASCENDING = 3,   // next frame pointer not above the previous one
  CRUMBS_BACKTRACE_MISALIGNED = 4,      // frame pointer not 8-byte aligned
  CRUMBS_BACKTRACE_FULL = 5,            // CRUMBS_CRASH_MAX_FRAMES reached
  CRUMBS_BACKTRACE_NO_STACK_BOUNDS = 6, // stack range unknown: only the PC was recorded
} crumbs_crash_backtrace_stop;

/// Where `stack_low`/`stack_high` came from.
typedef enum crumbs_crash_stack_source {
  CRUMBS_STACK_UNKNOWN = 0,
  CRUMBS_STACK_REGISTERED = 1, // pthread_getattr_np at install / crumbs_crash_prepare_thread
  CRUMBS_STACK_PROC_MAPS = 2,  // the mapping holding the SP, from /proc/self/maps in the handler
} crumbs_crash_stack_source;

/// `crumbs_crash_record.frame_marks[i]`: how frame i was found. 0 is a frame the frame-pointer
/// walk read from a frame record (or frames[0], the faulting PC): certain. Carved out of
/// `reserved` without a version bump: a file written before it has zeros there, and its
/// CRUMBS_CRASH_FLAG_STACK_SCANNED says only that some frame was guessed, not which.
enum {
  /// Found by scanning the stack for return addresses: it may be a stale one.
  CRUMBS_FRAME_GUESSED = 1u << 0,
  /// Recovered by .eh_frame call frame information (the code kept no frame pointer).
  CRUMBS_FRAME_CFI = 1u << 1,
  /// A resume point of an async caller, from the Swift async context chain.
  CRUMBS_FRAME_ASYNC = 1u << 2,
  /// `leaf_return_candidate` inserted after a call through a bad pointer.
  CRUMBS_FRAME_INSERTED = 1u << 3,
};

/// `crumbs_crash_module.flags`.
enum {
  /// Not in the table the last scan made: the handler found it at crash time, in
  /// /proc/self/maps, because a frame lay in it (a library dlopen'ed after the last scan). Its
  /// build ID was read from its mapped headers.
  CRUMBS_CRASH_MODULE_FOUND_AT_CRASH = 1u << 0,
  /// In the table the last scan made, but gone at crash time (dlclose'd): /proc/self/maps had
  /// no executable mapping at its text, or the object mapped there had another build ID. The
  /// handler read nothing of it; a frame inside it is a call through a stale pointer.
  CRUMBS_CRASH_MODULE_UNLOADED = 1u << 1,
};

/// `crumbs_crash_message.swift_flags` and `.cxx_flags`.
enum {
  /// The text did not fit (or ran into unreadable memory before its NUL): cut, maybe inside a
  /// UTF-8 sequence, which a reader drops.
  CRUMBS_CRASH_MESSAGE_TRUNCATED = 1u << 0,
  /// cxx_flags: the terminate handler saw an uncaught C++ exception (cxx_type is its type).
  CRUMBS_CRASH_CXX_EXCEPTION = 1u << 1,
  /// cxx_flags: the exception is a std::exception; cxx_what is its what().
  CRUMBS_CRASH_CXX_HAS_WHAT = 1u << 2,
  /// cxx_flags: cxx_what was cut (CRUMBS_CRASH_MESSAGE_TRUNCATED is about cxx_type).
  CRUMBS_CRASH_CXX_WHAT_TRUNCATED = 1u << 3,
};

/// What was said about the crash before the signal (version 2). Texts are not NUL-terminated:
/// each has its length.
typedef struct crumbs_crash_message {
  /// Bytes of swift_message: the Swift runtime's fatal-error message
  /// (swift_getFatalErrorMessageBuffer), as "file:line: Fatal error: text\n" in debug builds.
  /// 0: the runtime said nothing (no Swift runtime, or a release-build trap without a message).
  uint32_t swift_length;
  uint32_t swift_flags;     // CRUMBS_CRASH_MESSAGE_TRUNCATED
  uint32_t cxx_type_length; // bytes of cxx_type (mangled, as type_info::name() gives it)
  uint32_t cxx_what_length; // bytes of cxx_what
  uint32_t cxx_flags;       // CRUMBS_CRASH_CXX_*, CRUMBS_CRASH_MESSAGE_TRUNCATED (type)
  uint32_t reserved[3];
  char swift_message[CRUMBS_CRASH_SWIFT_MESSAGE_SIZE];
  char cxx_type[CRUMBS_CRASH_CXX_TYPE_SIZE];
  char cxx_what[CRUMBS_CRASH_CXX_WHAT_SIZE];
} crumbs_crash_message;
_Static_assert(sizeof(crumbs_crash_message) == 2048, "persisted: crumbs_crash_message");
_Static_assert(offsetof(crumbs_crash_message, swift_message) == 32, "persisted");

/// `crumbs_crash_thread.state`: what became of a thread the handler listed.
typedef enum crumbs_crash_thread_state {
  /// The crashing thread (always entry 0): its registers and frames are the record's own
  /// (`registers`, `frames`, `frame_marks`), not repeated in the entry.
  CRUMBS_THREAD_CRASHING = 1,
  /// Answered the capture signal: registers from its signal context, frames walked from them
  /// while it waited, parked, for the handler to release it. Or, in a live capture, blocked in
  /// a system call (CRUMBS_NOT_SIGNALLED_IN_SYSCALL): frames walked from where it blocks, never
  /// signalled, no registers.
  CRUMBS_THREAD_CAPTURED = 2,
  /// Did not answer: stopped or traced, both signals that could ask it blocked (`asked_with`
  /// 0), or asked and not scheduled before the deadline. Tid and name only.
  CRUMBS_THREAD_NO_ANSWER = 3,
  /// Not asked: the capture signal was not ours at crash time (another library took it), or
  /// could not be sent, or the thread runs under a seccomp filter (`not_signalled` says which).
  /// Tid and name only.
  CRUMBS_THREAD_NOT_ASKED = 4,
  /// Another thread that crashed at the same time (it entered the crash handler and was waiting
  /// for this one to end the process): registers and frames of its own fault;
  /// `signal_number` is its signal.
  CRUMBS_THREAD_ALSO_CRASHED = 5,
  /// The thread that took a live capture (entry 0 of a table crumbs_capture_threads_live fills;
  /// never in a crash record): its frames are its own walk from where it called the capture,
  /// every one a return address (frames[0] too); no registers.
  CRUMBS_THREAD_REQUESTING = 6,
} crumbs_crash_thread_state;

/// `crumbs_crash_thread.not_signalled`: why a thread got no signal (bits; several may hold).
enum {
  /// It runs under a seccomp filter (`Seccomp:` non-zero in its status): the capture handler's
  /// own system calls could kill it (strict mode) or the whole process (SECCOMP_RET_KILL_PROCESS),
  /// so it is never signalled. Without CRUMBS_NOT_SIGNALLED_IN_SYSCALL: not asked, no frames.
  CRUMBS_NOT_SIGNALLED_SECCOMP = 1u << 0,
  /// It was blocked in a system call (`blocked_syscall`): its frames were walked from the pc and
  /// sp the kernel shows in /proc/self/task/<tid>/syscall, its user stack frozen meanwhile, and
  /// the call it blocks in was not interrupted (a live capture only). No registers.
  CRUMBS_NOT_SIGNALLED_IN_SYSCALL = 1u << 1,
  /// It blocked both signals that could ask it (the capture signal and SIGPROF).
  CRUMBS_NOT_SIGNALLED_BLOCKS_SIGNALS = 1u << 2,
  /// It was stopped or traced: it could not have run a handler.
  CRUMBS_NOT_SIGNALLED_STOPPED = 1u << 3,
  /// No signal was ours to send (the capture signal taken, SIGPROF someone else's).
  CRUMBS_NOT_SIGNALLED_NO_SIGNAL = 1u << 4,
};

/// `crumbs_crash_thread_table.flags`.
enum {
  /// /proc/self/task could not be read: only the crashing thread is listed.
  CRUMBS_THREADS_LISTING_FAILED = 1u << 0,
  /// The deadline passed before every asked thread answered (see CRUMBS_THREAD_NO_ANSWER).
  CRUMBS_THREADS_DEADLINE_PASSED = 1u << 1,
  /// The capture signal was not ours at crash time: no thread was asked.
  CRUMBS_THREADS_SIGNAL_TAKEN = 1u << 2,
  /// The crash handler crashed while capturing (a thread's stack changed under the walk):
  /// entries after `thread_count` were not written.
  CRUMBS_THREADS_INTERRUPTED = 1u << 3,
  /// SIGPROF asked the threads that block the capture signal (as Dispatch's workers do).
  CRUMBS_THREADS_USED_SIGPROF = 1u << 4,
  /// Nothing was chained after the crash handler, so the process was sure to die: the threads
  /// that answered ended there and then (their stacks walked as they left them) instead of
  /// parking until released.
  CRUMBS_THREADS_ENDED = 1u << 5,
  /// Nothing was chained, but a core dump was to be written (RLIMIT_CORE above 0, or a `|`
  /// core_pattern) or a tracer was attached: the threads that answered stayed parked until the
  /// fatal signal took the process, so the core (or the debugger) sees every one of them.
  CRUMBS_THREADS_KEPT_FOR_DUMP = 1u << 6,
  /// A live capture (crumbs_live_capture.h) was running when the crash came: the crash handler
  /// waited for it to finish before asking the threads itself.
  CRUMBS_THREADS_WAITED_FOR_LIVE = 1u << 7,
  /// The crashing thread was taking a live capture (it crashed inside it): the threads it had
  /// parked were released first, then every thread was asked for the crash.
  CRUMBS_THREADS_TOOK_OVER_LIVE = 1u << 8,
  /// A live capture held the threads longer than the crash handler waits for it (its limit
  /// plus a margin): only the crashing thread is listed.
  CRUMBS_THREADS_BUSY = 1u << 9,
  /// Handlers were chained after the crash handler (the Swift runtime's backtracer): the threads
  /// that answered stayed parked until the process died, instead of running the app's code
  /// while those handlers ran. One that suspends threads itself interrupts them in the park.
  CRUMBS_THREADS_KEPT_FOR_CHAIN = 1u << 10,
};

/// One thread of the crashed process (version 3).
typedef struct crumbs_crash_thread {
  uint32_t tid;       // kernel tid
  uint32_t state;     // crumbs_crash_thread_state
  char name[16];      // PR_GET_NAME (or /proc/self/task/<tid>/comm), NUL-terminated
  uint64_t stack_low; // the range the walk trusted (0, 0: unknown)
  uint64_t stack_high;
  uint32_t stack_source; // crumbs_crash_stack_source
  uint32_t register_count;
  uint32_t frame_count;    // frames[0] is the PC where the thread was stopped
  uint32_t backtrace_stop; // crumbs_crash_backtrace_stop
  int32_t signal_number;   // CRUMBS_THREAD_ALSO_CRASHED: its own signal
  int32_t asked_with;      // the signal sent to it (the capture signal or SIGPROF); 0: none
  uint64_t registers[CRUMBS_CRASH_THREAD_MAX_REGISTERS]; // named as crumbs_crash_arch says
  uint64_t frames[CRUMBS_CRASH_THREAD_MAX_FRAMES];
  uint8_t frame_marks[CRUMBS_CRASH_THREAD_MAX_FRAMES]; // CRUMBS_FRAME_* per frame
  /// A live capture's: how long the thread stayed in the capture handler, from its start to
  /// the release (the wake-up after it not included). 0 in crash records (carved out of
  /// `reserved`, always 0 before).
  uint64_t paused_ns;
  /// Why no signal asked it: CRUMBS_NOT_SIGNALLED_* bits (0: asked, or none known). Carved out
  /// of `reserved`, always 0 before.
  uint32_t not_signalled;
  /// CRUMBS_NOT_SIGNALLED_IN_SYSCALL: the system call it was blocked in (its number, as
  /// /proc/self/task/<tid>/syscall gives it); meaningless otherwise.
  int32_t blocked_syscall;
  uint8_t reserved[48];
} crumbs_crash_thread;
_Static_assert(sizeof(crumbs_crash_thread) == 1024, "persisted: crumbs_crash_thread");
_Static_assert(offsetof(crumbs_crash_thread, registers) == 64, "persisted");
_Static_assert(offsetof(crumbs_crash_thread, frames) == 384, "persisted");
_Static_assert(offsetof(crumbs_crash_thread, frame_marks) == 896, "persisted");
_Static_assert(offsetof(crumbs_crash_thread, paused_ns) == 960, "persisted");
_Static_assert(offsetof(crumbs_crash_thread, not_signalled) == 968, "persisted");

/// Every thread at crash time (version 3). The handler lists /proc/self/task once, asks every
/// other thread for its registers with the capture signal, waits a bounded time, walks the
/// stacks of those that answered, then lets them go (crumbs_thread_capture.c). A live capture
/// (crumbs_live_capture.h) fills the same struct in its caller's memory, entry 0 the thread that
/// asked (CRUMBS_THREAD_REQUESTING).
typedef struct crumbs_crash_thread_table {
  uint32_t threads_seen;        // tids listed (the crashing one included): may exceed thread_count
  uint32_t thread_count;        // entries written (≤ CRUMBS_CRASH_MAX_THREADS)
  uint32_t captured;            // entries CRUMBS_THREAD_CAPTURED or CRUMBS_THREAD_ALSO_CRASHED
  uint32_t no_answer;           // entries CRUMBS_THREAD_NO_ANSWER
  int32_t capture_signal;       // the signal that asked them (0: none could be installed)
  uint32_t flags;               // CRUMBS_THREADS_*
  uint64_t capture_duration_ns; // first request to the release of the parked threads
  uint64_t deadline_ns;         // how long the handler waited at most for answers
  uint8_t reserved[24];
  crumbs_crash_thread threads[CRUMBS_CRASH_MAX_THREADS];
} crumbs_crash_thread_table;
_Static_assert(offsetof(crumbs_crash_thread_table, threads) == 64, "persisted");

/// `crumbs_crash_thread_wait.flags`.
enum {
  /// `text` holds the thread's syscall line, read before the crash asked the thread (asked, it
  /// shows the capture's own wait instead).
  CRUMBS_WAIT_TEXT_READ = 1u << 0,
  /// The line names a futex call: `lock_address` is its first argument, and `words_read` bytes
  /// of `lock_words` were read there through the kernel (process_vm_readv; never a plain load).
  CRUMBS_WAIT_FUTEX = 1u << 1,
};

/// What one other thread was blocked in at crash time (version 4). The next launch parses
/// `text` with the parser of live captures (ThreadWaits) and reads lock owners from `lock_words`
/// as a live capture reads them from memory.
typedef struct crumbs_crash_thread_wait {
  uint32_t tid;           // 0: unused
  uint32_t flags;         // CRUMBS_WAIT_*
  uint64_t lock_address;  // CRUMBS_WAIT_FUTEX: the futex word's address
  uint32_t lock_words[4]; // the 16 bytes at lock_address (glibc's mutex: owner at byte 8;
                          // a PI futex: the owner's tid in word 0)
  uint32_t words_read;    // bytes of lock_words read: 16, 4 (the rest unreadable), or 0
  uint32_t text_length;   // bytes of `text` used
  uint8_t reserved[8];
  char text[CRUMBS_CRASH_WAIT_TEXT_SIZE]; // the syscall line as read, not NUL-terminated
} crumbs_crash_thread_wait;
_Static_assert(sizeof(crumbs_crash_thread_wait) == 256, "persisted: crumbs_crash_thread_wait");
_Static_assert(offsetof(crumbs_crash_thread_wait, text) == 48, "persisted");

/// A word one of the crashing thread's registers pointed at, naming another listed thread in
/// its low 30 bits (a PI futex's owner: FUTEX_TID_MASK): the lock a lock call that trapped was
/// asking for, when the register still holds its address.
typedef struct crumbs_crash_lock_candidate {
  uint64_t address;
  uint32_t word;
  uint32_t register_index; // into the record's `registers`
} crumbs_crash_lock_candidate;
_Static_assert(sizeof(crumbs_crash_lock_candidate) == 16, "persisted: crumbs_crash_lock_candidate");

/// Every other thread's wait at crash time (version 4; crumbs_thread_waits.c). Entries are in
/// the order the threads were asked, matched to `threads` by tid.
typedef struct crumbs_crash_wait_table {
  uint32_t count;           // entries written (≤ CRUMBS_CRASH_MAX_THREADS)
  uint32_t candidate_count; // ≤ CRUMBS_CRASH_MAX_LOCK_CANDIDATES
  uint64_t read_ns;         // time spent reading the lines and words
  uint8_t reserved[48];
  crumbs_crash_lock_candidate candidates[CRUMBS_CRASH_MAX_LOCK_CANDIDATES];
  crumbs_crash_thread_wait waits[CRUMBS_CRASH_MAX_THREADS];
} crumbs_crash_wait_table;
_Static_assert(offsetof(crumbs_crash_wait_table, candidates) == 64, "persisted");
_Static_assert(offsetof(crumbs_crash_wait_table, waits) == 192, "persisted");

/// One loaded ELF object, as dl_iterate_phdr saw it at install or at the last refresh, or as the
/// handler found it at crash time (CRUMBS_CRASH_MODULE_FOUND_AT_CRASH).
typedef struct crumbs_crash_module {
  uint64_t load_bias;     // dlpi_addr: runtime address = file virtual address + load_bias
  uint64_t start;         // lowest PT_LOAD runtime address
  uint64_t end;           // end of the highest PT_LOAD
  uint64_t text_start;    // lowest executable PT_LOAD runtime address
  uint64_t text_end;      // end of the highest executable PT_LOAD
  uint32_t build_id_size; // bytes of build_id used (0: none)
  uint32_t flags;         // CRUMBS_CRASH_MODULE_* (was reserved, always 0: see the version note)
  uint8_t build_id[CRUMBS_CRASH_BUILD_ID_SIZE]; // NT_GNU_BUILD_ID
  char path[CRUMBS_CRASH_PATH_SIZE];            // NUL-terminated, truncated
} crumbs_crash_module;
_Static_assert(sizeof(crumbs_crash_module) == 336, "persisted: crumbs_crash_module");
_Static_assert(offsetof(crumbs_crash_module, build_id) == 48, "persisted");
_Static_assert(offsetof(crumbs_crash_module, path) == 80, "persisted");

/// The whole crash record file (rounded up to a page on disk).
typedef struct crumbs_crash_record {
  // Written at install.
  uint64_t magic;       // CRUMBS_CRASH_RECORD_MAGIC
  uint32_t version;     // CRUMBS_CRASH_RECORD_VERSION
  uint32_t header_size; // CRUMBS_CRASH_HEADER_SIZE
  uint64_t total_size;  // sizeof(crumbs_crash_record)
  uint32_t state;       // atomic, crumbs_crash_state
  uint32_t flags;       // CRUMBS_CRASH_FLAG_*
  uint32_t arch;        // crumbs_crash_arch
  uint32_t pid;
  uint8_t session_id[16]; // the ring's: links `<session>.crash` to `<session>.ring`
  uint8_t boot_id[16];
  uint64_t install_wall_ns;           // since the Unix epoch
  uint64_t process_start_boottime_ns; // CLOCK_BOOTTIME at process start (/proc/self/stat)

  // The signal.
  int32_t signal_number;
  int32_t signal_code;      // si_code
  int32_t signal_errno;     // si_errno
  uint32_t threads_crashed; // threads that entered the handler (the first one wrote this)
  int32_t sender_pid;       // with CRUMBS_CRASH_FLAG_HAS_SENDER
  uint32_t sender_uid;
  uint64_t fault_address; // si_addr (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP)
  char signal_name[16];   // "SIGSEGV"
  char code_name[32];     // "SEGV_MAPERR", "SI_USER", ...

  // The crashing thread.
  uint32_t thread_id;    // kernel tid
  uint32_t stack_source; // crumbs_crash_stack_source
  char thread_name[16];  // PR_GET_NAME
  uint64_t stack_low;    // the range the backtrace walk trusted
  uint64_t stack_high;

  // Time and machine.
  uint64_t crash_wall_ns;       // CLOCK_REALTIME at handler entry
  uint64_t crash_monotonic_ns;  // CLOCK_MONOTONIC at handler entry
  uint64_t process_uptime_ns;   // CLOCK_BOOTTIME at entry - process_start_boottime_ns
  uint64_t free_memory_bytes;   // sysinfo
  uint64_t total_memory_bytes;  // sysinfo
  uint64_t handler_duration_ns; // entry to just before complete_marker, CLOCK_MONOTONIC

  // A crash inside the handler (CRUMBS_CRASH_FLAG_PARTIAL).
  int32_t nested_signal_number;
  int32_t nested_signal_code;
  uint64_t nested_fault_address;

  // Registers of the faulting context.
  uint32_t register_count;
  uint32_t reserved0;
  uint64_t registers[CRUMBS_CRASH_MAX_REGISTERS];

  // Backtrace: frames[0] is the faulting PC, then return addresses, innermost first.
  uint32_t frame_count;
  uint32_t backtrace_stop;        // crumbs_crash_backtrace_stop
  uint64_t leaf_return_candidate; // x86_64: the word at [sp]; aarch64: LR (x30)
  uint64_t frames[CRUMBS_CRASH_MAX_FRAMES];

  // Module table (install / refresh; see the file comment).
  uint64_t module_generation; // atomic seqlock, odd while rewritten
  uint32_t module_count;
  uint32_t module_adds; // dl_iterate_phdr's dlpi_adds at the last scan (truncated)

  /// CRUMBS_CRASH_COMPLETE_MARKER once the handler finished; stored last (release).
  uint64_t complete_marker;

  /// One CRUMBS_FRAME_* set per entry of `frames` (see the enum for files written before it).
  uint8_t frame_marks[CRUMBS_CRASH_MAX_FRAMES];
  /// A bit per crash signal (1 << signal) whose action another library set after install
  /// (sigaction/signal, seen when it happens: crumbs_signal_watch.c), cleared when Crumbs takes
  /// it back. Written at any time, not only at a crash, so a record left ARMED still says it.
  /// Carved out of `reserved` without a version bump: earlier files have 0 ("none noticed").
  uint64_t replaced_signals;
  /// The last first chance (see the struct). Carved out of `reserved` without a version bump.
  crumbs_crash_first_chance first_chance;
  uint8_t reserved[120];
  crumbs_crash_module modules[CRUMBS_CRASH_MAX_MODULES];

  // Version 2: what was said before the signal (the handler copies it; see the struct).
  crumbs_crash_message message;

  // Version 3: every thread of the process (see the struct).
  crumbs_crash_thread_table threads;

  // Version 4: what the other threads were blocked in (see the struct).
  crumbs_crash_wait_table waits;
} crumbs_crash_record;
_Static_assert(offsetof(crumbs_crash_record, version) == 8, "persisted");
_Static_assert(offsetof(crumbs_crash_record, total_size) == 16, "persisted");
_Static_assert(offsetof(crumbs_crash_record, state) == 24, "persisted");
_Static_assert(offsetof(crumbs_crash_record, signal_number) == 88, "persisted");
_Static_assert(offsetof(crumbs_crash_record, fault_address) == 112, "persisted");
_Static_assert(offsetof(crumbs_crash_record, thread_id) == 168, "persisted");
_Static_assert(offsetof(crumbs_crash_record, crash_wall_ns) == 208, "persisted");
_Static_assert(offsetof(crumbs_crash_record, registers) == 280, "persisted");
_Static_assert(offsetof(crumbs_crash_record, frame_count) == 664, "persisted");
_Static_assert(offsetof(crumbs_crash_record, frames) == 680, "persisted");
_Static_assert(offsetof(crumbs_crash_record, module_generation) == 1704, "persisted");
_Static_assert(offsetof(crumbs_crash_record, complete_marker) == 1720, "persisted");
_Static_assert(offsetof(crumbs_crash_record, frame_marks) == 1728, "persisted");
_Static_assert(offsetof(crumbs_crash_record, replaced_signals) == 1856, "persisted");
_Static_assert(offsetof(crumbs_crash_record, first_chance) == 1864, "persisted");
_Static_assert(offsetof(crumbs_crash_record, modules) == CRUMBS_CRASH_HEADER_SIZE, "persisted");
_Static_assert(offsetof(crumbs_crash_record, message) == CRUMBS_CRASH_RECORD_V1_SIZE, "persisted");
_Static_assert(CRUMBS_CRASH_RECORD_V1_SIZE == CRUMBS_CRASH_HEADER_SIZE + CRUMBS_CRASH_MAX_MODULES * 336,
               "persisted: version 1");
_Static_assert(offsetof(crumbs_crash_record, threads) == CRUMBS_CRASH_RECORD_V2_SIZE, "persisted");
_Static_assert(CRUMBS_CRASH_RECORD_V2_SIZE == CRUMBS_CRASH_RECORD_V1_SIZE + 2048, "persisted: version 2");
_Static_assert(offsetof(crumbs_crash_record, waits) == CRUMBS_CRASH_RECORD_V3_SIZE, "persisted");
_Static_assert(CRUMBS_CRASH_RECORD_V3_SIZE ==
                   CRUMBS_CRASH_RECORD_V2_SIZE + 64 + CRUMBS_CRASH_MAX_THREADS * 1024,
               "persisted: version 3");
_Static_assert(sizeof(crumbs_crash_record) ==
                   CRUMBS_CRASH_RECORD_V3_SIZE + 192 + CRUMBS_CRASH_MAX_THREADS * 256,
               "persisted: crumbs_crash_record");

/// Bytes of a crash record file: the struct rounded up to a multiple of 4 KiB. A size rule, not
/// the page size: the file is mapped whole from offset 0, which maps under any page size (16 and
/// 64 KiB pages too: the last page then runs past the end of the file, never touched).
#define CRUMBS_CRASH_FILE_SIZE ((sizeof(crumbs_crash_record) + 4095u) & ~(size_t)4095u)

/// CRUMBS_CRASH_FILE_SIZE for Swift, which does not import a macro that uses sizeof. Pure.
static inline size_t crumbs_crash_file_size(void) { return CRUMBS_CRASH_FILE_SIZE; }

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_CRASH_RECORD_H
