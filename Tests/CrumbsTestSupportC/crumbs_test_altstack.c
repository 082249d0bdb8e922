// Test-only: threads whose first append is watched (see include/crumbs_test_support.h).
#define _GNU_SOURCE
#include "crumbs_test_support.h"
#include "crumbs_ring.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void crumbs_test_note_altstack(crumbs_test_altstack_report *report) {
  stack_t current;
  if (sigaltstack(NULL, &current) != 0) {
    report->error = errno;
    return;
  }
  report->stack = (uint64_t)(uintptr_t)current.ss_sp;
  report->size = current.ss_size;
  report->flags = current.ss_flags;
}

// MARK: - Threads that hold their stacks at once

typedef struct crumbs_test_holders {
  pthread_barrier_t all_appended;
  crumbs_test_altstack_report *reports;
  uint32_t next;
} crumbs_test_holders;

static void *crumbs_test_hold(void *context) {
  crumbs_test_holders *holders = context;
  uint32_t index = __atomic_fetch_add(&holders->next, 1, __ATOMIC_RELAXED);
  crumbs_add_breadcrumb(CRUMBS_LEVEL_INFO, CRUMBS_TYPE_SYSTEM, "holder appended", NULL, 0);
  crumbs_test_note_altstack(&holders->reports[index]);
  pthread_barrier_wait(&holders->all_appended);
  return NULL;
}

int crumbs_test_append_on_threads(uint32_t count, crumbs_test_altstack_report *reports) {
  crumbs_test_holders holders = {.reports = reports, .next = 0};
  pthread_barrier_init(&holders.all_appended, NULL, count);
  pthread_t threads[count];
  uint32_t started = 0;
  for (; started < count; started++) {
    if (pthread_create(&threads[started], NULL, crumbs_test_hold, &holders) != 0) break;
  }
  if (started < count) return -1; // the started ones wait at the barrier; the child gives up
  for (uint32_t index = 0; index < count; index++) pthread_join(threads[index], NULL);
  pthread_barrier_destroy(&holders.all_appended);
  return 0;
}

// MARK: - A first append under seccomp

#if defined(__x86_64__)
#define CRUMBS_TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CRUMBS_TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define CRUMBS_TEST_ALLOW(name) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_##name, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

typedef struct crumbs_test_watched {
  crumbs_test_altstack_report *report;
  int done; // atomic: 1 report written, -1 set-up failed
} crumbs_test_watched;

static void *crumbs_test_watched_thread(void *context) {
  crumbs_test_watched *watched = context;
#if defined(CRUMBS_TEST_AUDIT_ARCH)
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CRUMBS_TEST_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      CRUMBS_TEST_ALLOW(gettid),
      CRUMBS_TEST_ALLOW(sigaltstack),
      CRUMBS_TEST_ALLOW(clock_gettime),
      CRUMBS_TEST_ALLOW(getcpu),
      CRUMBS_TEST_ALLOW(ppoll),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
  struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    watched->report->error = errno;
    __atomic_store_n(&watched->done, -1, __ATOMIC_RELEASE);
    return NULL;
  }
  // From here on, only the calls above: this thread's first append, its report, its rest.
  crumbs_add_breadcrumb(CRUMBS_LEVEL_INFO, CRUMBS_TYPE_SYSTEM, "first append under seccomp", NULL, 0);
  crumbs_test_note_altstack(watched->report);
  __atomic_store_n(&watched->done, 1, __ATOMIC_RELEASE);
  for (;;) syscall(SYS_ppoll, NULL, 0, NULL, NULL, 0);
#else
  watched->report->error = ENOSYS;
  __atomic_store_n(&watched->done, -1, __ATOMIC_RELEASE);
  return NULL;
#endif
}

int crumbs_test_first_append_under_seccomp(crumbs_test_altstack_report *report) {
  static crumbs_test_watched watched; // the parked thread keeps pointing at it
  watched.report = report;
  watched.done = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, crumbs_test_watched_thread, &watched) != 0) return -1;
  pthread_detach(thread);
  // Waits for the thread to say it is done (not a timing assertion: a forbidden call kills the
  // process, and the test bounds the whole child).
  struct timespec millisecond = {0, 1000000};
  int done;
  while ((done = __atomic_load_n(&watched.done, __ATOMIC_ACQUIRE)) == 0) {
    nanosleep(&millisecond, NULL);
  }
  return done == 1 ? 0 : -1;
}
