// crumbs_thread_capture_signals.c — the capture's two signals: the capture signal (the highest
// real-time signal nobody handles) taken at install, SIGPROF borrowed by a capture that needs it
// (crumbs_thread_capture.c), both given back at uninstall unless a live capture still owes one
// to a thread that has not run it (docs/crash-capture.md#threads-every-other-thread).
//
// Entry points: crumbs__thread_capture_install, crumbs__capture_owe (the live capture, for each
// signal it sent and that was not run when it closed the slot), crumbs__capture_pending_somewhere,
// crumbs__thread_capture_uninstall, crumbs__thread_capture_forked (the fork handler).
//
// NOT SIGNAL-SAFE: install and uninstall (sigaction through any interposer, so a preloaded one
// sees Crumbs' own installs). ASYNC-SIGNAL-SAFE: crumbs__capture_owe, _pending_somewhere (open,
// read, close of /proc status files), _signal and _forked (atomic stores, memset).

#define _GNU_SOURCE
#include "kit/crumbs_hooks.h"
#include "threads/crumbs_thread_capture.h"

#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sigaction crumbs__capture_previous; // the capture signal's action before ours

// MARK: - Signals sent and not run yet

/// Threads a live capture asked and that had not run the signal when it closed them.
static uint32_t crumbs__owed_tid[CRUMBS__CAPTURE_SLOTS];
static int32_t crumbs__owed_signal[CRUMBS__CAPTURE_SLOTS];
static uint32_t crumbs__owed_count;
/// 1 when one could not be remembered (the list was full): that signal is never given back.
static uint32_t crumbs__owed_lost;

void crumbs__capture_owe(uint32_t tid, int signal_number) {
  if (crumbs__owed_count >= CRUMBS__CAPTURE_SLOTS) {
    crumbs__owed_lost = 1;
    return;
  }
  crumbs__owed_tid[crumbs__owed_count] = tid;
  crumbs__owed_signal[crumbs__owed_count++] = signal_number;
}

bool crumbs__capture_pending_somewhere(int signal_number) {
  if (crumbs__owed_lost) return true;
  bool pending_somewhere = false;
  uint32_t kept = 0;
  for (uint32_t index = 0; index < crumbs__owed_count; index++) {
    char state = '?';
    uint64_t blocked = 0, pending = 0;
    int owed = crumbs__owed_signal[index];
    if (owed <= 0 || owed >= 64) continue;
    // Exited, or ran it (its handler found the slot closed and returned): nothing is owed.
    if (!crumbs__proc_thread_status(crumbs__owed_tid[index], &state, &blocked, &pending) ||
        !(pending & (1ull << (owed - 1)))) {
      continue;
    }
    if (owed == signal_number) pending_somewhere = true;
    crumbs__owed_tid[kept] = crumbs__owed_tid[index];
    crumbs__owed_signal[kept++] = owed;
  }
  crumbs__owed_count = kept;
  return pending_somewhere;
}

// MARK: - Install (not signal-safe)

void crumbs__thread_capture_install(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (capture->capture_signal != 0 && crumbs__capture_handles(capture->capture_signal)) return;
  capture->capture_signal = 0;
  for (int candidate = SIGRTMAX; candidate >= SIGRTMIN; candidate--) {
    struct sigaction current;
    if (sigaction(candidate, NULL, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue; // someone's
    struct sigaction ours = crumbs__capture_action();
    if (sigaction(candidate, &ours, NULL) != 0) continue;
    crumbs__capture_previous = current;
    capture->capture_signal = candidate;
    break;
  }
  // Bind the calls only the capture makes (futex, sigismember; getdents64, getrlimit, prctl
  // through crumbs_proc_threads.c) now, not at crash time (open/read/close are bound already).
  uint32_t word = 1;
  crumbs__capture_futex(&word, FUTEX_WAKE_PRIVATE, 1, 0);
  sigset_t probe;
  sigemptyset(&probe);
  (void)sigismember(&probe, SIGPROF);
  crumbs__proc_threads_resolve();
}

void crumbs__thread_capture_uninstall(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  // A capture in progress asks threads with these two signals: given back now, SIG_DFL on the
  // real-time capture signal would end the process with it, SIG_IGN on SIGPROF drop the request.
  // Uninstall holds the capture while it gives them back; one held by somebody else (a crash:
  // live captures run under the lock uninstall holds) keeps them ours, for good.
  uint32_t own_tid = (uint32_t)syscall(SYS_gettid), free_owner = 0;
  if (!__atomic_compare_exchange_n(&capture->owner, &free_owner, own_tid, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    CRUMBS__HOOK0(uninstall_done);
    return;
  }
  // A signal a live capture sent to a thread that has not run it yet stays ours: SIG_DFL would
  // end the process when it is delivered (crumbs_thread_capture_live.c keeps the list).
  if (!crumbs__capture_pending_somewhere(SIGPROF)) crumbs__capture_sigprof_give_back();
  if (capture->capture_signal != 0 && !crumbs__capture_pending_somewhere(capture->capture_signal)) {
    if (crumbs__capture_handles(capture->capture_signal)) {
      sigaction(capture->capture_signal, &crumbs__capture_previous, NULL);
    }
    capture->capture_signal = 0;
  }
  // A crash that waited for the capture meanwhile takes it now, and finds the signals gone.
  __atomic_store_n(&capture->owner, 0u, __ATOMIC_RELEASE);
  crumbs__capture_futex(&capture->owner, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  CRUMBS__HOOK0(uninstall_done);
}

int crumbs__thread_capture_signal(void) { return crumbs__capture.capture_signal; }

void crumbs__thread_capture_forked(void) {
  // The child has one thread: a live capture another thread of the parent was running is not
  // in it, and holds nothing here.
  crumbs__capture_state *capture = &crumbs__capture;
  __atomic_store_n(&capture->capturing, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->live, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->owner, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&capture->inside, 0u, __ATOMIC_RELEASE);
  memset(capture->inside_tids, 0, sizeof capture->inside_tids);
}
