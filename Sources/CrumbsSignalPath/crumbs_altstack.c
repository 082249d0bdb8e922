// crumbs_altstack.c — the alternate signal stacks the crash handler runs on, so that a stack
// overflow (a fault with no stack left to run a handler on) is still recorded.
//
// Which threads get one: the installing thread (a stack of its own, at install), every thread
// created after install (our pthread_create runs crumbs_crash_prepare_thread first on the new
// thread: crumbs_thread_start.c), every thread on its first breadcrumb (the ring's
// once-per-thread slow path calls our hook), and every thread that calls
// crumbs_crash_prepare_thread. A thread that already has an alternate stack at least as large
// keeps its own.
//
// Entry points in call order: see crumbs_altstack.h.
//
// Design: the first append is the ring's hot path, which promises no system calls beyond the
// thread's tid once (crumbs_ring_append.h), and it may run inside a signal handler. So all the
// work that costs system calls or scales with the pool happens elsewhere:
//   - at install (crumbs__altstack_reserve): one mapping for every stack, and every stack's
//     guard page below it (count + 1 madvise(MADV_GUARD_INSTALL) calls where the kernel has
//     guard regions, about 0.5 µs each; else count + 1 mprotect(PROT_NONE) calls, about 2 µs
//     each on our x86_64 Debian VMs: 0.14 ms for the default 64), a pthread key whose destructor
//     gives a stack back, and a fork handler;
//   - on the first append (the hook), in O(1): pop a stack from a lock-free free list, or claim
//     the next never-used one with an atomic index; then exactly one system call,
//     sigaltstack(ours, &previous), which installs ours and reads what the thread had in one go.
//     Only a thread that already had an alternate stack at least as large (its own, set by the
//     app) makes a second one, to put its own back; ours returns to the pool. Pool used up
//     (every stack held by a live thread): no system call at all, the thread goes without;
//   - set-up context (a new thread's start, crumbs_crash_prepare_thread) with the pool used up:
//     the pool grows by one stack of the thread's own, mapped with its guard page (mmap,
//     mprotect), recorded in the key (any key may be set there) and unmapped at its exit. So no
//     thread created after install goes without, however many there are at once; only the
//     signal-safe hook, which makes no mapping, can find nothing left;
//   - at thread exit (the key's destructor, off the hot path): disable the thread's alternate
//     stack if it is still ours (sigaltstack), then push a pool stack on the free list, or unmap
//     a thread's own. A stack is never on the free list (or unmapped) while a live thread may
//     still run on it;
//   - in a forked child (pthread_atfork): only the forking thread survives, so every stack
//     handed out to another thread is free again; the list is rebuilt without system calls.
// The hook records the stack in the key with pthread_setspecific only when our key is below 32:
// glibc (2.36 nptl/pthread_setspecific.c) keeps the values of keys 0…31 in the thread descriptor
// itself, so setting one is two stores, no lock, no allocation, which is safe in a signal
// handler; the value of a larger key lives in a block calloc'ed on the thread's first use. Our
// key is below 32 unless the process had created 32 keys before the crash handler was installed
// (this repository's Swift test child had created 3 by then). With a larger key the hook still hands out stacks, but
// only crumbs_crash_prepare_thread (set-up context) records them for reuse: the stack of a thread
// that only appended stays taken after that thread exits (until a fork: the child frees it).
//
// ASYNC-SIGNAL-SAFE: crumbs__altstack_first_append (the hook) and what it calls. libc calls:
// sigaltstack (once; twice for a thread that keeps its own larger stack), pthread_setspecific
// (key below 32 only, see above). No malloc, no locks; preserves errno.
// The key's destructor and the fork handler run at thread exit and in a forked child, ordinary
// contexts; they call sigaltstack (destructor) and nothing else, and are signal-safe as well.
// Set-up only (not signal-safe): reserve (mmap, madvise or mprotect, pthread_key_create,
// pthread_atfork), give_install_thread, restore_install_thread, resolve_calls, start, stop,
// give_this_thread (sigaltstack, pthread_setspecific; mmap and mprotect when the pool is used
// up). The key's destructor also calls munmap for a thread's own stack.

#define _GNU_SOURCE
#include "crumbs_altstack.h"
#include "crumbs_crash_testing.h"

// MADV_GUARD_INSTALL (Linux 6.13), spelled out for older headers; older kernels refuse it.
#define CRUMBS__MADV_GUARD_INSTALL 102

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>

// Defined in crumbs_ring.c: called once per thread on its first append. Signal context possible.
extern void (*crumbs__first_append_hook)(void);

#define CRUMBS__ALTSTACK_GUARD 4096u

