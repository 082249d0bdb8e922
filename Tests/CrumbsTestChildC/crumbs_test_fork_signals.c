// crumbs_test_fork_signals.c — fork() from a signal handler, and the allocations made in it.
//
// malloc, calloc, realloc, posix_memalign, aligned_alloc and memalign are interposed for the
// whole test child (an executable's definitions come first in symbol lookup) and forwarded to the
// next definition: a library the test preloads (the crash tests' malloc guard must still see
// every call, or their "the handler does not allocate" would hold for nothing), else glibc's.
// The next definitions are found by a constructor; before it, and while dlsym itself allocates,
// glibc's own (__libc_malloc…) serve. While the flag of the calling thread is set (from just
// before fork() to just after it returns in the parent) each call is counted. A fork handler that
// allocates in the parent shows as a count above 0: in a signal handler that interrupted a
// thread inside the allocator, such a call deadlocks or corrupts the heap.

#define _GNU_SOURCE
#include "crumbs_test_fork_signals.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__GLIBC__)
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static __thread int crumbs__test_counting;
static int64_t crumbs__test_allocations; // atomic

static void crumbs__test_count(void) {
  if (crumbs__test_counting) __atomic_add_fetch(&crumbs__test_allocations, 1, __ATOMIC_RELAXED);
}

static void *(*crumbs__test_next_malloc)(size_t);
static void *(*crumbs__test_next_calloc)(size_t, size_t);
static void *(*crumbs__test_next_realloc)(void *, size_t);
static void *(*crumbs__test_next_memalign)(size_t, size_t);

__attribute__((constructor(101))) static void crumbs__test_find_next_allocator(void) {
  void *found_malloc = dlsym(RTLD_NEXT, "malloc");
  void *found_calloc = dlsym(RTLD_NEXT, "calloc");
  void *found_realloc = dlsym(RTLD_NEXT, "realloc");
  void *found_memalign = dlsym(RTLD_NEXT, "memalign");
  __atomic_store_n(&crumbs__test_next_calloc, (void *(*)(size_t, size_t))found_calloc, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__test_next_realloc, (void *(*)(void *, size_t))found_realloc, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__test_next_memalign, (void *(*)(size_t, size_t))found_memalign, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__test_next_malloc, (void *(*)(size_t))found_malloc, __ATOMIC_RELEASE);
}

void *malloc(size_t size) {
  crumbs__test_count();
  void *(*next)(size_t) = __atomic_load_n(&crumbs__test_next_malloc, __ATOMIC_ACQUIRE);
  return next ? next(size) : __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  crumbs__test_count();
  void *(*next)(size_t, size_t) = __atomic_load_n(&crumbs__test_next_calloc, __ATOMIC_ACQUIRE);
  return next ? next(count, size) : __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
  crumbs__test_count();
  void *(*next)(void *, size_t) = __atomic_load_n(&crumbs__test_next_realloc, __ATOMIC_ACQUIRE);
  return next ? next(pointer, size) : __libc_realloc(pointer, size);
}

static void *crumbs__test_aligned(size_t alignment, size_t size) {
  void *(*next)(size_t, size_t) = __atomic_load_n(&crumbs__test_next_memalign, __ATOMIC_ACQUIRE);
  return next ? next(alignment, size) : __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
  crumbs__test_count();
  return crumbs__test_aligned(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
  crumbs__test_count();
  return crumbs__test_aligned(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
  crumbs__test_count();
  if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void *pointer = crumbs__test_aligned(alignment, size);
  if (pointer == NULL) return ENOMEM;
  *result = pointer;
  return 0;
}

static void crumbs__test_fork_on_signal(int signal_number) {
  (void)signal_number;
  int saved_errno = errno;
  crumbs__test_counting = 1;
  pid_t child = fork();
  if (child == 0) _exit(0);
  crumbs__test_counting = 0;
  if (child > 0) {
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  errno = saved_errno;
}

int64_t crumbs_test_fork_from_signal_handler(int count) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = crumbs__test_fork_on_signal;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGUSR1, &action, NULL) != 0) return -1;
  for (int index = 0; index < count; index++) raise(SIGUSR1);
  return __atomic_load_n(&crumbs__test_allocations, __ATOMIC_RELAXED);
}
#else
int64_t crumbs_test_fork_from_signal_handler(int count) {
  (void)count;
  return -1;
}
#endif
