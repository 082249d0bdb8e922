// crumbs_altstack.c — the alternate signal stacks the crash handler runs on, so that a stack
// overflow (a fault with no stack left) is still recorded.
//
// Which threads get one: the installing thread (a stack of its own, at install), every thread
// on its first breadcrumb (the ring's once-per-thread slow path calls our hook), and every
// thread that calls crumbs_crash_prepare_thread. All come from one pool mapped at install: each
// stack with a PROT_NONE guard page below it.
//
// Entry points in call order: see crumbs_altstack.h.
//
// ASYNC-SIGNAL-SAFE: crumbs__altstack_first_append (the hook) and what it calls; it may run in
// a signal handler that appends. libc calls there: sigaltstack, mprotect (the guard page of the
// stack handed out), getpid, syscall(SYS_gettid), syscall(SYS_tgkill) (probing for exited
// owners when the pool is used up). It preserves errno.
// Set-up only (not signal-safe): reserve, give_install_thread, restore_install_thread,
// resolve_calls, start, stop, give_this_thread (mmap, mprotect, sigaltstack).

#define _GNU_SOURCE
#include "crumbs_altstack.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

// Defined in crumbs_ring.c: called once per thread on its first append. Signal context possible.
extern void (*crumbs__first_append_hook)(void);

// Alternate stack pool: one mapping, each stack with a PROT_NONE guard page below it.
static unsigned char *crumbs__pool;
static uint32_t crumbs__pool_count;
static uint32_t crumbs__stack_size;
static uint32_t crumbs__pool_owner[CRUMBS__ALTSTACK_MAX_COUNT]; // tid, 0 = free
static int crumbs__pool_enabled;

// The install thread's alternate stack before ours, restored by uninstall.
static stack_t crumbs__previous_altstack;
static unsigned char *crumbs__install_altstack;
static uint32_t crumbs__install_altstack_tid;

static uint32_t crumbs__gettid(void) { return (uint32_t)syscall(SYS_gettid); }

/// Stack `index` of the pool, its guard page made PROT_NONE on the way out. The guard is set
/// when a stack is handed out rather than for all stacks at install: 64 mprotect calls were
/// most of the install time. mprotect is a plain system call (no libc state, no lock), safe here.
static unsigned char *crumbs__pool_stack(uint32_t index) {
  unsigned char *guard = crumbs__pool + (size_t)index * (crumbs__stack_size + 4096u);
  mprotect(guard, 4096u, PROT_NONE);
  return guard + 4096u;
}

/// Takes a free stack from the pool for `thread_id`, reclaiming those of exited threads.
/// Async-signal-safe (atomics, tgkill).
static unsigned char *crumbs__take_pool_stack(uint32_t thread_id) {
  for (uint32_t index = 0; index < crumbs__pool_count; index++) {
    uint32_t expected = 0;
    if (__atomic_load_n(&crumbs__pool_owner[index], __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&crumbs__pool_owner[index], &expected, thread_id, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      return crumbs__pool_stack(index);
    }
  }
  // Pool exhausted: an owner that no longer exists (ESRCH) has no use for its stack. A reused
  // tid keeps its slot: a leak, never a stack shared by two live threads.
  pid_t pid = getpid();
  for (uint32_t index = 0; index < crumbs__pool_count; index++) {
    uint32_t owner = __atomic_load_n(&crumbs__pool_owner[index], __ATOMIC_RELAXED);
    if (owner == 0 || owner == thread_id) continue;
    if (syscall(SYS_tgkill, pid, (pid_t)owner, 0) == -1 && errno == ESRCH &&
        __atomic_compare_exchange_n(&crumbs__pool_owner[index], &owner, thread_id, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      return crumbs__pool_stack(index);
    }
  }
  return NULL;
}

/// Gives the calling thread one of our alternate stacks unless it has one at least as large.
/// Async-signal-safe (sigaltstack, atomics). Preserves errno.
static bool crumbs__give_altstack(void) {
  if (!__atomic_load_n(&crumbs__pool_enabled, __ATOMIC_ACQUIRE)) return false;
  int saved_errno = errno;
  stack_t current;
  bool has_one = false;
  if (sigaltstack(NULL, &current) == 0) {
    has_one = !(current.ss_flags & SS_DISABLE) && current.ss_size >= crumbs__stack_size;
    if (current.ss_flags & SS_ONSTACK) has_one = true; // cannot change it while running on it
  }
  if (!has_one) {
    unsigned char *stack = crumbs__take_pool_stack(crumbs__gettid());
    if (stack != NULL) {
      stack_t ours = {.ss_sp = stack, .ss_flags = 0, .ss_size = crumbs__stack_size};
      has_one = sigaltstack(&ours, NULL) == 0;
    }
  }
  errno = saved_errno;
  return has_one;
}

/// The ring's first-append hook. Runs once per thread, possibly in a signal handler.
static void crumbs__altstack_first_append(void) { (void)crumbs__give_altstack(); }

bool crumbs__altstack_give_this_thread(void) { return crumbs__give_altstack(); }

// MARK: - Set-up

bool crumbs__altstack_reserve(uint32_t size, uint32_t count) {
  if (crumbs__pool != NULL) return true;
  if (size == 0) size = CRUMBS__ALTSTACK_DEFAULT_SIZE;
  size = (size + 4095u) & ~4095u;
  if (count == 0) count = CRUMBS__ALTSTACK_DEFAULT_COUNT;
  if (count > CRUMBS__ALTSTACK_MAX_COUNT) count = CRUMBS__ALTSTACK_MAX_COUNT;
  size_t total = (size_t)(count + 1) * (size + 4096u); // +1: the install thread's stack
  void *pool = mmap(NULL, total, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (pool == MAP_FAILED) return false;
  crumbs__stack_size = size;
  crumbs__pool = (unsigned char *)pool;
  crumbs__pool_count = count;
  crumbs__install_altstack = crumbs__pool_stack(count); // the extra one, with its guard
  return true;
}

void crumbs__altstack_give_install_thread(void) {
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_ONSTACK) &&
      ((current.ss_flags & SS_DISABLE) || current.ss_size < crumbs__stack_size) &&
      crumbs__install_altstack_tid == 0) {
    stack_t ours = {.ss_sp = crumbs__install_altstack, .ss_flags = 0,
                    .ss_size = crumbs__stack_size};
    if (sigaltstack(&ours, NULL) == 0) {
      crumbs__previous_altstack = current;
      crumbs__install_altstack_tid = crumbs__gettid();
    }
  }
}

void crumbs__altstack_restore_install_thread(void) {
  if (crumbs__install_altstack_tid != 0 && crumbs__install_altstack_tid == crumbs__gettid()) {
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && current.ss_sp == crumbs__install_altstack &&
        !(current.ss_flags & SS_ONSTACK)) {
      sigaltstack(&crumbs__previous_altstack, NULL);
    }
    crumbs__install_altstack_tid = 0;
  }
}

void crumbs__altstack_resolve_calls(void) {
  stack_t stack;
  sigaltstack(NULL, &stack);
  mprotect(crumbs__pool, 4096u, PROT_NONE); // already so: binds mprotect for the hook
  syscall(SYS_tgkill, getpid(), (pid_t)crumbs__gettid(), 0);
}

void crumbs__altstack_start(void) {
  __atomic_store_n(&crumbs__first_append_hook, crumbs__altstack_first_append, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__pool_enabled, 1, __ATOMIC_RELEASE);
}

void crumbs__altstack_stop(void) {
  __atomic_store_n(&crumbs__first_append_hook, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__pool_enabled, 0, __ATOMIC_RELEASE);
}
