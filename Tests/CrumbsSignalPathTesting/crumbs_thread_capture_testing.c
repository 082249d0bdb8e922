// crumbs_thread_capture_testing.c — the thread capture's test hooks (kit/crumbs_hooks.h): each
// holds one thread at one step of the capture protocol (docs/crash-capture.md#threads-every-other-thread)
// until another step lets it go, so the tests reproduce, without timing, the races a loaded
// machine produces by chance. Test-only: the product reaches them through crumbs__hooks_armed.
//
// Entry points: the switches (crumbs__thread_capture_testing_*, from crumbs_crash_testing.c);
// the stops the capture handler calls (late_stop / late_done, stale_hold / stale_linger,
// slow_leaver_stop); the goes the crash calls (late_go, stale_go, slow_leaver_go,
// uninstall_meet); the live capture's fault and meeting (live_parked, live_answered);
// uninstall's report (uninstall_done).
//
// ASYNC-SIGNAL-SAFE: everything here but the switches. libc calls: syscall(SYS_futex)
// (crumbs__capture_futex), clock_gettime, write, nanosleep (live_answered).

#define _GNU_SOURCE
#include "crumbs_crash_testing_hooks.h"
#include "kit/crumbs_context.h"
#include "threads/crumbs_thread_capture.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

// MARK: - An answer after a take-over, a slow leaver, a stale request

/// The steps of the hooks' words (`late_answer`, `stale_request`; `slow_leaver` has no DONE).
enum {
  CRUMBS__LATE_OFF = 0,
  CRUMBS__LATE_ARMED = 1,   // the first thread of its kind to get there stops
  CRUMBS__LATE_STOPPED = 2, // it waits (late_answer: just short of its answer)
  CRUMBS__LATE_GO = 3,      // the crash says it may go on (late_answer: it answers now)
  CRUMBS__LATE_DONE = 4,    // late_answer: it answered, or found its slot closed
};
#define CRUMBS__LATE_LIMIT_NS (10ull * 1000000000u)

// The hooks' futex words (atomic).
static uint32_t crumbs__late_answer;   // late_*: an answer after a take-over
static uint32_t crumbs__slow_leaver;   // slow_leaver_*: a thread slow to leave the handler
static uint32_t crumbs__stale_request; // stale_*: a request delivered late
static uint32_t crumbs__uninstall_met; // 1 once an uninstall dealt with the signals

/// Waits (at most CRUMBS__LATE_LIMIT_NS) while `word` holds `step`.
static void crumbs__testing_wait_while(uint32_t *word, uint32_t step) {
  uint64_t deadline = crumbs__context_clock_ns(CLOCK_MONOTONIC) + CRUMBS__LATE_LIMIT_NS;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == step) {
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now >= deadline) return;
    crumbs__capture_futex(word, FUTEX_WAIT_PRIVATE, step, deadline - now);
  }
}

/// Moves `word` from step `from` to step `to` (a compare-exchange: one thread of those getting
/// there does) and wakes whoever waits on it; then, when `wait`, waits while it holds `to`. True
/// when it moved. A word not at `from` costs one load (a disarmed hook).
static bool crumbs__testing_advance(uint32_t *word, uint32_t from, uint32_t to, bool wait) {
  if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != from ||
      !__atomic_compare_exchange_n(word, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return false;
  }
  crumbs__capture_futex(word, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  if (wait) crumbs__testing_wait_while(word, to);
  return true;
}

/// Capture handler, right before its answer: the first thread a live capture asked with the
/// capture signal stops until the crash that takes the capture over lets it go. True when it
/// stopped (it then says when it is past its answer: crumbs__testing_late_done).
static bool crumbs__testing_late_stop(const crumbs__capture_slot *slot) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (__atomic_load_n(&crumbs__late_answer, __ATOMIC_ACQUIRE) != CRUMBS__LATE_ARMED) return false;
  if (!__atomic_load_n(&capture->live, __ATOMIC_ACQUIRE) || slot->asked_with != capture->capture_signal) {
    return false;
  }
  return crumbs__testing_advance(&crumbs__late_answer, CRUMBS__LATE_ARMED, CRUMBS__LATE_STOPPED, true);
}

static void crumbs__testing_late_done(void) {
  crumbs__testing_advance(&crumbs__late_answer, CRUMBS__LATE_GO, CRUMBS__LATE_DONE, false);
}

