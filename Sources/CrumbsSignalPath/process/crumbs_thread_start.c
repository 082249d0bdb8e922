// crumbs_thread_start.c — every thread created after the crash handler is installed gets an
// alternate signal stack before its own code runs, so a stack overflow on it is recorded.
//
// The problem: a stack overflow faults with no stack left, and the kernel can run a handler
// only on an alternate stack (sigaltstack), which is per thread and can be set only by the
// thread itself. There is no way to run a handler on a thread without one: the kernel kills the
// process. So every thread must get one before it can overflow, including threads that
// libraries create behind the app's back (Dispatch's workers, Swift concurrency's cooperative
// pool, which on Linux is Dispatch's, an HTTP client's event loop).
//
// Options weighed:
//   - A per-thread-creation hook: glibc has none (pthread keys and C++ thread_local give
//     destructors or lazy initialisation on first use, never code at thread start).
//   - Setting it lazily (our first-append hook, crumbs_altstack.c): covers only threads that
//     append. Kept for threads that existed before install.
//   - Signalling every thread to make it set its own (as glibc's setxid broadcast does): covers
//     only threads alive at that moment, and interrupts their system calls (EINTR).
//   - Handling the fault without an alternate stack: impossible (above). The Swift runtime's
//     backtracer gives one only to the main thread; breakpad and crashpad ask the app to call
//     an "initialize signal stack for this thread" function per thread; Firefox's crash
//     reporter and the Rust `crash-handler` crate interpose pthread_create.
//   - Interposing pthread_create (chosen): our definition of `pthread_create` runs the new
//     thread's start routine behind a trampoline that first gives the thread an alternate stack
//     (crumbs_crash_prepare_thread: from the pool, which grows by a chunk when used up, so no
//     number of threads runs out) and registers its stack bounds.
//
// Why interposition works from a static SwiftPM library: CrumbsSignalPath's objects are linked
// into the executable, and an executable's definition comes first in the dynamic linker's
// search order, so it wins over libc's for every module's calls, libdispatch's and
// libFoundation's included, provided the symbol is in the executable's dynamic symbol table.
// SwiftPM does not link with --export-dynamic, but the linker exports a symbol that a shared
// library of the link refers to, and libdispatch (a dependency of every Swift program through
// libswift_Concurrency) and libstdc++ do (checked on Swift 6.3.1 / gold: `nm -D` shows
// `T pthread_create` in the test child and in a program importing nothing). An unversioned
// definition also satisfies the libraries' versioned references (pthread_create@GLIBC_2.34).
// Our own Swift and C code reaches it by static linking. The real pthread_create is
// dlsym(RTLD_NEXT, ...): the next definition after the executable, libc's.
//
// Statically linked programs (`swiftc -static-executable` with glibc; musl, the Static Linux
// SDK): the static linker binds every module's pthread_create to ours, since libc.a's is a weak
// alias of its real one, `__pthread_create` (glibc: of `__pthread_create_2_1` too; musl's is
// hidden but links), and there is no RTLD_NEXT to find it by. We reach it through a weak
// reference to `__pthread_create`: libc's real function in a static link, NULL in a dynamic one
// (libc.so exports no `__pthread_create`, glibc nor musl). A weak reference does not pull an
// archive member into the link, and nothing else may: so we also refer (strongly) to
// `thrd_create`, which both libcs define in an object that calls `__pthread_create`; in a
// dynamic link that is one more reference to libc.so (GLIBC_2.34, like pthread_create's).
// Without it, every pthread_create of a static program failed with EAGAIN (issue 21).
//
// Sanitizers: AddressSanitizer and ThreadSanitizer intercept pthread_create with a weak
// `pthread_create` aliasing their strong interceptor (compiler-rt: `___interceptor_pthread_create`
// since LLVM 17, `__interceptor_pthread_create` before). Ours, strong, takes that alias's place,
// so we call their interceptor (found through weak references) instead of libc's: their thread
// bookkeeping stays whole (their pthread_join interceptor expects it).
//
// Not covered: threads made by raw clone(), and threads libc itself starts through
// `__pthread_create` (thrd_create, SIGEV_THREAD timers and mq_notify, POSIX aio, getaddrinfo_a):
// they keep the first-append and prepare_thread paths; so do the threads of a library a static
// program dlopens (that library has its own libc).
//
// Before install, and with `skip_new_threads`, our pthread_create is the real one plus one atomic
// load: no trampoline, no allocation.
//
// NOT SIGNAL-SAFE (pthread_create is not): malloc for the trampoline's argument, dlsym once. The
// new thread runs crumbs_crash_prepare_thread (sigaltstack; mmap and madvise or mprotect when
// the pool grows; pthread_getattr_np) in ordinary context, before its start routine.

