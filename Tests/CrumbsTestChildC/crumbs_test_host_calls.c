// Test-only: a host's threads that a live capture must not harm (issue 35, cases 11 and 12):
// threads blocked in sleep, nanosleep, poll, epoll_wait and read, each in a named function, whose
// calls must return what they would have without the capture; threads under seccomp (strict
// mode, and a SECCOMP_RET_KILL_PROCESS filter) that a signal handler's system call would kill;
// and a running thread, the one kind a live capture still signals. Why C: each needs an exact
// system call, a seccomp mode, or a thread that runs without calling anything.
//
// Synchronization is by events only: each thread writes a byte to `announce` right before it
// blocks (or spins), and crumbs_test_start_host_calls returns once every blocking thread is
// seen inside its system call in /proc/self/task/<tid>/syscall; results come back as lines on
// a pipe, read with a bounded poll.

#define _GNU_SOURCE
#include "crumbs_test_child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/// The blocked calls last this long when nothing interrupts them (seconds): longer than any
/// capture on a busy machine.
#define CRUMBS__HOST_SLEEP 3

enum {
  CRUMBS__HOST_SLEEP_THREAD,
  CRUMBS__HOST_NANOSLEEP_THREAD,
  CRUMBS__HOST_POLL_THREAD,
  CRUMBS__HOST_EPOLL_THREAD,
  CRUMBS__HOST_READ_THREAD,
  CRUMBS__HOST_SPIN_THREAD,
  CRUMBS__HOST_STRICT_THREAD,
  CRUMBS__HOST_FILTER_THREAD,
  CRUMBS__HOST_THREADS,
};

static const char *const crumbs__host_names[CRUMBS__HOST_THREADS] = {
    "hc-sleep", "hc-nanosleep", "hc-poll", "hc-epoll", "hc-read", "hc-spin", "sc-strict", "sc-filter",
};

static int crumbs__announce[2] = {-1, -1};
static int crumbs__results[2] = {-1, -1};
static int crumbs__never[2] = {-1, -1};
/// One pipe per thread that waits for data: written after the capture.
static int crumbs__wake[CRUMBS__HOST_THREADS][2];
static uint32_t crumbs__host_tid[CRUMBS__HOST_THREADS];
static uint32_t crumbs__spin_release; // atomic: the spinning threads go on
static int crumbs__epoll = -1;
static int crumbs__with_seccomp;

static uint64_t crumbs__monotonic_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

/// Writes one result line (one write: pipes keep lines under PIPE_BUF whole).
static void crumbs__result(const char *line) { (void)!write(crumbs__results[1], line, strlen(line)); }

static void crumbs__announce_now(int which) {
  crumbs__host_tid[which] = (uint32_t)syscall(SYS_gettid);
  char byte = (char)which;
  (void)!write(crumbs__announce[1], &byte, 1);
}

__attribute__((noinline)) int crumbs_test_host_sleeping(void) {
  crumbs__announce_now(CRUMBS__HOST_SLEEP_THREAD);
  uint64_t start = crumbs__monotonic_ms();
  unsigned left = sleep(CRUMBS__HOST_SLEEP);
  char line[96];
  snprintf(line, sizeof line, "host sleep returned %u after %llu ms\n", left,
           (unsigned long long)(crumbs__monotonic_ms() - start));
  crumbs__result(line);
  __asm__ volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
  return (int)left;
}

__attribute__((noinline)) int crumbs_test_host_nanosleeping(void) {
  crumbs__announce_now(CRUMBS__HOST_NANOSLEEP_THREAD);
  uint64_t start = crumbs__monotonic_ms();
  struct timespec wanted = {CRUMBS__HOST_SLEEP, 0}, left = {0, 0};
  int result = nanosleep(&wanted, &left);
  int error = result < 0 ? errno : 0;
  char line[128];
  snprintf(line, sizeof line, "host nanosleep returned %d errno %d after %llu ms\n", result, error,
           (unsigned long long)(crumbs__monotonic_ms() - start));
  crumbs__result(line);
  __asm__ volatile("" ::: "memory");
  return result;
}

__attribute__((noinline)) int crumbs_test_host_polling(void) {
  struct pollfd entry = {.fd = crumbs__wake[CRUMBS__HOST_POLL_THREAD][0], .events = POLLIN};
  crumbs__announce_now(CRUMBS__HOST_POLL_THREAD);
  int result = poll(&entry, 1, -1);
  int error = result < 0 ? errno : 0;
  char line[96];
  snprintf(line, sizeof line, "host poll returned %d errno %d revents %d\n", result, error,
           (entry.revents & POLLIN) != 0);
  crumbs__result(line);
  __asm__ volatile("" ::: "memory");
  return result;
}

