// Test-only: threads that wait on each other in known ways (crumbs_test_waits.h): a deadlock of
// two pthread mutexes taken in opposite order (made certain by a barrier), a chain (a waiter on
// a mutex whose holder sleeps), and waits on futexes that have no owner (a semaphore, a
// condition variable); and the rwlocks, mutexes and condition variables the lock-graph
// scenario's Swift threads take one call at a time. Why C: the waits must be exactly glibc's
// mutex, rwlock, semaphore and condition variable calls. Readiness is an event seen in /proc/self/task/TID/syscall, never a delay.

#define _GNU_SOURCE
#include "crumbs_test_waits.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t crumbs__mutexes[4] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                             PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static pthread_barrier_t crumbs__barrier;
static pthread_once_t crumbs__once = PTHREAD_ONCE_INIT;
static sem_t crumbs__semaphore;
static sem_t crumbs__holding;
static pthread_cond_t crumbs__condition = PTHREAD_COND_INITIALIZER;
static uint32_t crumbs__tids[CRUMBS_TEST_ROLES];

static void crumbs__init(void) {
  pthread_barrier_init(&crumbs__barrier, NULL, 2);
  sem_init(&crumbs__semaphore, 0, 0);
  sem_init(&crumbs__holding, 0, 0);
}

void crumbs_test_wait_role(int role) {
  pthread_once(&crumbs__once, crumbs__init);
  __atomic_store_n(&crumbs__tids[role], (uint32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
  switch (role) {
  case CRUMBS_TEST_ROLE_DEADLOCK_FIRST:
  case CRUMBS_TEST_ROLE_DEADLOCK_SECOND: {
    int first = role == CRUMBS_TEST_ROLE_DEADLOCK_FIRST ? 0 : 1;
    pthread_mutex_lock(&crumbs__mutexes[first]);
    pthread_barrier_wait(&crumbs__barrier);
    pthread_mutex_lock(&crumbs__mutexes[1 - first]);
    break;
  }
  case CRUMBS_TEST_ROLE_CHAIN_HOLDER:
    pthread_mutex_lock(&crumbs__mutexes[2]);
    sem_post(&crumbs__holding);
    for (;;) {
      struct timespec ten_minutes = {.tv_sec = 600};
      nanosleep(&ten_minutes, NULL);
    }
  case CRUMBS_TEST_ROLE_CHAIN_WAITER:
    while (sem_wait(&crumbs__holding) != 0) {
    }
    pthread_mutex_lock(&crumbs__mutexes[2]);
    break;
  case CRUMBS_TEST_ROLE_SEMAPHORE:
    for (;;) sem_wait(&crumbs__semaphore);
  case CRUMBS_TEST_ROLE_CONDITION:
    pthread_mutex_lock(&crumbs__mutexes[3]);
    for (;;) pthread_cond_wait(&crumbs__condition, &crumbs__mutexes[3]);
  default: break;
  }
  // Never reached for a role that blocks; a deadlock never ends.
  for (;;) pause();
}

uint32_t crumbs_test_wait_role_tid(int role) {
  if (role < 0 || role >= CRUMBS_TEST_ROLES) return 0;
  return __atomic_load_n(&crumbs__tids[role], __ATOMIC_ACQUIRE);
}

uint64_t crumbs_test_wait_role_object(int role) {
  switch (role) {
  case CRUMBS_TEST_ROLE_DEADLOCK_FIRST: return (uint64_t)(uintptr_t)&crumbs__mutexes[1];
  case CRUMBS_TEST_ROLE_DEADLOCK_SECOND: return (uint64_t)(uintptr_t)&crumbs__mutexes[0];
  case CRUMBS_TEST_ROLE_CHAIN_WAITER: return (uint64_t)(uintptr_t)&crumbs__mutexes[2];
  case CRUMBS_TEST_ROLE_SEMAPHORE: return (uint64_t)(uintptr_t)&crumbs__semaphore;
  case CRUMBS_TEST_ROLE_CONDITION: return (uint64_t)(uintptr_t)&crumbs__condition;
  default: return 0;
  }
}

/// The system call number thread `tid` is blocked in, or -1 (running, outside a call, gone);
/// its first argument in `*argument`.
static long crumbs__blocked_call(uint32_t tid, uint64_t *argument) {
  char path[64], text[64];
  snprintf(path, sizeof path, "/proc/self/task/%u/syscall", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t count = read(fd, text, sizeof text - 1);
  close(fd);
  if (count <= 0 || text[0] < '0' || text[0] > '9') return -1;
  text[count] = 0;
  char *end = NULL;
  long call = strtol(text, &end, 10);
  *argument = end != NULL ? strtoull(end, NULL, 16) : 0;
  return call;
}

static uint64_t crumbs__monotonic_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

static pthread_rwlock_t crumbs__rwlocks[2] = {PTHREAD_RWLOCK_INITIALIZER, PTHREAD_RWLOCK_INITIALIZER};
static pthread_mutex_t crumbs__lock_mutexes[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                                  PTHREAD_MUTEX_INITIALIZER};
static pthread_cond_t crumbs__conditions[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static int crumbs__signalled[2];
static pthread_barrier_t crumbs__lock_barrier;
static pthread_once_t crumbs__lock_once = PTHREAD_ONCE_INIT;

static void crumbs__lock_init(void) { pthread_barrier_init(&crumbs__lock_barrier, NULL, 2); }

void crumbs_test_rwlock_write(int index) { pthread_rwlock_wrlock(&crumbs__rwlocks[index & 1]); }

void crumbs_test_rwlock_read(int index) { pthread_rwlock_rdlock(&crumbs__rwlocks[index & 1]); }

void crumbs_test_lock_mutex(int index) { pthread_mutex_lock(&crumbs__lock_mutexes[index % 3]); }

void crumbs_test_cond_wait(int index) {
  int slot = index & 1;
  pthread_mutex_lock(&crumbs__lock_mutexes[slot + 1]);
  while (!crumbs__signalled[slot])
    pthread_cond_wait(&crumbs__conditions[slot], &crumbs__lock_mutexes[slot + 1]);
}

void crumbs_test_cond_signal(int index) {
  int slot = index & 1;
  crumbs__signalled[slot] = 1;
  pthread_cond_signal(&crumbs__conditions[slot]);
}

void crumbs_test_lock_barrier(void) {
  pthread_once(&crumbs__lock_once, crumbs__lock_init);
  pthread_barrier_wait(&crumbs__lock_barrier);
}

uint64_t crumbs_test_lock_address(char kind, int index) {
  switch (kind) {
  case 'r': return (uint64_t)(uintptr_t)&crumbs__rwlocks[index & 1];
  case 'm': return (uint64_t)(uintptr_t)&crumbs__lock_mutexes[index % 3];
  case 'c': return (uint64_t)(uintptr_t)&crumbs__conditions[index & 1];
  default: return 0;
  }
}

int crumbs_test_wait_until_blocked_on(uint32_t tid, uint64_t low, uint64_t high) {
  uint64_t deadline = crumbs__monotonic_ms() + 30000u;
  for (;;) {
    uint64_t address = 0;
    long call = crumbs__blocked_call(tid, &address);
    if (low == 0 && (call == SYS_nanosleep || call == SYS_clock_nanosleep)) return 0;
    if (low != 0 && call == SYS_futex && address >= low && address < high) return 0;
    if (crumbs__monotonic_ms() > deadline) return -1;
    sched_yield();
  }
}

int crumbs_test_wait_until_blocked(int role) {
  if (role < 0 || role >= CRUMBS_TEST_ROLES) return -1;
  uint64_t deadline = crumbs__monotonic_ms() + 30000u;
  for (;;) {
    uint32_t tid = crumbs_test_wait_role_tid(role);
    uint64_t address = 0;
    long call = tid == 0 ? -1 : crumbs__blocked_call(tid, &address);
    uint64_t object = crumbs_test_wait_role_object(role);
    if (role == CRUMBS_TEST_ROLE_CHAIN_HOLDER) {
      if (call == SYS_nanosleep || call == SYS_clock_nanosleep) return 0;
    } else if (role == CRUMBS_TEST_ROLE_CONDITION) {
      // A condition variable waits on a word inside itself, not at its start.
      if (call == SYS_futex && address >= object && address < object + sizeof crumbs__condition) return 0;
    } else if (call == SYS_futex && address == object) {
      // On the object itself: not the barrier or the semaphore met on the way.
      return 0;
    }
    if (crumbs__monotonic_ms() > deadline) return -1;
    sched_yield();
  }
}