#define _GNU_SOURCE
#include "process/crumbs_altstack.h"
#include "crumbs_crash_handler.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#if defined(__linux__)

typedef int (*crumbs__pthread_create_function)(pthread_t *, const pthread_attr_t *,
                                               void *(*)(void *), void *);

// A sanitizer's interceptor, when one is linked (weak: NULL otherwise).
extern int ___interceptor_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                         void *) __attribute__((weak));
extern int __interceptor_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                        void *) __attribute__((weak));

// libc's real pthread_create in a static link (weak: NULL in a dynamic one); see above.
extern int __pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
    __attribute__((weak));

// Pulls libc.a's thrd_create object, and with it the one defining `__pthread_create`, into a
// static link (see above); never called.
__attribute__((used)) static int (*const crumbs__pulls_libc_pthread_create)(thrd_t *, thrd_start_t,
                                                                          void *) = thrd_create;

/// The pthread_create ours stands in front of: a sanitizer's interceptor, else libc's (its
/// `__pthread_create` in a static link, the next `pthread_create` in a dynamic one). Found once
/// (racing threads find the same one). NULL only if there is none, which no program linked with
/// glibc or musl can be.
static crumbs__pthread_create_function crumbs__next_pthread_create(void) {
  static crumbs__pthread_create_function next; // atomic
  crumbs__pthread_create_function found = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
  if (found != NULL) return found;
  if (___interceptor_pthread_create != NULL) {
    found = ___interceptor_pthread_create;
  } else if (__interceptor_pthread_create != NULL) {
    found = __interceptor_pthread_create;
  } else if (__pthread_create != NULL) {
    found = __pthread_create;
  } else {
    void *symbol = dlsym(RTLD_NEXT, "pthread_create");
    if (symbol == NULL) return NULL;
    memcpy(&found, &symbol, sizeof found);
  }
  if (found == pthread_create) return NULL; // never call ourselves
  __atomic_store_n(&next, found, __ATOMIC_RELEASE);
  return found;
}

/// What the trampoline needs to become the thread the caller asked for.
typedef struct crumbs__thread_start {
  void *(*start_routine)(void *);
  void *argument;
} crumbs__thread_start;

/// The new thread's first code: an alternate stack and registered stack bounds, then the
/// caller's start routine (whose result is the thread's; pthread_exit inside it works as ever).
static void *crumbs__thread_trampoline(void *context) {
  crumbs__thread_start start = *(crumbs__thread_start *)context;
  free(context);
  if (crumbs__altstack_covers_new_threads()) (void)crumbs_crash_prepare_thread();
  return start.start_routine(start.argument);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attributes,
                   void *(*start_routine)(void *), void *argument) {
  crumbs__pthread_create_function next = crumbs__next_pthread_create();
  if (next == NULL) return EAGAIN;
  if (!crumbs__altstack_covers_new_threads()) return next(thread, attributes, start_routine, argument);
  crumbs__thread_start *start = malloc(sizeof *start);
  if (start == NULL) return next(thread, attributes, start_routine, argument); // goes without
  start->start_routine = start_routine;
  start->argument = argument;
  int result = next(thread, attributes, crumbs__thread_trampoline, start);
  if (result != 0) free(start);
  return result;
}

bool crumbs_crash_covers_new_threads(void) {
  if (!crumbs__altstack_covers_new_threads()) return false;
  if (crumbs__next_pthread_create() == NULL) return false;
  // Other modules' calls reach ours only when the dynamic linker finds ours first. A lookup
  // that finds no pthread_create at all means no dynamic symbol table has one: a static link,
  // whose linker bound every module's calls to ours.
  void *symbol = dlsym(RTLD_DEFAULT, "pthread_create");
  if (symbol == NULL) return __pthread_create != NULL;
  crumbs__pthread_create_function found;
  memcpy(&found, &symbol, sizeof found);
  return found == pthread_create;
}

#else

bool crumbs_crash_covers_new_threads(void) { return false; }

#endif
