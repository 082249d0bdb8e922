// crumbs_altstack.c — the alternate signal stacks the crash handler runs on, so that a stack
// overflow (a fault with no stack left to run a handler on) is still recorded: a pool reserved
// at install, handed out in O(1) on a thread's first append or start, grown by chunks in set-up
// context, given back at thread exit and in a forked child.
// Design (which threads, the pool, the key, mappings): docs/crash-capture.md#alternate-stacks
//
// Entry points in call order: see crumbs_altstack.h.
//
// ASYNC-SIGNAL-SAFE: crumbs__altstack_first_append (the hook) and what it calls. libc calls:
// sigaltstack (once; twice for a thread that keeps its own larger stack), pthread_setspecific
// (key below 32 only). No malloc, no locks; preserves errno. The key's destructor and the fork
// handler run at thread exit and in a forked child, ordinary contexts; they call sigaltstack
// (destructor) and nothing else, and are signal-safe as well.
// Set-up only (not signal-safe): reserve (mmap, madvise or mprotect, pthread_key_create,
// pthread_atfork, sysconf), give_install_thread, restore_install_thread, resolve_calls, start, stop,
// give_this_thread (sigaltstack, pthread_setspecific; mmap, madvise or mprotect, sched_yield
// when the pool is used up and grows).

#define _GNU_SOURCE
#include "process/crumbs_altstack.h"

// MADV_GUARD_INSTALL (Linux 6.13), spelled out for older headers; older kernels refuse it.
#define CRUMBS__MADV_GUARD_INSTALL 102

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

// Defined in crumbs_ring.c: called once per thread on its first append. Signal context possible.
extern void (*crumbs__first_append_hook)(void);

// The run-time page size (4, 16 or 64 KiB on aarch64 kernels): every guard is one page, every
// stack a whole number of pages, so each guard starts on a page boundary. Written once by
// reserve, before any stack is handed out.
static size_t crumbs__altstack_page = 4096u;
#define CRUMBS__ALTSTACK_GUARD crumbs__altstack_page

// MARK: - State

// The first pool: count + 1 stacks, each above its guard page. Written once by reserve.
static unsigned char *crumbs__altstack_pool;
static uint32_t crumbs__altstack_count;
static uint32_t crumbs__altstack_size;
static int crumbs__altstack_enabled; // atomic: the hook hands out stacks

// A stack is named by a number ("taken") so that 0 can mean none: 1…count are the first pool's,
// count + 1 is the installing thread's, and count + 2 + k the stack k of the chunks the pool grew
// by (chunk k / CRUMBS__ALTSTACK_CHUNK, slot k % CRUMBS__ALTSTACK_CHUNK). First-pool stacks
// fresh + 1…count have never been handed out.
static uint32_t crumbs__altstack_fresh; // atomic
// The free list (Treiber stack): (tag << 32) | taken of the top, 0 when empty. The tag counts
// changes, so a pop racing with a pop-and-push of the same top fails its compare-exchange.
static uint64_t crumbs__altstack_free;                             // atomic
static uint32_t crumbs__altstack_next[CRUMBS__ALTSTACK_MAX_COUNT]; // atomic: taken below, 0 ends

// The chunks the pool grew by, each one mapping: a header page (the free list's links of its
// stacks), then CRUMBS__ALTSTACK_CHUNK stacks, each above its guard page. A chunk's pointer is
// stored (release) before any of its stacks is on the free list, and never changes: readers
// (the hook, in a signal handler) load it without a lock. `reserved` counts indices handed to
// growers (a chunk whose mapping failed or is not yet stored reads NULL).
#define CRUMBS__ALTSTACK_CHUNK 64u
#define CRUMBS__ALTSTACK_MAX_CHUNKS 4096u
#define CRUMBS__ALTSTACK_HEADER crumbs__altstack_page
_Static_assert(CRUMBS__ALTSTACK_CHUNK * sizeof(uint32_t) <= 4096u, "a chunk's links fit its header page");
static unsigned char *crumbs__altstack_chunks[CRUMBS__ALTSTACK_MAX_CHUNKS]; // atomic
static uint32_t crumbs__altstack_chunks_reserved;                           // atomic
// 1 while a thread grows the pool; the others wait for its chunk rather than map their own.
static int crumbs__altstack_growing; // atomic