static bool crumbs__testing_late_paused(void) {
  uint32_t *hooks[] = {&crumbs__late_answer, &crumbs__stale_request};
  for (unsigned k = 0; k < sizeof hooks / sizeof hooks[0]; k++) {
    if (__atomic_load_n(hooks[k], __ATOMIC_ACQUIRE) == CRUMBS__LATE_OFF) continue;
    crumbs__testing_wait_while(hooks[k], CRUMBS__LATE_ARMED);
    if (__atomic_load_n(hooks[k], __ATOMIC_ACQUIRE) == CRUMBS__LATE_ARMED) return false;
  }
  return true;
}

static void crumbs__testing_late_go(void) {
  crumbs__testing_advance(&crumbs__late_answer, CRUMBS__LATE_STOPPED, CRUMBS__LATE_GO, true);
}

/// Capture handler, leaving, once it has counted itself out: the first thread a live capture
/// asked with SIGPROF stops until a crash's capture has asked every thread (tests only: a thread
/// not yet out of the handler when the crash asks it, as on a loaded machine).
static void crumbs__testing_slow_leaver_stop(int asked_with) {
  if (asked_with != SIGPROF) return;
  crumbs__testing_advance(&crumbs__slow_leaver, CRUMBS__LATE_ARMED, CRUMBS__LATE_STOPPED, true);
}

static void crumbs__testing_slow_leaver_go(void) {
  crumbs__testing_advance(&crumbs__slow_leaver, CRUMBS__LATE_STOPPED, CRUMBS__LATE_GO, false);
  // The stale request's thread, stopped on its way out.
  crumbs__testing_advance(&crumbs__stale_request, CRUMBS__LATE_DONE, CRUMBS__LATE_OFF, false);
}

/// The thread stale_hold stopped (atomic; 0: none yet). Only it may say it is on its way out:
/// any other thread that turns a request away meanwhile (a live capture's capture signal that
/// reaches a blocker only after the take-over closed its slot) would otherwise move the word to
/// DONE in its place, and the crash would ask the held thread while it is still at the door,
/// not yet counted in, blocking SIGPROF: listed as not answering (the hook's own race, seen
/// under load).
static uint32_t crumbs__stale_tid;