// MARK: - State

// The mapping: count + 1 stacks, each above a PROT_NONE guard page. Written once by reserve.
static unsigned char *crumbs__altstack_pool;
static uint32_t crumbs__altstack_count;
static uint32_t crumbs__altstack_size;
static int crumbs__altstack_enabled; // atomic: the hook hands out stacks

// A stack is named by its index + 1 ("taken"), so that 0 can mean none: 1…count are the pool,
// count + 1 is the installing thread's. Pool stacks fresh + 1…count have never been handed out.
static uint32_t crumbs__altstack_fresh; // atomic
// The free list (Treiber stack): (tag << 32) | taken of the top, 0 when empty. The tag counts
// changes, so a pop racing with a pop-and-push of the same top fails its compare-exchange.
static uint64_t crumbs__altstack_free;                                // atomic
static uint32_t crumbs__altstack_next[CRUMBS__ALTSTACK_MAX_COUNT];   // atomic: taken below, 0 ends

// The key whose destructor gives a stack back; where it may be set (see the design above).
static pthread_key_t crumbs__altstack_key;
enum { CRUMBS__KEY_NONE, CRUMBS__KEY_SETUP_ONLY, CRUMBS__KEY_ANYWHERE };
static int crumbs__altstack_key_use = CRUMBS__KEY_NONE;

// The stack this thread holds from us (taken; count + 1 for the installing thread's;
// CRUMBS__ALTSTACK_OWN for one mapped for this thread alone), 0: none.
static __thread uint32_t crumbs__altstack_mine __attribute__((tls_model("initial-exec")));
// With CRUMBS__ALTSTACK_OWN: the thread's own mapping (guard page first, then the stack).
static __thread unsigned char *crumbs__altstack_own __attribute__((tls_model("initial-exec")));
#define CRUMBS__ALTSTACK_OWN UINT32_MAX
// Whether threads created from now on get a stack (crumbs_thread_start.c asks); atomic.
static int crumbs__altstack_new_threads;

// The installing thread's alternate stack before ours, restored by uninstall on that thread.
static stack_t crumbs__altstack_previous;
static int crumbs__altstack_install_given;

static unsigned char *crumbs__altstack_stack(uint32_t taken) {
  if (taken == CRUMBS__ALTSTACK_OWN) return crumbs__altstack_own + CRUMBS__ALTSTACK_GUARD;
  return crumbs__altstack_pool +
         (size_t)(taken - 1) * (crumbs__altstack_size + CRUMBS__ALTSTACK_GUARD) +
         CRUMBS__ALTSTACK_GUARD;
}

// Tests only (crumbs_crash_testing.h).
void *crumbs_crash_testing_altstack_guard(unsigned index) {
  if (crumbs__altstack_pool == NULL || index > crumbs__altstack_count) return NULL;
  return crumbs__altstack_pool + (size_t)index * (crumbs__altstack_size + CRUMBS__ALTSTACK_GUARD);
}

// MARK: - The pool (lock-free; async-signal-safe)