__attribute__((noinline)) int crumbs_test_host_epolling(void) {
  struct epoll_event event;
  memset(&event, 0, sizeof event);
  crumbs__announce_now(CRUMBS__HOST_EPOLL_THREAD);
  int result = epoll_wait(crumbs__epoll, &event, 1, -1);
  int error = result < 0 ? errno : 0;
  char line[96];
  snprintf(line, sizeof line, "host epoll_wait returned %d errno %d\n", result, error);
  crumbs__result(line);
  __asm__ volatile("" ::: "memory");
  return result;
}

__attribute__((noinline)) int crumbs_test_host_reading(void) {
  char byte = 0;
  crumbs__announce_now(CRUMBS__HOST_READ_THREAD);
  ssize_t result = read(crumbs__wake[CRUMBS__HOST_READ_THREAD][0], &byte, 1);
  int error = result < 0 ? errno : 0;
  char line[96];
  snprintf(line, sizeof line, "host read returned %d errno %d byte %c\n", (int)result, error,
           result == 1 ? byte : '-');
  crumbs__result(line);
  __asm__ volatile("" ::: "memory");
  return (int)result;
}

__attribute__((noinline)) int crumbs_test_host_spinning(void) {
  crumbs__announce_now(CRUMBS__HOST_SPIN_THREAD);
  uint64_t spins = 0;
  while (!__atomic_load_n(&crumbs__spin_release, __ATOMIC_ACQUIRE)) spins++;
  crumbs__result("host spin went on\n");
  __asm__ volatile("" : "+r"(spins)::"memory");
  return (int)(spins & 1);
}

/// Strict mode: read, write, _exit and sigreturn only; any other call kills the thread.
__attribute__((noinline)) int crumbs_test_seccomp_strict_waiting(void) {
  crumbs__host_tid[CRUMBS__HOST_STRICT_THREAD] = (uint32_t)syscall(SYS_gettid);
  int wake = crumbs__wake[CRUMBS__HOST_STRICT_THREAD][0];
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0) {
    crumbs__result("host strict failed\n");
    return -1;
  }
  char byte = (char)CRUMBS__HOST_STRICT_THREAD;
  (void)!write(crumbs__announce[1], &byte, 1);
  // From here on only plain code and the four calls: no snprintf (it could allocate).
  ssize_t got = read(wake, &byte, 1);
  static char line[] = "host strict read returned ? byte ?\n";
  line[26] = got == 1 ? '1' : '-';
  line[33] = got == 1 ? byte : '-';
  (void)!write(crumbs__results[1], line, sizeof line - 1);
  while (1) (void)!read(crumbs__never[0], &byte, 1); // until the process ends
  return 0;
}

/// A filter that kills the whole process (SECCOMP_RET_KILL_PROCESS) on any call but read,
/// write, exit and rt_sigreturn; the thread spins (running, so a capture would signal it).
__attribute__((noinline)) int crumbs_test_seccomp_filter_spinning(void) {
  crumbs__host_tid[CRUMBS__HOST_FILTER_THREAD] = (uint32_t)syscall(SYS_gettid);
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_read, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
  struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    crumbs__result("host filter failed\n");
    return -1;
  }
  char byte = (char)CRUMBS__HOST_FILTER_THREAD;
  (void)!write(crumbs__announce[1], &byte, 1);
  uint64_t spins = 0;
  while (!__atomic_load_n(&crumbs__spin_release, __ATOMIC_ACQUIRE)) spins++;
  static const char line[] = "host filter went on\n";
  (void)!write(crumbs__results[1], line, sizeof line - 1);
  __asm__ volatile("" : "+r"(spins)::"memory");
  while (1) (void)!read(crumbs__never[0], &byte, 1);
  return 0;
}

static void *crumbs__host_main(void *argument) {
  int which = (int)(intptr_t)argument;
  pthread_setname_np(pthread_self(), crumbs__host_names[which]);
  switch (which) {
  case CRUMBS__HOST_SLEEP_THREAD: crumbs_test_host_sleeping(); break;
  case CRUMBS__HOST_NANOSLEEP_THREAD: crumbs_test_host_nanosleeping(); break;
  case CRUMBS__HOST_POLL_THREAD: crumbs_test_host_polling(); break;
  case CRUMBS__HOST_EPOLL_THREAD: crumbs_test_host_epolling(); break;
  case CRUMBS__HOST_READ_THREAD: crumbs_test_host_reading(); break;
  case CRUMBS__HOST_SPIN_THREAD: crumbs_test_host_spinning(); break;
  case CRUMBS__HOST_STRICT_THREAD: crumbs_test_seccomp_strict_waiting(); break;
  case CRUMBS__HOST_FILTER_THREAD: crumbs_test_seccomp_filter_spinning(); break;
  default: break;
  }
  __asm__ volatile("" ::: "memory");
  return NULL;
}

