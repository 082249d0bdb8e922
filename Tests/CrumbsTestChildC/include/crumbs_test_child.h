// Test-only C helpers for the crash scenarios of CrumbsTestChild. Why C: each crashes in one
// exact, known way (a null store, an integer divide, a C assert, a truncated mapping, a call
// through a null pointer, unbounded recursion) at an address the child can print, which Swift
// code cannot promise (Swift traps, inlining and thunks move the faulting instruction).
#ifndef CRUMBS_TEST_CHILD_H
#define CRUMBS_TEST_CHILD_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The caller's kernel thread id.
uint32_t crumbs_test_gettid(void);
/// Stores to address 0: SIGSEGV, SEGV_MAPERR, si_addr 0, PC inside this function.
void crumbs_test_null_deref(void);
/// Integer division by `divisor` (pass 0): SIGFPE, FPE_INTDIV on x86_64.
int crumbs_test_int_divide(int dividend, int divisor);
/// Executes a breakpoint instruction (int3 / brk): SIGTRAP.
void crumbs_test_breakpoint(void);
uintptr_t crumbs_test_address_of_breakpoint(void);
/// Installs a seccomp filter that traps getppid (SECCOMP_RET_TRAP), then calls it: SIGSYS with
/// si_code SYS_SECCOMP. Returns only if the filter could not be installed (-1, errno set).
int crumbs_test_seccomp_trap(void);
uintptr_t crumbs_test_address_of_seccomp_trap(void);
/// C assert(value == 0) with NDEBUG undefined: prints, then abort() → SIGABRT.
void crumbs_test_c_assert(int value);
/// Maps `path` (created, 2 pages), truncates it to 0, then reads the mapping: SIGBUS.
void crumbs_test_bus_error(const char *path);
/// Calls through a null function pointer: SIGSEGV with PC 0, the caller's return address at [sp].
void crumbs_test_call_null(void);
/// Recurses without bound, 256 bytes a frame: a stack overflow (SIGSEGV on the guard page).
int crumbs_test_overflow_stack(int depth);
/// Recurses `depth` frames, then calls `crash`. Returns only if `crash` does.
int crumbs_test_recurse_then(int depth, void (*crash)(void));
/// Corrupts the heap (the size of the chunk after a fresh 2000-byte block), then frees the
/// block: glibc notices ("free(): invalid next size (normal)") and aborts from inside free().
void crumbs_test_corrupt_heap_then_free(void);
/// Reads CLOCK_MONOTONIC, here and 12 frames deeper (the calls' return addresses stay in the
/// dead stack), then abort().
void crumbs_test_clock_then_abort(void);
/// x86_64: leaves stale return addresses in dead stack (crumbs_test_leave_return_addresses),
/// then calls machine code in an anonymous page (no module, no CFI) that moves the stack pointer
/// 1 KiB down, zeroes the frame pointer and faults: only a stack scan finds this function as its
/// caller, past the stale ones. Returns -1 elsewhere or when the page cannot be made executable.
int crumbs_test_crash_without_unwind_info(void);
/// Installs crumbs_test_faulting_signal_handler for SIGUSR1 (on the thread's own stack), then
/// raises SIGUSR1: the handler stores to address 0. The backtrace must cross the kernel's signal
/// frame (glibc's __restore_rt) back into raise() and this function. Returns -1 on failure.
int crumbs_test_fault_in_signal_handler(void);
/// The SIGUSR1 handler of crumbs_test_fault_in_signal_handler: calls crumbs_test_null_deref.
void crumbs_test_faulting_signal_handler(int signal_number);
/// Recurses `depth` frames by direct calls to itself (their return addresses stay in dead stack).
int crumbs_test_leave_return_addresses(int depth);
/// Address of a function, as an integer (for printing).
uintptr_t crumbs_test_address_of_null_deref(void);
uintptr_t crumbs_test_address_of_int_divide(void);
uintptr_t crumbs_test_address_of_overflow_stack(void);
uintptr_t crumbs_test_address_of_call_null(void);
/// Installs a "foreign library" handler for `signal_number` that writes "foreign handler\n" to
/// stdout and chains to the action it replaced. Returns 0 or -1.
int crumbs_test_install_foreign_handler(int signal_number);
/// Pins the process (its calling thread and every thread it starts later) to the CPU it runs on,
/// so a thread it starts cannot run before it blocks or exits. Returns 0 or -1.
int crumbs_test_pin_to_one_cpu(void);
/// Starts `count` (at most 100) threads named "blocker-NN", each blocked for good in its own
/// function crumbs_test_blocked_NN (NN = 00…99), and with `with_masked` two more: "masked",
/// blocked in crumbs_test_blocked_masked with every signal it can block blocked, and
/// "like-dispatch", in crumbs_test_blocked_like_dispatch, blocking what Dispatch's workers
/// block (all but the synchronous signals, SIGPIPE and SIGPROF). Returns once every one is in
/// its blocking function: how many were started, or -1.
int crumbs_test_start_blocked_threads(int count, int with_masked);
/// Names the calling thread `name` (NULL: keeps its name), counts it for
/// crumbs_test_wait_for_parked, then blocks for good in read() on a pipe nobody writes. For
/// threads a test parks from Swift (a Dispatch worker, a task): the caller's function is then
/// the one to find in the thread's stack.
void crumbs_test_park_in_read(const char *name);
/// Waits (an event, not a sleep) until `count` threads called crumbs_test_park_in_read.
/// Returns 0, or -1.
int crumbs_test_wait_for_parked(int count);
/// Starts a thread "cond-waiter" blocked for good in crumbs_test_waiting_on_condition
/// (pthread_cond_wait), and returns 0 once it waits there (or -1).
int crumbs_test_start_condition_waiter(void);
/// Starts a thread "echo", blocked in crumbs_test_echo_loop's read() between requests, that
/// answers each crumbs_test_echo; returns once it answered one (it is named and in its loop).
/// Returns 0 or -1.
int crumbs_test_start_echo(void);
/// Sends the echo thread one byte and waits at most `timeout_ms` for its answer: 0 when it came
/// (the thread runs), -1 otherwise.
int crumbs_test_echo(int timeout_ms);
/// Starts a thread "crasher" that blocks every real-time signal and SIGPROF (no thread capture
/// can ask it), waits in crumbs_test_crash_when_told for a byte on `fd`, then stores through a
/// null pointer. Returns 0 or -1.
int crumbs_test_start_crasher(int fd);
/// Takes SIGSEGV over from the crash handler, as a library installed after Crumbs that chains
/// would: its handler calls the one it replaced, then returns.
void crumbs_test_install_chaining_handler_in_front(void);
/// Sets the calling thread's name (at most 15 bytes).
void crumbs_test_set_thread_name(const char *name);
/// Calls `crumbs_malloc_guard_arm` if an LD_PRELOAD interposer provides it: from then on any
/// malloc/calloc/realloc/free exits the process with status 99. Returns 1 when armed.
int crumbs_test_arm_malloc_guard(void);
/// fork() without the fork handlers (glibc's _Fork): the child keeps everything the parent had
/// open and mapped, as a child made by clone() or a library's own fork would.
int crumbs_test_fork_without_handlers(void);
/// Waits at a start gate (StartGate in CrumbsTestSupport): opens the FIFO at `path` for
/// reading, writes "ready\n" to stdout, then blocks until the test closes its end (end of file),
/// so that every child released by one gate runs its next line at about the same moment.
/// Returns 0, or -1 (errno set) when the FIFO cannot be opened or read.
int crumbs_test_wait_at_gate(const char *path);
/// Limits the size of files this process writes to `bytes` (RLIMIT_FSIZE). A write past it
/// raises SIGXFSZ: with `stop_in_write`, a handler writes "in-write\n" to stdout and then waits
/// in pause() forever — the process stops inside that write, for a test to SIGKILL it there;
/// without, SIGXFSZ is ignored and the write fails with EFBIG (a disk that is full). Returns 0 or -1.
int crumbs_test_limit_file_size(uint64_t bytes, int stop_in_write);

