// Test-only: unusual hosts the crash handler must not be harmed by (issue 21): a stale pointer
// into a dlclose'd library, a thread stack guarded with MADV_GUARD_INSTALL, a main thread that
// has exited, a process in many supplementary groups, core dumps turned on. Why C: each needs
// exact control of a pointer, a stack mapping, a thread's exit or a credential.

#define _GNU_SOURCE
#include "crumbs_test_child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 // Linux 6.13 (uapi asm-generic/mman-common.h)
#endif

__attribute__((noinline)) int crumbs_test_call_pointer(int (*function)(void)) {
  int result = function();
  __asm__ volatile("" : "+r"(result)::"memory"); // not a tail call: the return address stays at [sp]
  return result + 1;
}

uintptr_t crumbs_test_address_of_call_pointer(void) { return (uintptr_t)&crumbs_test_call_pointer; }

/// The guarded stack's size and guard: 512 KiB, the lowest 64 KiB guard-installed.
#define CRUMBS__GUARDED_STACK (512u * 1024u)
#define CRUMBS__GUARD (64u * 1024u)

static void *crumbs__overflow_main(void *argument) {
  (void)argument;
  crumbs_test_set_thread_name("overflower");
  return (void *)(intptr_t)crumbs_test_overflow_stack(0);
}

int crumbs_test_overflow_on_guarded_stack(uintptr_t *stack_low, uintptr_t *guard_low) {
  char *base = mmap(NULL, CRUMBS__GUARDED_STACK, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) return -1;
  if (madvise(base, CRUMBS__GUARD, MADV_GUARD_INSTALL) != 0) return -1;
  // glibc 2.42 reports a thread's stack without its guard (pthread_getattr_np): so do we.
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) return -1;
  if (pthread_attr_setstack(&attributes, base + CRUMBS__GUARD, CRUMBS__GUARDED_STACK - CRUMBS__GUARD) != 0) {
    return -1;
  }
  *stack_low = (uintptr_t)(base + CRUMBS__GUARD);
  *guard_low = (uintptr_t)base;
  printf("stack-low %lu\nguard-low %lu\ncrashing\n", (unsigned long)*stack_low, (unsigned long)*guard_low);
  fflush(NULL);
  pthread_t thread;
  if (pthread_create(&thread, &attributes, crumbs__overflow_main, NULL) != 0) return -1;
  pthread_join(thread, NULL); // never returns: the overflow ends the process
  return -1;
}

int crumbs_test_guard_regions_supported(void) {
  long page = sysconf(_SC_PAGESIZE);
  char *probe = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return 0;
  int supported = madvise(probe, (size_t)page, MADV_GUARD_INSTALL) == 0;
  munmap(probe, (size_t)page);
  return supported;
}

static pthread_t crumbs__main_thread;

static void *crumbs__crash_after_main(void *argument) {
  (void)argument;
  crumbs_test_set_thread_name("after-main");
  // The main thread called pthread_exit: joining it returns once the kernel has cleared its tid
  // (it is a zombie from then on, until the whole process ends).
  pthread_join(crumbs__main_thread, NULL);
  printf("thread %u\nmain-exited\ncrashing\n", crumbs_test_gettid());
  fflush(NULL);
  crumbs_test_null_deref();
  return NULL;
}

void crumbs_test_crash_after_main_exits(int count) {
  if (crumbs_test_start_blocked_threads(count, 0) != count) {
    printf("error blocked threads\n");
    fflush(NULL);
    return;
  }
  crumbs__main_thread = pthread_self();
  pthread_t thread;
  if (pthread_create(&thread, NULL, crumbs__crash_after_main, NULL) != 0) {
    printf("error thread\n");
    fflush(NULL);
    return;
  }
  pthread_exit(NULL);
}

int crumbs_test_set_many_groups(int count) {
  static gid_t groups[1024];
  if (count < 0 || count > 1024) return -1;
  for (int index = 0; index < count; index++) groups[index] = (gid_t)(1000000000u + (unsigned)index);
  return setgroups((size_t)count, groups);
}

int crumbs_test_enable_core_dumps(const char *directory) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_CORE, &limit) != 0) return -1;
  // 64 MiB: the notes (one NT_PRSTATUS per thread) come first in the file.
  rlim_t wanted = 64u << 20;
  limit.rlim_cur = limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted ? limit.rlim_max : wanted;
  if (limit.rlim_cur == 0 || setrlimit(RLIMIT_CORE, &limit) != 0) return -1;
  return chdir(directory);
}

/// The tracer's count of `/proc/<pid>/task` entries (getdents64: no malloc after a fork).
static int crumbs__count_tasks(pid_t pid) {
  char path[40];
  int length = snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  if (length <= 0) return -1;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  static char entries[8192];
  int tasks = 0;
  long bytes;
  while ((bytes = syscall(SYS_getdents64, fd, entries, sizeof entries)) > 0) {
    for (long offset = 0; offset + 19 < bytes;) {
      unsigned short record_length =
          (unsigned short)((unsigned char)entries[offset + 16] | (unsigned char)entries[offset + 17] << 8);
      if (record_length == 0) break;
      if (entries[offset + 19] != '.') tasks++;
      offset += record_length;
    }
  }
  close(fd);
  return tasks;
}

int crumbs_test_attach_tracer(void) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); // Yama, where it is on
  pid_t tracee = getpid();
  pid_t tracer = (pid_t)crumbs_test_fork_without_handlers();
  if (tracer < 0) return -1;
  if (tracer == 0) {
    close(ready[0]);
    if (ptrace(PTRACE_SEIZE, tracee, NULL, NULL) != 0) _exit(1); // the tracee reads end of file
    (void)!write(ready[1], "s", 1);
    close(ready[1]);
    int faults = 0;
    while (1) {
      int status = 0;
      if (waitpid(tracee, &status, __WALL) < 0 || WIFEXITED(status) || WIFSIGNALED(status)) _exit(0);
      if (!WIFSTOPPED(status)) continue;
      int signal_number = WSTOPSIG(status);
      // The second SIGSEGV is the fault re-executed under SIG_DFL: the one that ends the process.
      if (signal_number == SIGSEGV && ++faults == 2) {
        char line[40];
        int length = snprintf(line, sizeof line, "tasks-at-death %d\n", crumbs__count_tasks(tracee));
        if (length > 0) (void)!write(1, line, (size_t)length);
      }
      ptrace(PTRACE_CONT, tracee, NULL, (void *)(intptr_t)signal_number);
    }
  }
  close(ready[1]);
  char byte = 0;
  ssize_t got = read(ready[0], &byte, 1);
  close(ready[0]);
  return got == 1 ? 0 : -1;
}