/// Whether thread `tid` is inside a system call now (its syscall line is neither "running" nor
/// "-1 …", which a thread blocked outside a call shows).
static int crumbs__in_syscall(uint32_t tid) {
  char path[64], text[64];
  snprintf(path, sizeof path, "/proc/self/task/%u/syscall", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t count = read(fd, text, sizeof text - 1);
  close(fd);
  return count > 0 && text[0] >= '0' && text[0] <= '9';
}

int crumbs_test_start_host_calls(int with_seccomp) {
  crumbs__with_seccomp = with_seccomp;
  if (pipe(crumbs__announce) != 0 || pipe(crumbs__results) != 0 || pipe(crumbs__never) != 0) return -1;
  for (int which = 0; which < CRUMBS__HOST_THREADS; which++) {
    if (pipe(crumbs__wake[which]) != 0) return -1;
  }
  crumbs__epoll = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event event = {.events = EPOLLIN};
  if (crumbs__epoll < 0 ||
      epoll_ctl(crumbs__epoll, EPOLL_CTL_ADD, crumbs__wake[CRUMBS__HOST_EPOLL_THREAD][0], &event) != 0) {
    return -1;
  }
  int started = 0;
  for (int which = 0; which < CRUMBS__HOST_THREADS; which++) {
    int seccomp = which == CRUMBS__HOST_STRICT_THREAD || which == CRUMBS__HOST_FILTER_THREAD;
    if (seccomp != (with_seccomp != 0) && which != CRUMBS__HOST_SPIN_THREAD) continue;
    pthread_t thread;
    if (pthread_create(&thread, NULL, crumbs__host_main, (void *)(intptr_t)which) != 0) return -1;
    pthread_detach(thread);
    started++;
  }
  for (int announced = 0; announced < started;) {
    char byte;
    ssize_t count = read(crumbs__announce[0], &byte, 1);
    if (count == 1) announced++;
    if (count == 0 || (count < 0 && errno != EINTR)) return -1;
  }
  // Each blocking thread is inside its call before anyone captures (an event, not a delay:
  // bounded by 30 s of looking).
  uint64_t deadline = crumbs__monotonic_ms() + 30000u;
  for (int which = 0; which < CRUMBS__HOST_THREADS; which++) {
    uint32_t tid = crumbs__host_tid[which];
    if (tid == 0 || which == CRUMBS__HOST_SPIN_THREAD || which == CRUMBS__HOST_FILTER_THREAD) continue;
    while (!crumbs__in_syscall(tid)) {
      if (crumbs__monotonic_ms() > deadline) return -1;
      sched_yield();
    }
  }
  return started;
}

uint32_t crumbs_test_host_call_tid(const char *name) {
  for (int which = 0; which < CRUMBS__HOST_THREADS; which++) {
    if (strcmp(crumbs__host_names[which], name) == 0) return crumbs__host_tid[which];
  }
  return 0;
}

int crumbs_test_finish_host_calls(int expected) {
  __atomic_store_n(&crumbs__spin_release, 1u, __ATOMIC_RELEASE);
  for (int which = 0; which < CRUMBS__HOST_THREADS; which++) (void)!write(crumbs__wake[which][1], "x", 1);
  // Every line, or what came within 30 s (a thread the capture killed never writes its own).
  uint64_t deadline = crumbs__monotonic_ms() + 30000u;
  char buffer[1024];
  size_t length = 0;
  int lines = 0;
  while (lines < expected) {
    uint64_t now = crumbs__monotonic_ms();
    if (now >= deadline) break;
    struct pollfd entry = {.fd = crumbs__results[0], .events = POLLIN};
    if (poll(&entry, 1, (int)(deadline - now)) <= 0) continue;
    ssize_t count = read(crumbs__results[0], buffer + length, sizeof buffer - 1 - length);
    if (count <= 0) break;
    for (ssize_t index = 0; index < count; index++) lines += buffer[length + (size_t)index] == '\n';
    length += (size_t)count;
    if (length >= sizeof buffer - 1) break;
  }
  (void)!write(STDOUT_FILENO, buffer, length);
  return lines;
}
