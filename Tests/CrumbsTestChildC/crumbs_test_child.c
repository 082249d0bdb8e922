// Test-only crash helpers (see include/crumbs_test_child.h). Not signal-safe and not meant to be:
// they are how the test child crashes, not part of the handler.
#define _GNU_SOURCE
#undef NDEBUG
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "crumbs_test_child.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

uint32_t crumbs_test_gettid(void) { return (uint32_t)syscall(SYS_gettid); }

__attribute__((noinline)) void crumbs_test_null_deref(void) { *(volatile int *)(uintptr_t)0 = 42; }

__attribute__((noinline)) int crumbs_test_int_divide(int dividend, int divisor) {
  volatile int top = dividend, bottom = divisor;
  return top / bottom;
}

__attribute__((noinline)) void crumbs_test_c_assert(int value) { assert(value == 0); }

__attribute__((noinline)) void crumbs_test_bus_error(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return;
  long page = sysconf(_SC_PAGESIZE);
  if (ftruncate(fd, 2 * page) != 0) return;
  volatile char *mapped = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return;
  if (ftruncate(fd, 0) != 0) return;
  (void)mapped[page + 1];
}

typedef void (*crumbs_test_function)(void);
static volatile crumbs_test_function crumbs_test_null_function;

__attribute__((noinline)) void crumbs_test_call_null(void) {
  crumbs_test_null_function();
  __asm__ volatile("" ::: "memory"); // not a tail call: the return address stays at [sp]
}

/// Always 1: the recursion below never ends (the stack overflows), which clang would otherwise
/// flag (-Winfinite-recursion) in the warnings-as-errors build (`make werror`).
static volatile int crumbs_test_keep_recursing = 1;

__attribute__((noinline)) int crumbs_test_overflow_stack(int depth) {
  volatile char buffer[256];
  buffer[0] = (char)depth;
  int result = crumbs_test_keep_recursing ? crumbs_test_overflow_stack(depth + 1) : 0;
  return result + buffer[0];
}

__attribute__((noinline)) int crumbs_test_recurse_then(int depth, void (*crash)(void)) {
  volatile int keep = depth;
  if (depth <= 0) {
    crash();
    return keep;
  }
  int result = crumbs_test_recurse_then(depth - 1, crash);
  return result + keep;
}

uintptr_t crumbs_test_address_of_null_deref(void) { return (uintptr_t)&crumbs_test_null_deref; }
uintptr_t crumbs_test_address_of_int_divide(void) { return (uintptr_t)&crumbs_test_int_divide; }
uintptr_t crumbs_test_address_of_overflow_stack(void) { return (uintptr_t)&crumbs_test_overflow_stack; }
uintptr_t crumbs_test_address_of_call_null(void) { return (uintptr_t)&crumbs_test_call_null; }

static struct sigaction crumbs_test_replaced[65];

static void crumbs_test_foreign_handler(int signal_number, siginfo_t *info, void *context) {
  static const char message[] = "foreign handler\n";
  (void)!write(1, message, sizeof message - 1);
  struct sigaction *previous = &crumbs_test_replaced[signal_number];
  if (previous->sa_flags & SA_SIGINFO) {
    if (previous->sa_sigaction != NULL) previous->sa_sigaction(signal_number, info, context);
  } else if (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN) {
    previous->sa_handler(signal_number);
  }
}

int crumbs_test_install_foreign_handler(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs_test_foreign_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  return sigaction(signal_number, &action, &crumbs_test_replaced[signal_number]);
}

int crumbs_test_pin_to_one_cpu(void) {
  int cpu = sched_getcpu();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu >= 0 ? cpu : 0, &set);
  return sched_setaffinity(0, sizeof set, &set);
}

void crumbs_test_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }

int crumbs_test_arm_malloc_guard(void) {
  void (*arm)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "crumbs_malloc_guard_arm");
  if (arm == NULL) return 0;
  arm();
  return 1;
}

int crumbs_test_fork_without_handlers(void) { return (int)_Fork(); }

// MARK: - SIGTRAP and SIGSYS

