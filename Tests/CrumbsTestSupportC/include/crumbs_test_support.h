// Test-only C helpers. Why C: they install signal handlers that append breadcrumbs, and a signal
// handler must not run Swift code; and they run threads whose first append must make no system
// call but the few it is allowed (crumbs_test_altstack.c), which Swift code cannot promise (the
// runtime may allocate, take locks, or start its own work on a new thread).
#ifndef CRUMBS_TEST_SUPPORT_H
#define CRUMBS_TEST_SUPPORT_H
#include <stdint.h>

/// Installs a handler for `signal_number` that appends one breadcrumb
/// ("from signal handler", level info, type system, flag FROM_SIGNAL_HANDLER) to the installed
/// ring and counts how many it appended. Returns 0 or -1 (errno set).
int crumbs_test_install_appending_handler(int signal_number);
/// Breadcrumbs appended by that handler so far.
uint64_t crumbs_test_signal_appends(void);

// MARK: - Alternate stacks handed out on a first append (crumbs_test_altstack.c)

/// One thread's alternate stack right after its first append (sigaltstack's answer).
typedef struct crumbs_test_altstack_report {
  uint64_t stack; // ss_sp
  uint64_t size;  // ss_size
  int32_t flags;  // ss_flags (SS_DISABLE: none)
  int32_t error;  // errno when sigaltstack failed, else 0
} crumbs_test_altstack_report;

/// Starts `count` threads that each make their first append (crumbs_add_breadcrumb to the
/// installed ring) and write their alternate stack to reports[i]; once all have (so all hold
/// their stacks at once), they exit and are joined. Returns 0, or -1 when a thread could not be
/// started.
int crumbs_test_append_on_threads(uint32_t count, crumbs_test_altstack_report *reports);

/// Starts one thread that installs a seccomp filter allowing only gettid, sigaltstack,
/// clock_gettime, getcpu (the calls a first append may make: the ring's tid lookup and clock,
/// the crash handler's alternate stack) and ppoll (to park afterwards); any other system call
/// kills the whole process with SIGSYS. The thread then makes its first append, writes its
/// alternate stack to *report and parks for good. Returns 0 once the report is written; -1 when
/// the thread or the filter could not be set up (the report's error field says why).
int crumbs_test_first_append_under_seccomp(crumbs_test_altstack_report *report);

// MARK: - A forked child that holds a copy of one descriptor

/// fork()s a child that closes every descriptor above 2 except `read_fd` and `keep_fd`, blocks
/// in read(read_fd) until the parent closes the pipe's write end, then _exits(0). While it lives
/// it holds a copy of keep_fd (and any flock on it), as every child holds all descriptors
/// between its fork or clone and its exec; closing the others keeps it from holding what other
/// tests running at the same time have open. Returns the child's pid, or -1 (errno set).
/// Why C: after fork in a multithreaded process the child may only make async-signal-safe calls.
int crumbs_test_fork_blocked_child(int read_fd, int keep_fd);

// MARK: - Swapping two names in a loop (crumbs_test_rename.c)

/// Exchanges the entries `first` and `second` of the directory `directory` (renameat2 with
/// RENAME_EXCHANGE: both names always exist, each now naming the other's file) `count` times,
/// as fast as it can, then returns how many exchanges worked (an even count leaves every name
/// as it was). -1 (errno set) when the first one fails (ENOSYS, EINVAL: no RENAME_EXCHANGE
/// here). Why C: glibc's renameat2 is hidden from Swift without _GNU_SOURCE.
int64_t crumbs_test_exchange_loop(int directory, const char *first, const char *second, uint64_t count);
#endif
