// crumbs_thread_start.c — every thread created after the crash handler is installed gets an
// alternate signal stack before its own code runs, so a stack overflow on it is recorded: our
// pthread_create runs the new thread's start routine behind a trampoline that first calls
// crumbs_crash_prepare_thread.
// Design (options weighed, why interposition works, static links, sanitizers, what is not
// covered): docs/crash-capture.md#new-threads
//
// Entry points: pthread_create (every module's, exported from the executable) → the trampoline
// on the new thread → the start routine. crumbs_crash_covers_new_threads says whether it works.
// Before install, and with `skip_new_threads`, pthread_create is the real one plus one atomic
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

typedef int (*crumbs__pthread_create_function)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                               void *);

// A sanitizer's interceptor, when one is linked (weak: NULL otherwise).
extern int ___interceptor_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
    __attribute__((weak));
extern int __interceptor_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
    __attribute__((weak));

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

int pthread_create(pthread_t *thread, const pthread_attr_t *attributes, void *(*start_routine)(void *),
                   void *argument) {
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