/// Capture handler, at its door (before it counts itself in): the first thread the live capture
/// asked with SIGPROF waits there until the crash that took the capture over lets it in
/// (crumbs__testing_stale_go): a request delivered late.
static void crumbs__testing_stale_hold(int signal_number, uint32_t tid) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (signal_number != SIGPROF ||
      __atomic_load_n(&crumbs__stale_request, __ATOMIC_ACQUIRE) != CRUMBS__LATE_ARMED ||
      !__atomic_load_n(&capture->live, __ATOMIC_ACQUIRE)) {
    return;
  }
  // Claimed before the word moves: the crash lets it in only once the word says STOPPED.
  uint32_t none = 0;
  if (!__atomic_compare_exchange_n(&crumbs__stale_tid, &none, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  crumbs__testing_advance(&crumbs__stale_request, CRUMBS__LATE_ARMED, CRUMBS__LATE_STOPPED, true);
}

/// Capture handler, on its way out of a request it did not answer: the held-back thread (no
/// other) says so and stays inside until the crash has asked every thread
/// (crumbs__testing_slow_leaver_go).
static void crumbs__testing_stale_linger(uint32_t tid) {
  if (__atomic_load_n(&crumbs__stale_tid, __ATOMIC_ACQUIRE) != tid) return;
  crumbs__testing_advance(&crumbs__stale_request, CRUMBS__LATE_GO, CRUMBS__LATE_DONE, true);
}

static void crumbs__testing_stale_go(void) {
  crumbs__testing_advance(&crumbs__stale_request, CRUMBS__LATE_STOPPED, CRUMBS__LATE_GO, true);
}

// MARK: - An uninstall that meets a crash

/// A crash that holds the capture, listed its threads and is about to ask them
/// tells the thread waiting to uninstall (a byte on the descriptor), and waits (at most 10 s)
/// until that uninstall has dealt with the capture's signals (`uninstall_met`).
static int crumbs__uninstall_meet_fd = -1;

static void crumbs__testing_uninstall_meet(void) {
  int fd = __atomic_exchange_n(&crumbs__uninstall_meet_fd, -1, __ATOMIC_ACQ_REL);
  char byte = 1;
  if (fd < 0 || write(fd, &byte, 1) != 1) return;
  crumbs__testing_wait_while(&crumbs__uninstall_met, 0u);
}

/// The end of an uninstall's part in the capture (tests only: what the crash above waits for).
static void crumbs__testing_uninstall_done(void) {
  __atomic_store_n(&crumbs__uninstall_met, 1u, __ATOMIC_RELEASE);
  crumbs__capture_futex(&crumbs__uninstall_met, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
}

// MARK: - The live capture: a fault while a thread is parked, a crash meeting it

static uint32_t crumbs__live_faults;  // atomic: fault while a thread is parked, once
static int crumbs__live_meet_fd = -1; // atomic: meet a crash on another thread, once

/// A fault of the capture itself while a thread is parked, once armed; with a stop armed too,
/// only once the thread it holds has stopped (none ever did: no fault, no take-over).
static void crumbs__testing_live_parked(void) {
  if (__atomic_exchange_n(&crumbs__live_faults, 0u, __ATOMIC_ACQ_REL) == 0) return;
  if (!crumbs__testing_late_paused()) return;
  volatile uintptr_t unmapped = 8; // through a variable: gcc -Warray-bounds flags a constant
  *(volatile int *)unmapped = 1;
}

/// Tells the crasher (a byte on the descriptor), then waits (at most 10 s) until its crash
/// started.
static void crumbs__testing_live_answered(const crumbs_crash_record *record) {
  int fd = __atomic_exchange_n(&crumbs__live_meet_fd, -1, __ATOMIC_ACQ_REL);
  if (fd < 0) return;
  char byte = 1;
  if (write(fd, &byte, 1) != 1) return;
  struct timespec millisecond = {0, 1000000};
  for (int waited = 0; waited < 10000; waited++) {
    if (__atomic_load_n(&record->state, __ATOMIC_ACQUIRE) != CRUMBS_CRASH_ARMED) return;
    nanosleep(&millisecond, NULL);
  }
}

// MARK: - The table and its switches (crumbs_crash_testing.c)

crumbs__hooks crumbs__testing_hooks = {
    .late_stop = crumbs__testing_late_stop,
    .late_done = crumbs__testing_late_done,
    .stale_hold = crumbs__testing_stale_hold,
    .stale_linger = crumbs__testing_stale_linger,
    .slow_leaver_stop = crumbs__testing_slow_leaver_stop,
    .uninstall_done = crumbs__testing_uninstall_done,
    .late_go = crumbs__testing_late_go,
    .stale_go = crumbs__testing_stale_go,
    .uninstall_meet = crumbs__testing_uninstall_meet,
    .slow_leaver_go = crumbs__testing_slow_leaver_go,
    .live_parked = crumbs__testing_live_parked,
    .live_answered = crumbs__testing_live_answered,
};

void crumbs__testing_arm(void) {
  __atomic_store_n(&crumbs__hooks_armed, (const crumbs__hooks *)&crumbs__testing_hooks, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_uninstall_meets_crash(int fd) {
  crumbs__testing_arm();
  __atomic_store_n(&crumbs__uninstall_met, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__uninstall_meet_fd, fd, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_live(int fault, int meet_fd) {
  crumbs__testing_arm();
  if (fault >= 0) __atomic_store_n(&crumbs__live_faults, (uint32_t)fault, __ATOMIC_RELEASE);
  if (meet_fd != -2) __atomic_store_n(&crumbs__live_meet_fd, meet_fd, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_slow_leaver(bool enabled) {
  crumbs__testing_arm();
  __atomic_store_n(&crumbs__slow_leaver, enabled ? CRUMBS__LATE_ARMED : CRUMBS__LATE_OFF, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_stale_request(bool enabled) {
  crumbs__testing_arm();
  __atomic_store_n(&crumbs__stale_tid, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__stale_request, enabled ? CRUMBS__LATE_ARMED : CRUMBS__LATE_OFF, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_late_answer(bool enabled) {
  crumbs__testing_arm();
  __atomic_store_n(&crumbs__late_answer, enabled ? CRUMBS__LATE_ARMED : CRUMBS__LATE_OFF, __ATOMIC_RELEASE);
}
