// crumbs_test_mappings.c — many threads held alive at once, for the mapping cost of alternate
// stacks (see crumbs_test_mappings.h). Test-only; not signal-safe.
#define _GNU_SOURCE
#include "crumbs_test_mappings.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

long crumbs_test_count_mappings(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long lines = 0;
  char buffer[65536];
  for (;;) {
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (ssize_t index = 0; index < got; index++) lines += buffer[index] == '\n';
  }
  close(fd);
  return lines;
}

static pthread_mutex_t crumbs_test_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t crumbs_test_changed = PTHREAD_COND_INITIALIZER;
static uint32_t crumbs_test_arrived;
static bool crumbs_test_released;
static pthread_t *crumbs_test_threads;
static stack_t *crumbs_test_stacks;    // the held group's, by thread
static uintptr_t *crumbs_test_earlier; // the last released group's ss_sp, sorted
static uint32_t crumbs_test_earlier_count;
static uint32_t crumbs_test_held;

static void *crumbs_test_holder(void *context) {
  stack_t *mine = context;
  if (sigaltstack(NULL, mine) != 0) mine->ss_flags = SS_DISABLE;
  pthread_mutex_lock(&crumbs_test_lock);
  crumbs_test_arrived++;
  pthread_cond_broadcast(&crumbs_test_changed);
  while (!crumbs_test_released) pthread_cond_wait(&crumbs_test_changed, &crumbs_test_lock);
  pthread_mutex_unlock(&crumbs_test_lock);
  return NULL;
}

static int crumbs_test_compare(const void *left, const void *right) {
  uintptr_t a = *(const uintptr_t *)left, b = *(const uintptr_t *)right;
  return a < b ? -1 : a > b;
}

void crumbs_test_hold_threads(uint32_t count, uint64_t size, crumbs_test_held_stacks *held) {
  *held = (crumbs_test_held_stacks){0};
  crumbs_test_threads = calloc(count, sizeof *crumbs_test_threads);
  crumbs_test_stacks = calloc(count, sizeof *crumbs_test_stacks);
  if (crumbs_test_threads == NULL || crumbs_test_stacks == NULL) {
    held->error = ENOMEM;
    return;
  }
  crumbs_test_arrived = 0;
  crumbs_test_released = false;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 256 * 1024);
  uint32_t started = 0;
  for (; started < count; started++) {
    int result = pthread_create(&crumbs_test_threads[started], &attributes, crumbs_test_holder,
                                &crumbs_test_stacks[started]);
    if (result != 0) {
      held->error = result;
      break;
    }
  }
  pthread_attr_destroy(&attributes);
  crumbs_test_held = started;
  pthread_mutex_lock(&crumbs_test_lock);
  while (crumbs_test_arrived < started) pthread_cond_wait(&crumbs_test_changed, &crumbs_test_lock);
  pthread_mutex_unlock(&crumbs_test_lock);

  uintptr_t *stacks = calloc(started + 1, sizeof *stacks);
  uint32_t with_one = 0;
  for (uint32_t index = 0; index < started; index++) {
    stack_t stack = crumbs_test_stacks[index];
    if (!(stack.ss_flags & SS_DISABLE) && stack.ss_size >= size && stacks != NULL) {
      stacks[with_one++] = (uintptr_t)stack.ss_sp;
    }
  }
  held->started = started;
  held->with_one = with_one;
  if (stacks == NULL) return;
  qsort(stacks, with_one, sizeof *stacks, crumbs_test_compare);
  for (uint32_t index = 0; index < with_one; index++) {
    if (index > 0 && stacks[index] == stacks[index - 1]) continue;
    held->distinct++;
    if (crumbs_test_earlier != NULL && bsearch(&stacks[index], crumbs_test_earlier, crumbs_test_earlier_count,
                                               sizeof *stacks, crumbs_test_compare) != NULL) {
      held->reused++;
    }
  }
  free(crumbs_test_earlier);
  crumbs_test_earlier = stacks;
  crumbs_test_earlier_count = with_one;
}

uint64_t crumbs_test_held_guard_outside(uint64_t low, uint64_t high) {
  for (uint32_t index = 0; index < crumbs_test_held; index++) {
    stack_t stack = crumbs_test_stacks[index];
    uint64_t start = (uint64_t)(uintptr_t)stack.ss_sp;
    if (!(stack.ss_flags & SS_DISABLE) && (start < low || start >= high)) return start - 4096;
  }
  return 0;
}

void crumbs_test_forget_held_threads(void) {
  pthread_mutex_init(&crumbs_test_lock, NULL);
  pthread_cond_init(&crumbs_test_changed, NULL);
  crumbs_test_threads = NULL;
  crumbs_test_stacks = NULL;
  crumbs_test_held = 0;
}

uint32_t crumbs_test_held_count_of(uint64_t stack) {
  uint32_t count = 0;
  for (uint32_t index = 0; index < crumbs_test_held; index++) {
    stack_t held = crumbs_test_stacks[index];
    count += !(held.ss_flags & SS_DISABLE) && (uint64_t)(uintptr_t)held.ss_sp == stack;
  }
  return count;
}

void crumbs_test_release_threads(void) {
  pthread_mutex_lock(&crumbs_test_lock);
  crumbs_test_released = true;
  pthread_cond_broadcast(&crumbs_test_changed);
  pthread_mutex_unlock(&crumbs_test_lock);
  for (uint32_t index = 0; index < crumbs_test_held; index++) {
    pthread_join(crumbs_test_threads[index], NULL);
  }
  free(crumbs_test_threads);
  free(crumbs_test_stacks);
  crumbs_test_threads = NULL;
  crumbs_test_stacks = NULL;
  crumbs_test_held = 0;
}

int crumbs_test_refuse_guard_regions(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
      // The advice's low 32 bits (little-endian), as an older kernel sees an unknown advice.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 102 /* MADV_GUARD_INSTALL */, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
}
