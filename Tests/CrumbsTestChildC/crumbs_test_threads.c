// Test-only: many named threads, each blocked in its own recognizable function, for the crash
// handler's thread capture (the "all-threads" scenario). Why C: 100 distinct functions that
// neither inline nor fold into one, with names a report can be checked against.

#define _GNU_SOURCE
#include "crumbs_test_child.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
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
#define CRUMBS_BLOCKER(n)                                       \
  __attribute__((noinline)) int crumbs_test_blocked_##n(void) { \
    int value = crumbs__block_here(1##n);                       \
    __asm__ volatile("" : "+r"(value)::"memory");               \
    return value + 1##n;                                        \
  }
#define CRUMBS_BLOCKERS(t) \
  CRUMBS_BLOCKER(t##0)     \
  CRUMBS_BLOCKER(t##1)     \
  CRUMBS_BLOCKER(t##2)     \
  CRUMBS_BLOCKER(t##3)     \
  CRUMBS_BLOCKER(t##4)     \
  CRUMBS_BLOCKER(t##5)     \
  CRUMBS_BLOCKER(t##6)     \
  CRUMBS_BLOCKER(t##7)     \
  CRUMBS_BLOCKER(t##8)     \
  CRUMBS_BLOCKER(t##9)
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

#define CRUMBS_ROW(t)                                                                     \
  crumbs_test_blocked_##t##0, crumbs_test_blocked_##t##1, crumbs_test_blocked_##t##2,     \
      crumbs_test_blocked_##t##3, crumbs_test_blocked_##t##4, crumbs_test_blocked_##t##5, \
      crumbs_test_blocked_##t##6, crumbs_test_blocked_##t##7, crumbs_test_blocked_##t##8, \
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

// MARK: - Threads parked for a live capture (the live-capture scenarios)

static int crumbs__parked_ready[2] = {-1, -1}; // each parked thread writes one byte here
static int crumbs__parked_never[2] = {-1, -1}; // nobody writes here
static pthread_once_t crumbs__parked_once = PTHREAD_ONCE_INIT;

static void crumbs__parked_pipes(void) {
  if (pipe(crumbs__parked_ready) != 0 || pipe(crumbs__parked_never) != 0) abort();
}

__attribute__((noinline)) void crumbs_test_park_in_read(const char *name) {
  pthread_once(&crumbs__parked_once, crumbs__parked_pipes);
  if (name != NULL) pthread_setname_np(pthread_self(), name);
  char byte = 1;
  (void)!write(crumbs__parked_ready[1], &byte, 1);
  while (read(crumbs__parked_never[0], &byte, 1) != 0) {
  }
  __asm__ volatile("" ::: "memory"); // no tail call: the caller's frame stays its caller's
}

int crumbs_test_wait_for_parked(int count) {
  pthread_once(&crumbs__parked_once, crumbs__parked_pipes);
  for (int arrived = 0; arrived < count;) {
    char bytes[64];
    ssize_t got = read(crumbs__parked_ready[0], bytes,
                       sizeof bytes < (size_t)(count - arrived) ? sizeof bytes : (size_t)(count - arrived));
    if (got <= 0) return -1;
    arrived += (int)got;
  }
  return 0;
}

static pthread_mutex_t crumbs__waiter_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t crumbs__waiter_condition = PTHREAD_COND_INITIALIZER;
static int crumbs__waiter_ready;

/// Waits on a condition nobody signals, for good (pthread_cond_wait: deep in glibc, whose code
/// keeps no frame pointer).
__attribute__((noinline)) int crumbs_test_waiting_on_condition(void) {
  pthread_mutex_lock(&crumbs__waiter_mutex);
  crumbs__waiter_ready = 1;
  while (1) pthread_cond_wait(&crumbs__waiter_condition, &crumbs__waiter_mutex);
  return 0;
}

static void *crumbs__waiter_main(void *argument) {
  (void)argument;
  pthread_setname_np(pthread_self(), "cond-waiter");
  crumbs_test_waiting_on_condition();
  return NULL;
}

int crumbs_test_start_condition_waiter(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, crumbs__waiter_main, NULL) != 0) return -1;
  pthread_detach(thread);
  // The mutex is free again only once the waiter is inside pthread_cond_wait (which releases
  // it): an event, not a sleep.
  while (1) {
    pthread_mutex_lock(&crumbs__waiter_mutex);
    int ready = crumbs__waiter_ready;
    pthread_mutex_unlock(&crumbs__waiter_mutex);
    if (ready) return 0;
    sched_yield();
  }
}

static int crumbs__echo_request[2] = {-1, -1};
static int crumbs__echo_reply[2] = {-1, -1};

/// Answers every byte on the request pipe with one on the reply pipe, blocked in read between.
__attribute__((noinline)) int crumbs_test_echo_loop(void) {
  char byte;
  while (read(crumbs__echo_request[0], &byte, 1) == 1) {
    if (write(crumbs__echo_reply[1], &byte, 1) != 1) break;
  }
  return byte;
}

static void *crumbs__echo_main(void *argument) {
  (void)argument;
  pthread_setname_np(pthread_self(), "echo");
  crumbs_test_echo_loop();
  return NULL;
}

int crumbs_test_start_echo(void) {
  if (pipe(crumbs__echo_request) != 0 || pipe(crumbs__echo_reply) != 0) return -1;
  pthread_t thread;
  if (pthread_create(&thread, NULL, crumbs__echo_main, NULL) != 0) return -1;
  pthread_detach(thread);
  // One round trip before returning: the thread has named itself and is in its loop (a busy
  // machine may not have run it yet when the caller captures the threads).
  return crumbs_test_echo(30000);
}

int crumbs_test_echo(int timeout_ms) {
  char byte = 7;
  if (write(crumbs__echo_request[1], &byte, 1) != 1) return -1;
  struct pollfd reply = {.fd = crumbs__echo_reply[0], .events = POLLIN};
  if (poll(&reply, 1, timeout_ms) != 1) return -1;
  return read(crumbs__echo_reply[0], &byte, 1) == 1 ? 0 : -1;
}

static int crumbs__crasher_fd = -1;

/// Waits for a byte on the crasher's descriptor, then stores through a null pointer.
__attribute__((noinline)) int crumbs_test_crash_when_told(void) {
  char byte;
  if (read(crumbs__crasher_fd, &byte, 1) != 1) return -1;
  volatile int *null = (volatile int *)(uintptr_t)(crumbs__crasher_fd < -1 ? 1 : 0);
  *null = 1;
  return 0;
}

static void *crumbs__crasher_main(void *argument) {
  (void)argument;
  // Neither capture signal reaches it (every real-time signal and SIGPROF blocked): a live
  // capture lists it as not answering at once, without waiting for it.
  sigset_t mask;
  sigemptyset(&mask);
  for (int signal_number = SIGRTMIN; signal_number <= SIGRTMAX; signal_number++)
    sigaddset(&mask, signal_number);
  sigaddset(&mask, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &mask, NULL);
  pthread_setname_np(pthread_self(), "crasher");
  crumbs_test_crash_when_told();
  return NULL;
}

int crumbs_test_start_crasher(int fd) {
  crumbs__crasher_fd = fd;
  pthread_t thread;
  if (pthread_create(&thread, NULL, crumbs__crasher_main, NULL) != 0) return -1;
  pthread_detach(thread);
  return 0;
}