// The key whose destructor gives a stack back; where it may be set (see the design above).
static pthread_key_t crumbs__altstack_key;
enum { CRUMBS__KEY_NONE, CRUMBS__KEY_SETUP_ONLY, CRUMBS__KEY_ANYWHERE };
static int crumbs__altstack_key_use = CRUMBS__KEY_NONE;

// The stack this thread holds from us (taken; count + 1 for the installing thread's), 0: none.
static __thread uint32_t crumbs__altstack_mine __attribute__((tls_model("initial-exec")));
// Whether threads created from now on get a stack (crumbs_thread_start.c asks); atomic.
static int crumbs__altstack_new_threads;

// The installing thread's alternate stack before ours, restored by uninstall on that thread.
static stack_t crumbs__altstack_previous;
static int crumbs__altstack_install_given;

static size_t crumbs__altstack_stride(void) { return (size_t)crumbs__altstack_size + CRUMBS__ALTSTACK_GUARD; }

/// The chunk holding grown stack `taken` (> count + 1) and its slot there; NULL when `taken`
/// names no stored chunk. Safe to call from a signal handler (loads only).
static unsigned char *crumbs__altstack_chunk_of(uint32_t taken, uint32_t *slot) {
  uint32_t grown = taken - crumbs__altstack_count - 2;
  uint32_t chunk = grown / CRUMBS__ALTSTACK_CHUNK;
  *slot = grown % CRUMBS__ALTSTACK_CHUNK;
  if (chunk >= CRUMBS__ALTSTACK_MAX_CHUNKS) return NULL;
  return __atomic_load_n(&crumbs__altstack_chunks[chunk], __ATOMIC_ACQUIRE);
}

/// Whether `taken` names a stack that may go on the free list: the first pool's or a grown one.
static bool crumbs__altstack_poolable(uint32_t taken) {
  if (taken == 0 || taken == crumbs__altstack_count + 1) return false;
  if (taken <= crumbs__altstack_count) return true;
  uint32_t slot;
  return crumbs__altstack_chunk_of(taken, &slot) != NULL;
}

/// Where the free list's link of stack `taken` lives (first pool or grown; never the installing
/// thread's). Safe to call from a signal handler.
static uint32_t *crumbs__altstack_link(uint32_t taken) {
  if (taken <= crumbs__altstack_count) return &crumbs__altstack_next[taken - 1];
  uint32_t slot;
  unsigned char *chunk = crumbs__altstack_chunk_of(taken, &slot);
  return (uint32_t *)(void *)chunk + slot;
}

static unsigned char *crumbs__altstack_stack(uint32_t taken) {
  if (taken <= crumbs__altstack_count + 1) {
    return crumbs__altstack_pool + (size_t)(taken - 1) * crumbs__altstack_stride() + CRUMBS__ALTSTACK_GUARD;
  }
  uint32_t slot;
  unsigned char *chunk = crumbs__altstack_chunk_of(taken, &slot);
  return chunk + CRUMBS__ALTSTACK_HEADER + (size_t)slot * crumbs__altstack_stride() + CRUMBS__ALTSTACK_GUARD;
}

void *crumbs__altstack_guard_at(unsigned index) {
  if (crumbs__altstack_pool == NULL || index > crumbs__altstack_count) return NULL;
  return crumbs__altstack_pool + (size_t)index * crumbs__altstack_stride();
}

// MARK: - The pool (lock-free; async-signal-safe)