/// The calling thread's alternate signal stack (its lowest address) when it has one of exactly
/// `size` bytes, else 0.
uintptr_t crumbs_test_alternate_stack(uint32_t size);

/// Installs a handler for `signal_number` (to run after the crash handler, which chains to it:
/// install it first) that wakes the thread blocked in crumbs_test_wait_for_wake, then waits
/// (at most 20 s) until that thread calls crumbs_test_signal_done, then returns. So another
/// thread appends while the chained handlers of a crash run. Returns 0 or -1.
int crumbs_test_install_waking_handler(int signal_number);
/// Blocks until the waking handler runs. Returns 0, or -1 if it cannot wait.
int crumbs_test_wait_for_wake(void);
/// Tells the waking handler that this thread is done.
void crumbs_test_signal_done(void);

// MARK: - Runtimes that own SIGSEGV (crumbs_test_runtime_handlers.c)

/// How the runtime handler treats a fault that is not on its page.
enum {
  CRUMBS_TEST_GIVE_UP_RESTORE_AND_RETURN = 0, // its saved action back, return (a JVM)
  CRUMBS_TEST_GIVE_UP_RESTORE_AND_RAISE = 1,  // its saved action back, raise the signal
  CRUMBS_TEST_GIVE_UP_CHAIN = 2,              // call its saved action (installed after Crumbs)
};
/// Installs a handler for `signal_number` that fixes faults on a page of its own (made
/// accessible, then it returns) and gives up on any other fault as `give_up` says. Returns 0.
int crumbs_test_install_runtime_handler(int signal_number, int give_up);
/// Protects the runtime's page and stores `value` into it: a fault the handler recovers, at the
/// same instruction and address every time.
void crumbs_test_runtime_fault(int value);
/// How many faults the runtime handler fixed.
int crumbs_test_runtime_recovered(void);
/// The runtime handler's address (what an app declares as recovering).
uintptr_t crumbs_test_runtime_handler_address(void);
/// vfork()s a child that stores through a bad pointer before it execs; returns the signal it
/// died by (or -1 - its exit code, or -1 if vfork failed).
int crumbs_test_vfork_child_crashes(void);

