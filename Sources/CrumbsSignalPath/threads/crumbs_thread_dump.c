// crumbs_thread_dump.c — the request signal of `crumbs threads PID` (the request's shape:
// crumbs_thread_dump.h). The handler writes the request's cookie to the responder's pipe, and
// nothing else: one system call, safe on a thread under seccomp; inert in a forked child and
// after uninstall. Design: docs/crash-capture.md#thread-dumps
//
// Entry points, in call order: crumbs_thread_dump_install (set-up) → [signal]
// crumbs__thread_dump_handler → crumbs_thread_dump_uninstall (waits for writing handlers; leaves
// the handler in place, inert). crumbs__thread_dump_forked: the child side of fork.
//
// ASYNC-SIGNAL-SAFE: crumbs__thread_dump_handler and crumbs__thread_dump_forked. libc calls:
// write (and errno saved and restored); atomics. Not signal-safe (set-up):
// crumbs_thread_dump_install/uninstall (sigaction, sched_yield, pthread_atfork).

#define _GNU_SOURCE
#include "threads/crumbs_threads.h"
#include "crumbs_thread_dump.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int crumbs__dump_signal;                 // atomic; the signal taken (0: never), kept inert
static bool crumbs__dump_installed;             // set-up only: between install and uninstall
static int crumbs__dump_descriptor = -1;        // atomic; the wake pipe's write end, -1: inert
static bool crumbs__dump_fork_registered;       // set-up only: crumbs__thread_dump_forked registered
static uint32_t crumbs__dump_active;            // atomic; handlers between their check and their write
static crumbs_ring_header *crumbs__dump_header; // the header naming the signal, or NULL

static void crumbs__thread_dump_handler(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  (void)context;
  // Only a request from a process: kill (SI_USER) or sigqueue (SI_QUEUE). A tgkill from inside
  // (SI_TKILL) or a signal the kernel made is no request; nor is one reaching a forked child,
  // which inherited the handler but not the responder (its ring names no dump signal).
  if (info == NULL || (info->si_code != SI_QUEUE && info->si_code != SI_USER)) return;
  int saved_errno = errno;
  __atomic_add_fetch(&crumbs__dump_active, 1u, __ATOMIC_SEQ_CST);
  int descriptor = __atomic_load_n(&crumbs__dump_descriptor, __ATOMIC_SEQ_CST);
  if (descriptor >= 0) {
    uint32_t cookie = info->si_code == SI_QUEUE ? (uint32_t)info->si_value.sival_int : 0u;
    unsigned char bytes[4] = {(unsigned char)cookie, (unsigned char)(cookie >> 8),
                              (unsigned char)(cookie >> 16), (unsigned char)(cookie >> 24)};
    // Four bytes: one atomic pipe write (below PIPE_BUF), so cookies never interleave. A full
    // pipe (EAGAIN) drops the request; its asker times out.
    while (write(descriptor, bytes, sizeof bytes) < 0 && errno == EINTR) {
    }
  }
  __atomic_sub_fetch(&crumbs__dump_active, 1u, __ATOMIC_SEQ_CST);
  errno = saved_errno;
}

/// The child side of fork: the responder thread and its pipe stay in the parent, so a request
/// reaching the child is dropped (its pipe's write end is the parent's).
static void crumbs__thread_dump_forked(void) {
  __atomic_store_n(&crumbs__dump_descriptor, -1, __ATOMIC_SEQ_CST);
}

static bool crumbs__dump_is_ours(int signal_number) {
  struct sigaction current;
  if (signal_number == 0 || sigaction(signal_number, NULL, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == crumbs__thread_dump_handler;
}

/// Takes `signal_number` for the request handler (SA_SIGINFO | SA_RESTART: a thread interrupted
/// in a system call resumes it).
static bool crumbs__dump_take(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__thread_dump_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  return sigaction(signal_number, &action, NULL) == 0;
}

/// The signal for a new install: the one an earlier install left inert, while still ours; else
/// the highest free one below the crash handler's capture signal (below SIGRTMAX without one,
/// which the crash handler takes when installed later: it skips a signal someone handles, so
/// ours is never taken from us). 0: none.
static int crumbs__dump_choose(void) {
  if (crumbs__dump_signal != 0 && crumbs__dump_is_ours(crumbs__dump_signal)) return crumbs__dump_signal;
  int capture = crumbs__thread_capture_signal();
  int highest = capture != 0 ? capture - 1 : SIGRTMAX - 1;
  for (int candidate = highest; candidate >= SIGRTMIN; candidate--) {
    if (candidate == capture) continue;
    struct sigaction current;
    if (sigaction(candidate, NULL, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue; // someone's
    if (crumbs__dump_take(candidate)) return candidate;
  }
  return 0;
}

int crumbs_thread_dump_install(const crumbs_ring *ring, int wake_descriptor) {
  if (crumbs__dump_installed) return -1;
  if (!crumbs__dump_fork_registered) {
    crumbs__dump_fork_registered = pthread_atfork(NULL, NULL, crumbs__thread_dump_forked) == 0;
    if (!crumbs__dump_fork_registered) return 0; // no way to keep a forked child from answering
  }
  __atomic_store_n(&crumbs__dump_descriptor, wake_descriptor, __ATOMIC_SEQ_CST);
  int signal_number = crumbs__dump_choose();
  if (signal_number == 0) {
    __atomic_store_n(&crumbs__dump_descriptor, -1, __ATOMIC_SEQ_CST);
    return 0;
  }
  __atomic_store_n(&crumbs__dump_signal, signal_number, __ATOMIC_RELEASE);
  crumbs__dump_installed = true;
  crumbs__dump_header = ring != NULL ? ring->header : NULL;
  if (crumbs__dump_header != NULL) {
    __atomic_store_n(&crumbs__dump_header->thread_dump_signal, signal_number, __ATOMIC_RELEASE);
  }
  return signal_number;
}

void crumbs_thread_dump_uninstall(void) {
  if (!crumbs__dump_installed) return;
  crumbs__dump_installed = false;
  // The asker reads the header first: from now on `crumbs threads` sends no new request.
  if (crumbs__dump_header != NULL) {
    __atomic_store_n(&crumbs__dump_header->thread_dump_signal, 0, __ATOMIC_RELEASE);
  }
  crumbs__dump_header = NULL;
  __atomic_store_n(&crumbs__dump_descriptor, -1, __ATOMIC_SEQ_CST);
  // A handler that loaded the descriptor before it became -1 finishes its one write first.
  while (__atomic_load_n(&crumbs__dump_active, __ATOMIC_SEQ_CST) != 0) sched_yield();
}

int crumbs_thread_dump_signal(void) {
  return crumbs__dump_installed ? __atomic_load_n(&crumbs__dump_signal, __ATOMIC_ACQUIRE) : 0;
}