/// A stack from the free list, else a never-used one of the first pool, else 0. O(1) but for
/// compare-exchange retries under contention; no system call. Safe to call from a signal handler.
static uint32_t crumbs__altstack_take(void) {
  uint64_t head = __atomic_load_n(&crumbs__altstack_free, __ATOMIC_ACQUIRE);
  while ((uint32_t)head != 0) {
    uint32_t top = (uint32_t)head;
    uint32_t below = __atomic_load_n(crumbs__altstack_link(top), __ATOMIC_RELAXED);
    uint64_t popped = (((head >> 32) + 1) << 32) | below;
    if (__atomic_compare_exchange_n(&crumbs__altstack_free, &head, popped, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_ACQUIRE)) {
      return top;
    }
  }
  uint32_t fresh = __atomic_load_n(&crumbs__altstack_fresh, __ATOMIC_RELAXED);
  while (fresh < crumbs__altstack_count) {
    if (__atomic_compare_exchange_n(&crumbs__altstack_fresh, &fresh, fresh + 1, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
      return fresh + 1;
    }
  }
  return 0;
}

/// Puts a stack no thread uses any more on the free list. No system call. Safe to call from a
/// signal handler.
static void crumbs__altstack_give_back(uint32_t taken) {
  uint32_t *link = crumbs__altstack_link(taken);
  uint64_t head = __atomic_load_n(&crumbs__altstack_free, __ATOMIC_RELAXED);
  uint64_t pushed;
  do {
    __atomic_store_n(link, (uint32_t)head, __ATOMIC_RELAXED);
    pushed = (((head >> 32) + 1) << 32) | taken;
  } while (!__atomic_compare_exchange_n(&crumbs__altstack_free, &head, pushed, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
}

// MARK: - Giving a thread a stack

typedef enum crumbs__altstack_outcome {
  CRUMBS__ALTSTACK_OURS,      // the thread now runs its handlers on one of ours
  CRUMBS__ALTSTACK_ITS_OWN,   // it keeps its own (at least as large, or it is running on it)
  CRUMBS__ALTSTACK_NONE_FREE, // the pool is used up: nothing changed
} crumbs__altstack_outcome;

/// Makes stack `taken` the calling thread's alternate stack, unless the thread already has one
/// at least as large (then `taken` goes back to the pool). System calls: one sigaltstack; a
/// second only to give a thread its own larger stack back. Records the stack in the key when
/// that is safe in a signal handler (key below 32); set-up callers record it themselves. Safe to
/// call from a signal handler (sigaltstack, pthread_setspecific on a key below 32).
static crumbs__altstack_outcome crumbs__altstack_adopt(uint32_t taken) {
  stack_t ours = {.ss_sp = crumbs__altstack_stack(taken), .ss_flags = 0, .ss_size = crumbs__altstack_size};
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
/// call from one (what crumbs__altstack_take and crumbs__altstack_adopt call). Preserves errno.
static void crumbs__altstack_first_append(void) {
  if (!__atomic_load_n(&crumbs__altstack_enabled, __ATOMIC_ACQUIRE)) return;
  if (crumbs__altstack_mine != 0) return;
  int saved_errno = errno;
  uint32_t taken = crumbs__altstack_take();
  if (taken != 0) (void)crumbs__altstack_adopt(taken);
  errno = saved_errno;
}

// Whether the guards are guard regions (else PROT_NONE pages); set by reserve.
static bool crumbs__altstack_guard_regions;

/// Makes the page at `guard` fault on any access: a guard region, else PROT_NONE (which splits
/// the mapping). A failure leaves the stack above it unguarded, still usable. Set-up context.
static void crumbs__altstack_set_guard(unsigned char *guard) {
  if (crumbs__altstack_guard_regions) {
    madvise(guard, CRUMBS__ALTSTACK_GUARD, CRUMBS__MADV_GUARD_INSTALL);
  } else {
    mprotect(guard, CRUMBS__ALTSTACK_GUARD, PROT_NONE);
  }
}

/// The pool grows by one chunk (see the design above): returns a stack of it for the caller,
/// its other stacks on the free list; or a stack another thread's growth freed meanwhile; or 0
/// (no room for a chunk, or the mapping failed: the thread goes without). Set-up context only
/// (mmap, madvise or mprotect, sched_yield).
static uint32_t crumbs__altstack_grow(void) {
  // Wait for a growth under way rather than map a chunk of our own; a bounded wait: when the
  // grower is slow (descheduled), a thread that gave up waiting maps a spare chunk (a mapping
  // more, its stacks kept for later threads), never goes without.
  bool holding = false;
  for (int round = 0; round < 1000 && !holding; round++) {
    uint32_t taken = crumbs__altstack_take();
    if (taken != 0) return taken;
    int idle = 0;
    holding = __atomic_compare_exchange_n(&crumbs__altstack_growing, &idle, 1, false, __ATOMIC_ACQUIRE,
                                          __ATOMIC_RELAXED);
    if (!holding) sched_yield();
  }
  uint32_t taken = crumbs__altstack_take(); // one freed while we waited, or the last grower's
  if (taken == 0) {
    uint32_t chunk = __atomic_fetch_add(&crumbs__altstack_chunks_reserved, 1, __ATOMIC_RELAXED);
    size_t stride = crumbs__altstack_stride();
    size_t total = CRUMBS__ALTSTACK_HEADER + (size_t)CRUMBS__ALTSTACK_CHUNK * stride;
    void *mapping =
        chunk < CRUMBS__ALTSTACK_MAX_CHUNKS
            ? mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
            : MAP_FAILED;
    if (mapping != MAP_FAILED) {
      unsigned char *base = (unsigned char *)mapping;
      for (uint32_t slot = 0; slot < CRUMBS__ALTSTACK_CHUNK; slot++) {
        crumbs__altstack_set_guard(base + CRUMBS__ALTSTACK_HEADER + (size_t)slot * stride);
      }
      __atomic_store_n(&crumbs__altstack_chunks[chunk], base, __ATOMIC_RELEASE);
      uint32_t first = crumbs__altstack_count + 2 + chunk * CRUMBS__ALTSTACK_CHUNK;
      for (uint32_t slot = CRUMBS__ALTSTACK_CHUNK - 1; slot > 0; slot--) {
        crumbs__altstack_give_back(first + slot);
      }
      taken = first;
    }
  }
  if (holding) __atomic_store_n(&crumbs__altstack_growing, 0, __ATOMIC_RELEASE);
  return taken;
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
    stack_t ours = {.ss_sp = crumbs__altstack_stack(crumbs__altstack_mine),
                    .ss_flags = 0,
                    .ss_size = crumbs__altstack_size};
    has_one = sigaltstack(&ours, NULL) == 0;
  } else if (!has_one) {
    uint32_t taken = crumbs__altstack_take();
    // A stack mapped now is one no thread could have had: record it in the key below, even
    // where the hook cannot (it never reaches the pool's growth).
    if (taken == 0 && crumbs__altstack_key_use != CRUMBS__KEY_NONE) {
      taken = crumbs__altstack_grow();
    }
    has_one = taken != 0 && crumbs__altstack_adopt(taken) != CRUMBS__ALTSTACK_NONE_FREE;
  }
  uint32_t mine = crumbs__altstack_mine;
  if (crumbs__altstack_poolable(mine) && crumbs__altstack_key_use != CRUMBS__KEY_NONE) {
    // Set-up context: any key may be set here, so a stack the hook could not record is now.
    pthread_setspecific(crumbs__altstack_key, (void *)(uintptr_t)mine);
  }
  errno = saved_errno;
  return has_one;
}

// MARK: - Giving stacks back

/// The key's destructor: the thread is exiting. Its stack goes back to the pool once the
/// thread can no longer run a handler on it. Runs at thread exit (not a signal handler, though
/// it would be safe in one: sigaltstack and atomics). Preserves errno.
static void crumbs__altstack_thread_exit(void *value) {
  uint32_t taken = (uint32_t)(uintptr_t)value;
  if (!crumbs__altstack_poolable(taken)) return;
  int saved_errno = errno;
  stack_t current;
  if (sigaltstack(NULL, &current) == 0) {
    bool still_ours = current.ss_sp == crumbs__altstack_stack(taken) && !(current.ss_flags & SS_DISABLE);
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
/// another thread, or a growth, in half). Runs in the child after fork; no libc calls, no
/// system calls; O(stacks handed out).
static void crumbs__altstack_after_fork(void) {
  uint32_t handed_out = __atomic_load_n(&crumbs__altstack_fresh, __ATOMIC_RELAXED);
  if (handed_out > crumbs__altstack_count) handed_out = crumbs__altstack_count;
  __atomic_store_n(&crumbs__altstack_free, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&crumbs__altstack_growing, 0, __ATOMIC_RELAXED);
  for (uint32_t taken = 1; taken <= handed_out; taken++) {
    if (taken != crumbs__altstack_mine) crumbs__altstack_give_back(taken);
  }
  uint32_t chunks = __atomic_load_n(&crumbs__altstack_chunks_reserved, __ATOMIC_RELAXED);
  if (chunks > CRUMBS__ALTSTACK_MAX_CHUNKS) chunks = CRUMBS__ALTSTACK_MAX_CHUNKS;
  for (uint32_t chunk = 0; chunk < chunks; chunk++) {
    // A chunk whose growth the fork cut short before it was stored stays unused.
    if (__atomic_load_n(&crumbs__altstack_chunks[chunk], __ATOMIC_RELAXED) == NULL) continue;
    uint32_t first = crumbs__altstack_count + 2 + chunk * CRUMBS__ALTSTACK_CHUNK;
    for (uint32_t slot = 0; slot < CRUMBS__ALTSTACK_CHUNK; slot++) {
      if (first + slot != crumbs__altstack_mine) crumbs__altstack_give_back(first + slot);
    }
  }
}

// MARK: - Set-up

// How many stacks of the first pool (the install thread's, index count, included) have their
// guard so far.
static uint32_t crumbs__altstack_guarded;

static void crumbs__altstack_guard(uint32_t upto) {
  for (uint32_t index = crumbs__altstack_guarded; index <= upto && index <= crumbs__altstack_count; index++) {
    crumbs__altstack_set_guard(crumbs__altstack_pool + (size_t)index * crumbs__altstack_stride());
    crumbs__altstack_guarded = index + 1;
  }
}

void crumbs__altstack_guard_rest(void) {
  if (crumbs__altstack_pool != NULL) crumbs__altstack_guard(crumbs__altstack_count);
}

bool crumbs__altstack_reserve(uint32_t size, uint32_t count, uint32_t eager) {
  if (crumbs__altstack_pool != NULL) return true;
  if (size == 0) size = CRUMBS__ALTSTACK_DEFAULT_SIZE;
  long page = sysconf(_SC_PAGESIZE);
  if (page >= 4096 && (page & (page - 1)) == 0 && page <= (1l << 20)) crumbs__altstack_page = (size_t)page;
  size = (uint32_t)(((size_t)size + crumbs__altstack_page - 1) & ~(crumbs__altstack_page - 1));
  if (count == 0) count = CRUMBS__ALTSTACK_DEFAULT_COUNT;
  if (count > CRUMBS__ALTSTACK_MAX_COUNT) count = CRUMBS__ALTSTACK_MAX_COUNT;
  size_t stride = (size_t)size + CRUMBS__ALTSTACK_GUARD;
  size_t total = (size_t)(count + 1) * stride; // +1: the install thread's stack
  void *pool = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
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
    crumbs__altstack_key_use = crumbs__altstack_key < 32 ? CRUMBS__KEY_ANYWHERE : CRUMBS__KEY_SETUP_ONLY;
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
    stack_t ours = {.ss_sp = crumbs__altstack_stack(install),
                    .ss_flags = 0,
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