__attribute__((noinline)) void crumbs_test_breakpoint(void) {
#if defined(__x86_64__)
  __asm__ volatile("int3");
#elif defined(__aarch64__)
  __asm__ volatile("brk #0");
#else
  raise(SIGTRAP);
#endif
}

uintptr_t crumbs_test_address_of_breakpoint(void) { return (uintptr_t)&crumbs_test_breakpoint; }

__attribute__((noinline)) int crumbs_test_seccomp_trap(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) return -1;
  return (int)syscall(__NR_getppid);
}

uintptr_t crumbs_test_address_of_seccomp_trap(void) { return (uintptr_t)&crumbs_test_seccomp_trap; }

int crumbs_test_wait_at_gate(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  static const char ready[] = "ready\n";
  if (write(STDOUT_FILENO, ready, sizeof ready - 1) != (ssize_t)(sizeof ready - 1)) {
    close(fd);
    return -1;
  }
  char byte;
  ssize_t got;
  while ((got = read(fd, &byte, 1)) != 0) {
    if (got < 0 && errno != EINTR) {
      close(fd);
      return -1;
    }
  }
  close(fd);
  return 0;
}

static void stop_in_write(int signal_number) {
  (void)signal_number;
  static const char line[] = "in-write\n";
  ssize_t written = write(1, line, sizeof line - 1);
  (void)written;
  for (;;) pause();
}

int crumbs_test_limit_file_size(uint64_t bytes, int stop) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = stop ? stop_in_write : SIG_IGN;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGXFSZ, &action, NULL) != 0) return -1;
  struct rlimit limit = {.rlim_cur = bytes, .rlim_max = bytes};
  return setrlimit(RLIMIT_FSIZE, &limit);
}

// Deprecated in glibc in favour of sigaction, but programs call it: the test calls it as they do.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
int crumbs_test_siginterrupt(int signal_number, int flag) { return siginterrupt(signal_number, flag); }
#pragma GCC diagnostic pop

uintptr_t crumbs_test_kernel_handler(int signal_number) {
  struct {
    uintptr_t handler;
    unsigned long flags;
    uintptr_t restorer;
    uint64_t mask;
  } kernel_action;
  memset(&kernel_action, 0, sizeof kernel_action);
  if (syscall(SYS_rt_sigaction, signal_number, NULL, &kernel_action, sizeof kernel_action.mask) != 0)
    return 0;
  return kernel_action.handler;
}

uintptr_t crumbs_test_alternate_stack(uint32_t size) {
  stack_t current;
  if (sigaltstack(NULL, &current) != 0 || (current.ss_flags & SS_DISABLE) || current.ss_size != size) {
    return 0;
  }
  return (uintptr_t)current.ss_sp;
}

// MARK: - A thread that appends while the chained handlers run

static int crumbs_test_wake_pipe[2] = {-1, -1};
static int crumbs_test_done_pipe[2] = {-1, -1};

static void crumbs_test_waking_handler(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  (void)info;
  (void)context;
  char byte = 1;
  (void)!write(crumbs_test_wake_pipe[1], &byte, 1);
  struct pollfd done = {.fd = crumbs_test_done_pipe[0], .events = POLLIN, .revents = 0};
  (void)poll(&done, 1, 20000);
}

int crumbs_test_install_waking_handler(int signal_number) {
  if (pipe(crumbs_test_wake_pipe) != 0 || pipe(crumbs_test_done_pipe) != 0) return -1;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs_test_waking_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  return sigaction(signal_number, &action, NULL);
}

int crumbs_test_wait_for_wake(void) {
  char byte;
  ssize_t got;
  while ((got = read(crumbs_test_wake_pipe[0], &byte, 1)) < 0 && errno == EINTR) {
  }
  return got == 1 ? 0 : -1;
}

void crumbs_test_signal_done(void) {
  char byte = 1;
  (void)!write(crumbs_test_done_pipe[1], &byte, 1);
}

// MARK: - What is said before the signal

int crumbs_test_set_fatal_message(const char *text) {
  void *symbol = dlsym(RTLD_DEFAULT, "swift_getFatalErrorMessageBuffer");
  if (symbol == NULL) return -1;
  const char **(*get_buffer)(void);
  memcpy(&get_buffer, &symbol, sizeof get_buffer);
  __atomic_store_n(get_buffer(), text, __ATOMIC_RELEASE);
  return 0;
}

