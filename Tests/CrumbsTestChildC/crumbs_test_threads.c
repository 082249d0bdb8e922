// Test-only: many named threads, each blocked in its own recognizable function, for the crash
// handler's thread capture (the "all-threads" scenario). Why C: 100 distinct functions that
// neither inline nor fold into one, with names a report can be checked against.

#define _GNU_SOURCE
#include "crumbs_test_child.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int crumbs__ready[2] = {-1, -1}; // each thread writes one byte here before it blocks
static int crumbs__never[2] = {-1, -1}; // nobody writes here: reads block forever

static int crumbs__block_in_condition; // CRUMBS_TEST_BLOCK=cond: pthread_cond_wait, not read
static pthread_mutex_t crumbs__mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t crumbs__condition = PTHREAD_COND_INITIALIZER;

/// Says "running", then blocks for good: in read() on a pipe nobody writes, or in
/// pthread_cond_wait (deeper inside glibc, whose code keeps no frame pointer).
__attribute__((noinline)) static int crumbs__block_here(int tag) {
  char byte = (char)tag;
  if (crumbs__block_in_condition) {
    pthread_mutex_lock(&crumbs__mutex);
    (void)!write(crumbs__ready[1], &byte, 1);
    while (1) pthread_cond_wait(&crumbs__condition, &crumbs__mutex);
  }
  (void)!write(crumbs__ready[1], &byte, 1);
  while (read(crumbs__never[0], &byte, 1) != 0) {
  }
  return byte;
}

// crumbs_test_blocked_00 … crumbs_test_blocked_99: one per thread, each with its own constant
// so that no two are identical (nothing can fold them), and work after the call (no tail call).
#define CRUMBS_BLOCKER(n)                                                                          \
  __attribute__((noinline)) int crumbs_test_blocked_##n(void) {                                  \
    int value = crumbs__block_here(1##n);                                                          \
    __asm__ volatile("" : "+r"(value)::"memory");                                                  \
    return value + 1##n;                                                                           \
  }
#define CRUMBS_BLOCKERS(t)                                                                         \
  CRUMBS_BLOCKER(t##0) CRUMBS_BLOCKER(t##1) CRUMBS_BLOCKER(t##2) CRUMBS_BLOCKER(t##3)              \
  CRUMBS_BLOCKER(t##4) CRUMBS_BLOCKER(t##5) CRUMBS_BLOCKER(t##6) CRUMBS_BLOCKER(t##7)              \
  CRUMBS_BLOCKER(t##8) CRUMBS_BLOCKER(t##9)
CRUMBS_BLOCKERS(0)
CRUMBS_BLOCKERS(1)
CRUMBS_BLOCKERS(2)
CRUMBS_BLOCKERS(3)
CRUMBS_BLOCKERS(4)
CRUMBS_BLOCKERS(5)
CRUMBS_BLOCKERS(6)
CRUMBS_BLOCKERS(7)
CRUMBS_BLOCKERS(8)
CRUMBS_BLOCKERS(9)

#define CRUMBS_ROW(t)                                                                              \
  crumbs_test_blocked_##t##0, crumbs_test_blocked_##t##1, crumbs_test_blocked_##t##2,              \
      crumbs_test_blocked_##t##3, crumbs_test_blocked_##t##4, crumbs_test_blocked_##t##5,          \
      crumbs_test_blocked_##t##6, crumbs_test_blocked_##t##7, crumbs_test_blocked_##t##8,          \
      crumbs_test_blocked_##t##9
static int (*const crumbs__blockers[100])(void) = {
    CRUMBS_ROW(0), CRUMBS_ROW(1), CRUMBS_ROW(2), CRUMBS_ROW(3), CRUMBS_ROW(4),
    CRUMBS_ROW(5), CRUMBS_ROW(6), CRUMBS_ROW(7), CRUMBS_ROW(8), CRUMBS_ROW(9),
};

/// The thread with every signal it can block blocked: it cannot answer the capture signal.
__attribute__((noinline)) int crumbs_test_blocked_masked(void) {
  int value = crumbs__block_here(200);
  __asm__ volatile("" : "+r"(value)::"memory");
  return value + 2;
}

/// The thread that blocks what Dispatch's workers block: everything but the synchronous
/// signals, SIGPIPE and SIGPROF.
__attribute__((noinline)) int crumbs_test_blocked_like_dispatch(void) {
  int value = crumbs__block_here(201);
  __asm__ volatile("" : "+r"(value)::"memory");
  return value + 3;
}

static void *crumbs__blocker_main(void *argument) {
  intptr_t index = (intptr_t)argument;
  char name[16];
  if (index == -2) {
    sigset_t mask;
    sigfillset(&mask);
    int kept[] = {SIGILL, SIGTRAP, SIGFPE, SIGBUS, SIGSEGV, SIGSYS, SIGPIPE, SIGPROF};
    for (unsigned k = 0; k < sizeof kept / sizeof kept[0]; k++) sigdelset(&mask, kept[k]);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    pthread_setname_np(pthread_self(), "like-dispatch");
    crumbs_test_blocked_like_dispatch();
  } else if (index < 0) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_setname_np(pthread_self(), "masked");
    crumbs_test_blocked_masked();
  } else {
    snprintf(name, sizeof name, "blocker-%02d", (int)index);
    pthread_setname_np(pthread_self(), name);
    crumbs__blockers[index]();
  }
  return NULL;
}

int crumbs_test_start_blocked_threads(int count, int with_masked) {
  if (count < 0 || count > 100) return -1;
  if (pipe(crumbs__ready) != 0 || pipe(crumbs__never) != 0) return -1;
  const char *block = getenv("CRUMBS_TEST_BLOCK");
  crumbs__block_in_condition = block != NULL && strcmp(block, "cond") == 0;
  int started = 0;
  for (intptr_t index = with_masked ? -2 : 0; index < count; index++) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, crumbs__blocker_main, (void *)index) != 0) break;
    pthread_detach(thread);
    started++;
  }
  // Wait (an event, not a sleep) until every one of them is inside its blocking function.
  for (int arrived = 0; arrived < started;) {
    char bytes[64];
    ssize_t got = read(crumbs__ready[0], bytes, sizeof bytes);
    if (got <= 0) return -1;
    arrived += (int)got;
  }
  return started;
}

static struct sigaction crumbs__replaced_segv;

static void crumbs__chaining_handler(int signal_number, siginfo_t *info, void *context) {
  if (crumbs__replaced_segv.sa_flags & SA_SIGINFO) {
    crumbs__replaced_segv.sa_sigaction(signal_number, info, context);
  }
  // Returning re-executes the fault; by then the crash handler has set SIG_DFL.
}

void crumbs_test_install_chaining_handler_in_front(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__chaining_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &crumbs__replaced_segv);
}