/// A stack from the free list, else a never-used one, else 0. O(1) but for compare-exchange
/// retries under contention; no system call. Safe to call from a signal handler.
static uint32_t crumbs__altstack_take(void) {
  uint64_t head = __atomic_load_n(&crumbs__altstack_free, __ATOMIC_ACQUIRE);
  while ((uint32_t)head != 0) {
    uint32_t top = (uint32_t)head;
    uint32_t below = __atomic_load_n(&crumbs__altstack_next[top - 1], __ATOMIC_RELAXED);
    uint64_t popped = (((head >> 32) + 1) << 32) | below;
    if (__atomic_compare_exchange_n(&crumbs__altstack_free, &head, popped, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
      return top;
    }
  }
  uint32_t fresh = __atomic_load_n(&crumbs__altstack_fresh, __ATOMIC_RELAXED);
  while (fresh < crumbs__altstack_count) {
    if (__atomic_compare_exchange_n(&crumbs__altstack_fresh, &fresh, fresh + 1, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      return fresh + 1;
    }
  }
  return 0;
}

/// Puts a pool stack no thread uses any more on the free list. No system call. Safe to call
/// from a signal handler.
static void crumbs__altstack_give_back(uint32_t taken) {
  uint64_t head = __atomic_load_n(&crumbs__altstack_free, __ATOMIC_RELAXED);
  uint64_t pushed;
  do {
    __atomic_store_n(&crumbs__altstack_next[taken - 1], (uint32_t)head, __ATOMIC_RELAXED);
    pushed = (((head >> 32) + 1) << 32) | taken;
  } while (!__atomic_compare_exchange_n(&crumbs__altstack_free, &head, pushed, false,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

// MARK: - Giving a thread a stack

typedef enum crumbs__altstack_outcome {
  CRUMBS__ALTSTACK_OURS,     // the thread now runs its handlers on one of ours
  CRUMBS__ALTSTACK_ITS_OWN,  // it keeps its own (at least as large, or it is running on it)
  CRUMBS__ALTSTACK_NONE_FREE, // the pool is used up: nothing changed
} crumbs__altstack_outcome;

/// Takes a pool stack and makes it the calling thread's alternate stack, unless the thread
/// already has one at least as large. System calls: one sigaltstack; a second only to give a
/// thread its own larger stack back. Records the stack in the key when that is safe in a signal
/// handler (key below 32); set-up callers record it themselves. Safe to call from a signal
/// handler (sigaltstack, pthread_setspecific on a key below 32).
static crumbs__altstack_outcome crumbs__altstack_adopt(void) {
  uint32_t taken = crumbs__altstack_take();
  if (taken == 0) return CRUMBS__ALTSTACK_NONE_FREE;
  stack_t ours = {.ss_sp = crumbs__altstack_stack(taken), .ss_flags = 0,
                  .ss_size = crumbs__altstack_size};
  stack_t previous;
  if (sigaltstack(&ours, &previous) != 0) {
    // EPERM: the thread is running on its alternate stack right now (its first append is in a
    // handler on it), which the kernel does not let us change; it keeps that one.
    crumbs__altstack_give_back(taken);
    return CRUMBS__ALTSTACK_ITS_OWN;
  }
  if (!(previous.ss_flags & SS_DISABLE) && previous.ss_size >= crumbs__altstack_size &&
      sigaltstack(&previous, NULL) == 0) {
    crumbs__altstack_give_back(taken);
    return CRUMBS__ALTSTACK_ITS_OWN;
  }
  crumbs__altstack_mine = taken;
  if (crumbs__altstack_key_use == CRUMBS__KEY_ANYWHERE) {
    pthread_setspecific(crumbs__altstack_key, (void *)(uintptr_t)taken);
  }
  return CRUMBS__ALTSTACK_OURS;
}

/// The ring's first-append hook. Runs once per thread, possibly in a signal handler: safe to
/// call from one (what crumbs__altstack_adopt calls). Preserves errno.
static void crumbs__altstack_first_append(void) {
  if (!__atomic_load_n(&crumbs__altstack_enabled, __ATOMIC_ACQUIRE)) return;
  if (crumbs__altstack_mine != 0) return;
  int saved_errno = errno;
  (void)crumbs__altstack_adopt();
  errno = saved_errno;
}

/// The pool grows by one: a stack mapped for the calling thread alone, with its guard page,
/// made its alternate stack and recorded in the key (so its exit unmaps it). Set-up context
/// only (mmap, mprotect, sigaltstack, pthread_setspecific on any key). Returns whether the
/// thread has it.
static bool crumbs__altstack_map_own(void) {
  if (crumbs__altstack_key_use == CRUMBS__KEY_NONE) return false; // it could never be unmapped
  size_t total = (size_t)crumbs__altstack_size + CRUMBS__ALTSTACK_GUARD;
  void *mapping = mmap(NULL, total, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return false;
  mprotect(mapping, CRUMBS__ALTSTACK_GUARD, PROT_NONE); // failed: unguarded, still usable
  stack_t ours = {.ss_sp = (unsigned char *)mapping + CRUMBS__ALTSTACK_GUARD, .ss_flags = 0,
                  .ss_size = crumbs__altstack_size};
  if (sigaltstack(&ours, NULL) != 0 ||
      pthread_setspecific(crumbs__altstack_key, mapping) != 0) {
    stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    sigaltstack(&off, NULL);
    munmap(mapping, total);
    return false;
  }
  crumbs__altstack_own = (unsigned char *)mapping;
  crumbs__altstack_mine = CRUMBS__ALTSTACK_OWN;
  return true;
}

bool crumbs__altstack_give_this_thread(void) {
  if (!__atomic_load_n(&crumbs__altstack_enabled, __ATOMIC_ACQUIRE)) return false;
  int saved_errno = errno;
  stack_t current;
  bool has_one = false;
  if (sigaltstack(NULL, &current) == 0) {
    has_one = !(current.ss_flags & SS_DISABLE) && current.ss_size >= crumbs__altstack_size;
    if (current.ss_flags & SS_ONSTACK) has_one = true; // cannot change it while running on it
  }
  if (!has_one && crumbs__altstack_mine != 0) {
    // Ours was replaced or disabled since: point at it again.
    stack_t ours = {.ss_sp = crumbs__altstack_stack(crumbs__altstack_mine), .ss_flags = 0,
                    .ss_size = crumbs__altstack_size};
    has_one = sigaltstack(&ours, NULL) == 0;
  } else if (!has_one) {
    has_one = crumbs__altstack_adopt() != CRUMBS__ALTSTACK_NONE_FREE || crumbs__altstack_map_own();
  }
  uint32_t mine = crumbs__altstack_mine;
  if (mine != 0 && mine <= crumbs__altstack_count &&
      crumbs__altstack_key_use != CRUMBS__KEY_NONE) {
    // Set-up context: any key may be set here, so a stack the hook could not record is now.
    pthread_setspecific(crumbs__altstack_key, (void *)(uintptr_t)mine);
  }
  errno = saved_errno;
  return has_one;
}

// MARK: - Giving stacks back

/// The exiting thread's own stack (crumbs__altstack_map_own): off, then unmapped, unless the
/// thread is running on it (exiting from a handler on it): then it stays mapped. Runs in the
/// key's destructor. Preserves errno.
static void crumbs__altstack_release_own(void) {
  int saved_errno = errno;
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_ONSTACK)) {
    bool still_ours = current.ss_sp == crumbs__altstack_own + CRUMBS__ALTSTACK_GUARD &&
                      !(current.ss_flags & SS_DISABLE);
    stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    if (!still_ours || sigaltstack(&off, NULL) == 0) {
      munmap(crumbs__altstack_own, (size_t)crumbs__altstack_size + CRUMBS__ALTSTACK_GUARD);
      crumbs__altstack_own = NULL;
      crumbs__altstack_mine = 0;
    }
  }
  errno = saved_errno;
}

/// The key's destructor: the thread is exiting. Its stack goes back to the pool once the
/// thread can no longer run a handler on it. Runs at thread exit (not a signal handler, though
/// it would be safe in one: sigaltstack and atomics). Preserves errno.
static void crumbs__altstack_thread_exit(void *value) {
  if (value != NULL && value == crumbs__altstack_own) {
    crumbs__altstack_release_own();
    return;
  }
  uint32_t taken = (uint32_t)(uintptr_t)value;
  if (taken == 0 || taken > crumbs__altstack_count) return;
  int saved_errno = errno;
  stack_t current;
  if (sigaltstack(NULL, &current) == 0) {
    bool still_ours =
        current.ss_sp == crumbs__altstack_stack(taken) && !(current.ss_flags & SS_DISABLE);
    bool released = !still_ours;
    if (still_ours && !(current.ss_flags & SS_ONSTACK)) {
      stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
      released = sigaltstack(&off, NULL) == 0;
    }
    // Not released (exiting from a handler running on it): the stack stays taken, never shared.
    if (released) {
      crumbs__altstack_mine = 0;
      crumbs__altstack_give_back(taken);
    }
  }
  errno = saved_errno;
}

/// In a forked child only the forking thread exists: every stack handed out to another thread
/// is free again. Rebuilds the free list from scratch (the fork may have cut a push or pop of
/// another thread in half). Runs in the child after fork; no libc calls, no system calls.
static void crumbs__altstack_after_fork(void) {
  uint32_t handed_out = __atomic_load_n(&crumbs__altstack_fresh, __ATOMIC_RELAXED);
  if (handed_out > crumbs__altstack_count) handed_out = crumbs__altstack_count;
  __atomic_store_n(&crumbs__altstack_free, 0, __ATOMIC_RELAXED);
  for (uint32_t taken = 1; taken <= handed_out; taken++) {
    if (taken != crumbs__altstack_mine) crumbs__altstack_give_back(taken);
  }
}

// MARK: - Set-up

// Whether the pool's guards are guard regions (else PROT_NONE pages), and how many stacks (the
// install thread's, index 0, included) have theirs so far.
static bool crumbs__altstack_guard_regions;
static uint32_t crumbs__altstack_guarded;

static void crumbs__altstack_guard(uint32_t upto) {
  size_t stride = (size_t)crumbs__altstack_size + CRUMBS__ALTSTACK_GUARD;
  for (uint32_t index = crumbs__altstack_guarded; index <= upto && index <= crumbs__altstack_count;
       index++) {
    unsigned char *guard = crumbs__altstack_pool + (size_t)index * stride;
    if (crumbs__altstack_guard_regions) {
      madvise(guard, CRUMBS__ALTSTACK_GUARD, CRUMBS__MADV_GUARD_INSTALL);
    } else {
      mprotect(guard, CRUMBS__ALTSTACK_GUARD, PROT_NONE);
    }
    crumbs__altstack_guarded = index + 1;
  }
}

void crumbs__altstack_guard_rest(void) {
  if (crumbs__altstack_pool != NULL) crumbs__altstack_guard(crumbs__altstack_count);
}

bool crumbs__altstack_reserve(uint32_t size, uint32_t count, uint32_t eager) {
  if (crumbs__altstack_pool != NULL) return true;
  if (size == 0) size = CRUMBS__ALTSTACK_DEFAULT_SIZE;
  size = (size + 4095u) & ~4095u;
  if (count == 0) count = CRUMBS__ALTSTACK_DEFAULT_COUNT;
  if (count > CRUMBS__ALTSTACK_MAX_COUNT) count = CRUMBS__ALTSTACK_MAX_COUNT;
  size_t stride = (size_t)size + CRUMBS__ALTSTACK_GUARD;
  size_t total = (size_t)(count + 1) * stride; // +1: the install thread's stack
  void *pool = mmap(NULL, total, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (pool == MAP_FAILED) return false;
  crumbs__altstack_pool = (unsigned char *)pool;
  crumbs__altstack_size = size;
  crumbs__altstack_count = count;
  // Guards: the first `eager` stacks' now (every one's when 0), the rest at
  // crumbs__altstack_guard_rest (CrumbsClient does that on its background thread). Stacks are
  // handed out in index order, and a stack handed out before its guard is set works, unguarded
  // for that while, as one whose guard failed (the process at its mapping limit) does for good.
  // Where the kernel has them (Linux 6.13), guard regions: they fault like PROT_NONE pages
  // without splitting the mapping in 2 × count pieces, in about half the time.
  crumbs__altstack_guard_regions = madvise(pool, CRUMBS__ALTSTACK_GUARD, CRUMBS__MADV_GUARD_INSTALL) == 0;
  if (crumbs__altstack_guard_regions) crumbs__altstack_guarded = 1;
  crumbs__altstack_guard(eager == 0 ? count : eager);
  if (pthread_key_create(&crumbs__altstack_key, crumbs__altstack_thread_exit) == 0) {
    crumbs__altstack_key_use = crumbs__altstack_key < 32 ? CRUMBS__KEY_ANYWHERE
                                                         : CRUMBS__KEY_SETUP_ONLY;
  }
  pthread_atfork(NULL, NULL, crumbs__altstack_after_fork);
  return true;
}

void crumbs__altstack_give_install_thread(void) {
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_ONSTACK) &&
      ((current.ss_flags & SS_DISABLE) || current.ss_size < crumbs__altstack_size) &&
      !crumbs__altstack_install_given) {
    uint32_t install = crumbs__altstack_count + 1;
    stack_t ours = {.ss_sp = crumbs__altstack_stack(install), .ss_flags = 0,
                    .ss_size = crumbs__altstack_size};
    if (sigaltstack(&ours, NULL) == 0) {
      crumbs__altstack_previous = current;
      crumbs__altstack_install_given = 1;
      crumbs__altstack_mine = install;
    }
  }
}

void crumbs__altstack_restore_install_thread(void) {
  uint32_t install = crumbs__altstack_count + 1;
  if (!crumbs__altstack_install_given || crumbs__altstack_mine != install) return;
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && current.ss_sp == crumbs__altstack_stack(install) &&
      !(current.ss_flags & SS_ONSTACK)) {
    sigaltstack(&crumbs__altstack_previous, NULL);
  }
  crumbs__altstack_install_given = 0;
  crumbs__altstack_mine = 0;
}

void crumbs__altstack_resolve_calls(void) {
  stack_t stack;
  sigaltstack(NULL, &stack);
  if (crumbs__altstack_key_use != CRUMBS__KEY_NONE) {
    // This thread's value is unchanged (the installing thread's stack is not in the pool).
    pthread_setspecific(crumbs__altstack_key, pthread_getspecific(crumbs__altstack_key));
  }
}

void crumbs__altstack_start(bool new_threads) {
  __atomic_store_n(&crumbs__first_append_hook, crumbs__altstack_first_append, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__altstack_enabled, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__altstack_new_threads, new_threads ? 1 : 0, __ATOMIC_RELEASE);
}

void crumbs__altstack_stop(void) {
  __atomic_store_n(&crumbs__first_append_hook, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__altstack_new_threads, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__altstack_enabled, 0, __ATOMIC_RELEASE);
}

bool crumbs__altstack_covers_new_threads(void) {
  return __atomic_load_n(&crumbs__altstack_new_threads, __ATOMIC_ACQUIRE) != 0;
}