const char *crumbs_test_unterminated_text(uint32_t length) {
  long page = sysconf(_SC_PAGESIZE);
  size_t pages = (length + (size_t)page - 1) / (size_t)page + 1;
  char *mapped = mmap(NULL, pages * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return NULL;
  char *guard = mapped + (pages - 1) * (size_t)page;
  if (mprotect(guard, (size_t)page, PROT_NONE) != 0) return NULL;
  memset(guard - length, 'x', length);
  return guard - length;
}

// MARK: - Aborts inside libc (issue 12 item 5)

#include <malloc.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void crumbs_test_corrupt_heap_then_free(void) {
  // Two neighbours too big for the tcache and the fastbins, so free() takes the checked path.
  char *volatile block = malloc(2000);
  char *volatile neighbour = malloc(2000);
  // The neighbour's chunk size sits right after the block's usable bytes: size 0, "previous in
  // use" set, so glibc gets past its double-free check to "free(): invalid next size (normal)".
  *(volatile size_t *)(block + malloc_usable_size(block)) = 1;
  free(block);
  free(neighbour); // not reached: glibc aborts in the first free()
}

/// Reads the clock `depth` frames down, each frame with a few words of its own: the return
/// addresses of those calls (into this function, and inside clock_gettime) stay behind in the
/// dead stack that abort() and raise() then reuse, only partly overwritten.
__attribute__((noinline)) static int crumbs__read_clock_deep(int depth) {
  volatile uint64_t words[6] = {0};
  if (depth > 0) return crumbs__read_clock_deep(depth - 1) + (int)words[depth % 6];
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int)(now.tv_nsec & 1) + (int)words[0];
}

__attribute__((noinline)) void crumbs_test_clock_then_abort(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (crumbs__read_clock_deep(12) >= 0 && now.tv_sec >= 0) abort();
  __asm__ volatile("" ::: "memory");
}

#include <string.h>
#include <sys/mman.h>

/// Recurses `depth` frames by direct calls to itself: their return addresses stay behind in the
/// dead stack below the caller, where the next call's frame (and a stack scan) will find them.
__attribute__((noinline)) int crumbs_test_leave_return_addresses(int depth) {
  volatile uint64_t words[4] = {0};
  if (depth > 0) return crumbs_test_leave_return_addresses(depth - 1) + (int)words[depth % 4];
  return (int)words[0];
}

__attribute__((noinline)) int crumbs_test_crash_without_unwind_info(void) {
#if defined(__x86_64__)
  // sub $0x400,%rsp; movq $0,(%rsp); xor %ebp,%ebp; xor %eax,%eax; movl $1,(%rax): the scan
  // from its sp crosses the stale return addresses crumbs_test_leave_return_addresses left.
  static const unsigned char code[] = {0x48, 0x81, 0xec, 0x00, 0x04, 0x00, 0x00, 0x48, 0xc7,
                                       0x04, 0x24, 0x00, 0x00, 0x00, 0x00, 0x31, 0xed, 0x31,
                                       0xc0, 0xc7, 0x00, 0x01, 0x00, 0x00, 0x00};
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return -1;
  memcpy(page, code, sizeof code);
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return -1;
  void (*function)(void);
  memcpy(&function, &page, sizeof function);
  if (crumbs_test_leave_return_addresses(16) != 0) return -1;
  function();
  return 0;
#else
  return -1;
#endif
}

#include <signal.h>

void crumbs_test_faulting_signal_handler(int signal_number) {
  (void)signal_number;
  crumbs_test_null_deref();
  __asm__ volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
}

__attribute__((noinline)) int crumbs_test_fault_in_signal_handler(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = crumbs_test_faulting_signal_handler;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGUSR1, &action, NULL) != 0) return -1;
  raise(SIGUSR1);
  return 0;
}

int crumbs_test_malloc_maps_block(size_t size) {
  struct mallinfo2 before = mallinfo2();
  void *block = malloc(size);
  if (block == NULL) return -1;
  struct mallinfo2 holding = mallinfo2();
  free(block);
  return holding.hblks > before.hblks ? 1 : 0;
}