// MARK: - Handlers that do not recover (crumbs_test_first_chance.c)

/// Installs a handler for `signal_number` that writes "exiting-handler SIGNAL" and _exit(70)s.
/// Returns 0 or -1.
int crumbs_test_install_exiting_handler(int signal_number);
/// Installs a plain handler for `signal_number` that writes "returning-handler N" (its Nth
/// call, up to the 20th) and returns, fixing nothing; at its 10,000th call it writes "looped" and _exit(99)s.
/// Returns 0 or -1.
int crumbs_test_install_returning_handler(int signal_number);
/// Installs a handler for `signal_number` that jumps back (siglongjmp) into
/// crumbs_test_null_store_jumped, as a wasm engine leaves a trap. Returns 0 or -1.
int crumbs_test_install_jumping_handler(int signal_number);
/// Stores to address 16 under sigsetjmp: returns 1 once the jumping handler jumped back.
int crumbs_test_null_store_jumped(void);
/// The handlers' addresses (what an app declares as recovering).
uintptr_t crumbs_test_exiting_handler_address(void);
uintptr_t crumbs_test_returning_handler_address(void);
uintptr_t crumbs_test_jumping_handler_address(void);

// MARK: - What is said before the signal (crumbs_test_child_cxx.cpp and crumbs_test_child.c)

/// Sets the Swift runtime's fatal-error message buffer (swift_getFatalErrorMessageBuffer) to
/// `text`, as the runtime does before it traps. Returns 0, or -1 without a Swift runtime.
int crumbs_test_set_fatal_message(const char *text);
/// `length` bytes of 'x' with no NUL after them, ending where an unreadable (PROT_NONE) page
/// begins: a message a handler must not read past. NULL when the mapping fails.
const char *crumbs_test_unterminated_text(uint32_t length);
/// Throws a C++ exception nothing catches, so std::terminate runs: kind 0 a
/// crumbs_test::Failure (a std::runtime_error) with what() `what`, kind 1 the int 42.
void crumbs_test_cxx_throw(int kind, const char *what);
/// Makes std::terminate call a handler that only calls abort() (allocating nothing, unlike
/// libstdc++'s verbose one); call before the crash handler is installed, which chains to it.
void crumbs_test_cxx_terminate_plainly(void);
/// Makes std::terminate call a handler that arms the malloc guard (crumbs_test_arm_malloc_guard),
/// then calls the handler it replaced; call after the crash handler is installed.
void crumbs_test_cxx_arm_guard_in_terminate(void);
/// Whether malloc serves a block of `size` bytes with a mapping of its own (glibc does for blocks
/// at or above its mmap threshold): 1 yes, 0 no, -1 malloc failed. The block is freed again,
/// which raises glibc's threshold to its size: probe once per process.
int crumbs_test_malloc_maps_block(size_t size);

