// c-portability-smoke.c — the smallest program that uses the signal path the way CrumbsRecorder
// does: check-c-portability.sh links it statically with every object of Sources/CrumbsSignalPath
// compiled by musl-gcc (the libc of the Static Linux SDK), so a glibc-only symbol fails the link,
// and runs it, so the handler is seen working there:
//   1. a thread created after install runs, on an alternate stack (our pthread_create reaches
//      libc's in a static link: crumbs_thread_start.c);
//   2. a forked child installs the handler and faults; the parent sees it die by SIGSEGV with a
//      complete record in the shared mapping;
//   3. glibc only (where ours stands in front of libc's signal): signal() after siginterrupt()
//      leaves the signal interrupting (ours reaches libc's, which shares libc's set of
//      interrupting signals with siginterrupt: crumbs_signal_watch.c), so an alarm breaks a
//      blocking read with EINTR; and the replaced crash signal is written into the record.
//      (musl's signal() always sets SA_RESTART, whatever siginterrupt said: its own rule.)
// Prints one line per check; exits 0 when all pass.
//
// crumbs_terminate.cpp is C++ and musl-gcc has no C++ library: its two entry points and its
// message are stood in for here (the script compiles the .cpp with the C++ compilers instead).

#define _GNU_SOURCE
#include "crumbs_crash_handler.h"
#include "crumbs_crash_record.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CRUMBS_SMOKE_WITH_CXX
crumbs_crash_message crumbs__crash_uncaught;
void crumbs__terminate_install(void) {}
void crumbs__terminate_uninstall(void) {}
#endif

static crumbs_crash_record *smoke_record(void) {
  void *mapping =
      mmap(NULL, sizeof(crumbs_crash_record), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return NULL;
  uint8_t id[16] = {1};
  crumbs_crash_record_format(mapping, (uint32_t)getpid(), id, id, 0);
  return mapping;
}

static int smoke_install(crumbs_crash_record *record) {
  crumbs_crash_config config;
  memset(&config, 0, sizeof config);
  config.record = record;
  config.record_path = "";
  config.signal_mask = (1ull << SIGSEGV) | (1ull << SIGBUS) | (1ull << SIGILL) | (1ull << SIGABRT);
  config.altstack_pool_count = 4;
  return crumbs_crash_install(&config);
}

static void *smoke_thread(void *argument) {
  stack_t current;
  *(int *)argument =
      sigaltstack(NULL, &current) == 0 && current.ss_sp != NULL && !(current.ss_flags & SS_DISABLE) ? 2 : 1;
  return NULL;
}

#if defined(__GLIBC__)
// Arms the alarm again: one that fired before the read blocked is followed by another.
static void smoke_alarm(int signal_number) {
  (void)signal_number;
  alarm(1);
}

static void smoke_bus(int signal_number) { (void)signal_number; }

// siginterrupt is deprecated in favour of sigaction, but is what programs call.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int smoke_make_interrupting(int signal_number) { return siginterrupt(signal_number, 1); }
#pragma GCC diagnostic pop
#endif

int main(void) {
  int failures = 0;
  crumbs_crash_record *record = smoke_record();
  if (record == NULL || smoke_install(record) != 0) {
    printf("FAIL install\n");
    return 1;
  }
  int ran = 0;
  pthread_t thread;
  int created = pthread_create(&thread, NULL, smoke_thread, &ran);
  if (created == 0) pthread_join(thread, NULL);
  printf("%s thread: pthread_create %d, ran %s, alternate stack %s, covers new threads %d\n",
         created == 0 && ran == 2 ? "ok" : "FAIL", created, ran ? "yes" : "no", ran == 2 ? "yes" : "no",
         (int)crumbs_crash_covers_new_threads());
  failures += !(created == 0 && ran == 2 && crumbs_crash_covers_new_threads());

  crumbs_crash_record *child_record = smoke_record();
  pid_t child = child_record == NULL ? -1 : fork();
  if (child == 0) {
    crumbs_crash_record_format(child_record, (uint32_t)getpid(), (uint8_t[16]){2}, (uint8_t[16]){2}, 0);
    if (smoke_install(child_record) != 0) _exit(3);
    volatile uintptr_t unmapped = 8;
    *(volatile int *)unmapped = 1;
    _exit(4);
  }
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  int crashed = child > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
  int complete = child_record != NULL &&
                 __atomic_load_n(&child_record->state, __ATOMIC_ACQUIRE) == CRUMBS_CRASH_COMPLETE;
  printf("%s crash: child died by %s, record %s, %u frames\n", crashed && complete ? "ok" : "FAIL",
         crashed ? "SIGSEGV" : "something else", complete ? "complete" : "not complete",
         child_record != NULL ? child_record->frame_count : 0);
  failures += !(crashed && complete);

#if defined(__GLIBC__)
  // A read nobody will answer; the script's timeout ends a program whose read restarts forever.
  int pipe_ends[2];
  ssize_t got = 0;
  int read_errno = 0;
  if (pipe(pipe_ends) == 0 && smoke_make_interrupting(SIGALRM) == 0 &&
      signal(SIGALRM, smoke_alarm) != SIG_ERR) {
    alarm(1);
    char byte;
    got = read(pipe_ends[0], &byte, 1);
    read_errno = errno;
    alarm(0);
  }
  int interrupted = got < 0 && read_errno == EINTR;
  printf("%s interrupt: siginterrupt then signal, read %s\n", interrupted ? "ok" : "FAIL",
         interrupted ? "interrupted (EINTR)" : "not interrupted");
  failures += !interrupted;
  int noted = signal(SIGBUS, smoke_bus) != SIG_ERR &&
              (__atomic_load_n(&record->replaced_signals, __ATOMIC_RELAXED) & (1ull << SIGBUS));
  printf("%s watch: signal(SIGBUS) written into the record as replaced\n", noted ? "ok" : "FAIL");
  failures += !noted;
#endif
  return failures == 0 ? 0 : 1;
}