// MARK: - Host calls a live capture must not harm (crumbs_test_host_calls.c)

/// Without `with_seccomp`: threads "hc-sleep" (sleep(3) in crumbs_test_host_sleeping),
/// "hc-nanosleep" (nanosleep, 3 s), "hc-poll", "hc-epoll" and "hc-read" (poll, epoll_wait and
/// read on pipes, no timeout), each in its crumbs_test_host_* function, and "hc-spin" (running,
/// in crumbs_test_host_spinning). With it: "sc-strict" (strict seccomp, blocked in read in
/// crumbs_test_seccomp_strict_waiting), "sc-filter" (a SECCOMP_RET_KILL_PROCESS filter allowing
/// read, write, exit and rt_sigreturn, spinning in crumbs_test_seccomp_filter_spinning) and
/// "hc-spin". Returns once each announced itself and each blocking one is inside its system
/// call (/proc/self/task/<tid>/syscall): how many started, or -1.
int crumbs_test_start_host_calls(int with_seccomp);
/// The tid of the host-call thread named `name` (0: not started).
uint32_t crumbs_test_host_call_tid(const char *name);
/// Lets the spinners go on and writes a byte to every waiting thread's pipe, then copies the
/// threads' result lines ("host sleep returned 0 after 3001 ms", …) to stdout: `expected` of
/// them, or those that came within 30 s. Returns how many came.
int crumbs_test_finish_host_calls(int expected);

// MARK: - Unusual hosts (crumbs_test_hosts.c)

/// Calls `function` (which may be a stale pointer into an unloaded library); this function is
/// its caller, with the return address at [sp].
int crumbs_test_call_pointer(int (*function)(void));
uintptr_t crumbs_test_address_of_call_pointer(void);
/// Whether this kernel supports MADV_GUARD_INSTALL (Linux 6.13+): 1 or 0.
int crumbs_test_guard_regions_supported(void);
/// Maps a 512 KiB stack whose lowest 64 KiB are a guard region installed with
/// MADV_GUARD_INSTALL (invisible in /proc/self/maps, as glibc 2.42 guards thread stacks), gives
/// the stack above the guard to a new thread named "overflower" (pthread_attr_setstack), prints
/// "crashing", and has it recurse without bound (crumbs_test_overflow_stack) into the guard.
/// `stack_low` / `guard_low` get the stack's and the guard's lowest addresses before it starts.
/// Returns -1 (errno set) when the stack cannot be made; otherwise the process dies.
int crumbs_test_overflow_on_guarded_stack(uintptr_t *stack_low, uintptr_t *guard_low);
/// Starts `count` blocked threads (crumbs_test_start_blocked_threads, none masked) and a thread
/// "after-main" that waits until the main thread has exited, prints "thread TID", "main-exited"
/// and "crashing", then stores to address 0; the main thread calls pthread_exit (a zombie
/// from then on). Returns only when something could not be started.
void crumbs_test_crash_after_main_exits(int count);
/// setgroups with `count` supplementary groups with 10-digit ids (a `Groups:` line of 11 bytes a
/// group in /proc status files). Root only: returns 0, or -1 (errno set).
int crumbs_test_set_many_groups(int count);
/// Raises RLIMIT_CORE's soft limit to 64 MiB (at most the hard limit) and makes `directory` the
/// working directory (where a relative core_pattern puts the core). Returns 0, or -1.
int crumbs_test_enable_core_dumps(const char *directory);
/// Forks (without fork handlers) a tracer that attaches to this process's main thread with
/// PTRACE_SEIZE, lets every signal through, and at the second SIGSEGV it sees (the fault
/// re-executed under SIG_DFL, the one that ends the process) writes "tasks-at-death N" to
/// stdout: how many threads the process still has then. Returns 0 once attached, or -1.
int crumbs_test_attach_tracer(void);
/// siginterrupt(signal_number, flag), called from the test child itself (so it reaches whatever
/// definition the executable binds: Crumbs' own, where it has one). Returns its result.
int crumbs_test_siginterrupt(int signal_number, int flag);
/// The handler the kernel runs for `signal_number`, asked with the raw rt_sigaction system call
/// (past every sigaction definition, ours and a preloaded one's); 0 on failure.
uintptr_t crumbs_test_kernel_handler(int signal_number);

#ifdef __cplusplus
}
#endif
#endif
