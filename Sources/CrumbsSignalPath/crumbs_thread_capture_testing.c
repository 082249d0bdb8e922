// crumbs_thread_capture_testing.c — the thread capture's test hooks (crumbs_crash_testing.h):
// each holds one thread at one step of the capture protocol (crumbs_thread_capture.c's design
// comment) until another step lets it go, so the tests reproduce, without timing, the races a
// loaded machine produces by chance. Armed only by tests; disarmed, each is one atomic load.
//
// Entry points: the switches (crumbs__thread_capture_testing_*, from crumbs_crash_testing.c);
// the stops the capture handler calls (crumbs__capture_testing_late_stop / late_done,
// stale_hold / stale_linger, slow_leaver_stop); the goes the crash calls (late_go, stale_go,
// slow_leaver_go, uninstall_meet); the live capture's wait before its test fault (late_paused);
// uninstall's report (uninstall_done).
//
// ASYNC-SIGNAL-SAFE: everything here but the switches (they run in signal handlers and in the
// crash handler). libc calls: syscall(SYS_futex) (crumbs__capture_futex), clock_gettime
// (crumbs_context.c), write (uninstall_meet).

#define _GNU_SOURCE
#include "crumbs_thread_capture.h"

#include <signal.h>
#include <unistd.h>

// MARK: - An answer after a take-over, a slow leaver, a stale request

/// The steps of `crumbs__capture.late_answer` (and of `slow_leaver`, which has no DONE).
enum {
  CRUMBS__LATE_OFF = 0,
  CRUMBS__LATE_ARMED = 1,   // the first thread of its kind to get there stops
  CRUMBS__LATE_STOPPED = 2, // it waits (late_answer: just short of its answer)
  CRUMBS__LATE_GO = 3,      // the crash says it may go on (late_answer: it answers now)
  CRUMBS__LATE_DONE = 4,    // late_answer: it answered, or found its slot closed
};
#define CRUMBS__LATE_LIMIT_NS (10ull * 1000000000u)

/// Waits (at most CRUMBS__LATE_LIMIT_NS) while `word` holds `step`.
static void crumbs__testing_wait_while(uint32_t *word, uint32_t step) {
  uint64_t deadline = crumbs__context_clock_ns(CLOCK_MONOTONIC) + CRUMBS__LATE_LIMIT_NS;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == step) {
    uint64_t now = crumbs__context_clock_ns(CLOCK_MONOTONIC);
    if (now >= deadline) return;
    crumbs__capture_futex(word, FUTEX_WAIT_PRIVATE, step, deadline - now);
  }
}

static void crumbs__late_step(uint32_t step) {
  __atomic_store_n(&crumbs__capture.late_answer, step, __ATOMIC_RELEASE);
  crumbs__capture_futex(&crumbs__capture.late_answer, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
}

/// Capture handler, right before its answer: the first thread a live capture asked with the
/// capture signal stops until the crash that takes the capture over lets it go. True when it
/// stopped (it then says when it is past its answer: CRUMBS__LATE_DONE).
bool crumbs__capture_testing_late_stop(const crumbs__capture_slot *slot) {
  crumbs__capture_state *capture = &crumbs__capture;
  if (__atomic_load_n(&capture->late_answer, __ATOMIC_ACQUIRE) != CRUMBS__LATE_ARMED) return false;
  if (!__atomic_load_n(&capture->live, __ATOMIC_ACQUIRE) || slot->asked_with != capture->capture_signal) {
    return false;
  }
  uint32_t armed = CRUMBS__LATE_ARMED;
  if (!__atomic_compare_exchange_n(&capture->late_answer, &armed, CRUMBS__LATE_STOPPED, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return false;
  }
  crumbs__capture_futex(&capture->late_answer, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  crumbs__testing_wait_while(&capture->late_answer, CRUMBS__LATE_STOPPED);
  return true;
}

void crumbs__capture_testing_late_done(void) { crumbs__late_step(CRUMBS__LATE_DONE); }

bool crumbs__capture_testing_late_paused(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t *hooks[] = {&capture->late_answer, &capture->stale_request};
  for (unsigned k = 0; k < sizeof hooks / sizeof hooks[0]; k++) {
    if (__atomic_load_n(hooks[k], __ATOMIC_ACQUIRE) == CRUMBS__LATE_OFF) continue;
    crumbs__testing_wait_while(hooks[k], CRUMBS__LATE_ARMED);
    if (__atomic_load_n(hooks[k], __ATOMIC_ACQUIRE) == CRUMBS__LATE_ARMED) return false;
  }
  return true;
}

void crumbs__capture_testing_late_go(void) {
  uint32_t stopped = CRUMBS__LATE_STOPPED;
  if (!__atomic_compare_exchange_n(&crumbs__capture.late_answer, &stopped, CRUMBS__LATE_GO, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;
  }
  crumbs__capture_futex(&crumbs__capture.late_answer, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  crumbs__testing_wait_while(&crumbs__capture.late_answer, CRUMBS__LATE_GO);
}

/// Capture handler, leaving, once it has counted itself out: the first thread a live capture
/// asked with SIGPROF stops until a crash's capture has asked every thread (tests only: a thread
/// not yet out of the handler when the crash asks it, as on a loaded machine).
void crumbs__capture_testing_slow_leaver_stop(int asked_with) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t armed = CRUMBS__LATE_ARMED;
  if (asked_with != SIGPROF || __atomic_load_n(&capture->slow_leaver, __ATOMIC_ACQUIRE) != armed ||
      !__atomic_compare_exchange_n(&capture->slow_leaver, &armed, CRUMBS__LATE_STOPPED, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;
  }
  crumbs__testing_wait_while(&capture->slow_leaver, CRUMBS__LATE_STOPPED);
}

void crumbs__capture_testing_slow_leaver_go(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t stopped = CRUMBS__LATE_STOPPED;
  if (__atomic_compare_exchange_n(&capture->slow_leaver, &stopped, CRUMBS__LATE_GO, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    crumbs__capture_futex(&capture->slow_leaver, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  }
  uint32_t leaving = CRUMBS__LATE_DONE; // the stale request's thread, stopped on its way out
  if (__atomic_compare_exchange_n(&capture->stale_request, &leaving, CRUMBS__LATE_OFF, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    crumbs__capture_futex(&capture->stale_request, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  }
}

/// Capture handler, at its door (before it counts itself in): the first thread the live capture
/// asked with SIGPROF waits there until the crash that took the capture over lets it in
/// (crumbs__capture_testing_stale_go): a request delivered late.
void crumbs__capture_testing_stale_hold(int signal_number) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t armed = CRUMBS__LATE_ARMED;
  if (signal_number != SIGPROF || __atomic_load_n(&capture->stale_request, __ATOMIC_ACQUIRE) != armed ||
      !__atomic_load_n(&capture->live, __ATOMIC_ACQUIRE) ||
      !__atomic_compare_exchange_n(&capture->stale_request, &armed, CRUMBS__LATE_STOPPED, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;
  }
  crumbs__capture_futex(&capture->stale_request, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  crumbs__testing_wait_while(&capture->stale_request, CRUMBS__LATE_STOPPED);
}

/// Capture handler, on its way out of a request it did not answer: the held-back thread says so
/// and stays inside until the crash has asked every thread (crumbs__capture_testing_slow_leaver_go).
void crumbs__capture_testing_stale_linger(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t let_in = CRUMBS__LATE_GO;
  if (!__atomic_compare_exchange_n(&capture->stale_request, &let_in, CRUMBS__LATE_DONE, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;
  }
  crumbs__capture_futex(&capture->stale_request, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  crumbs__testing_wait_while(&capture->stale_request, CRUMBS__LATE_DONE);
}

void crumbs__capture_testing_stale_go(void) {
  uint32_t stopped = CRUMBS__LATE_STOPPED;
  if (!__atomic_compare_exchange_n(&crumbs__capture.stale_request, &stopped, CRUMBS__LATE_GO, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;
  }
  crumbs__capture_futex(&crumbs__capture.stale_request, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
  crumbs__testing_wait_while(&crumbs__capture.stale_request, CRUMBS__LATE_GO);
}

// MARK: - An uninstall that meets a crash

/// A crash that holds the capture, listed its threads and is about to ask them
/// tells the thread waiting to uninstall (a byte on the descriptor), and waits (at most 10 s)
/// until that uninstall has dealt with the capture's signals (`uninstall_met`).
static int crumbs__uninstall_meet_fd = -1;

void crumbs__thread_capture_testing_uninstall_meets_crash(int fd) {
  __atomic_store_n(&crumbs__capture.uninstall_met, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__uninstall_meet_fd, fd, __ATOMIC_RELEASE);
}

void crumbs__capture_testing_uninstall_meet(void) {
  int fd = __atomic_exchange_n(&crumbs__uninstall_meet_fd, -1, __ATOMIC_ACQ_REL);
  char byte = 1;
  if (fd < 0 || write(fd, &byte, 1) != 1) return;
  crumbs__testing_wait_while(&crumbs__capture.uninstall_met, 0u);
}

/// The end of an uninstall's part in the capture (tests only: what the crash above waits for).
void crumbs__capture_testing_uninstall_done(void) {
  __atomic_store_n(&crumbs__capture.uninstall_met, 1u, __ATOMIC_RELEASE);
  crumbs__capture_futex(&crumbs__capture.uninstall_met, FUTEX_WAKE_PRIVATE, 0x7fffffff, 0);
}

// MARK: - Switches (crumbs_crash_testing.c)

void crumbs__thread_capture_testing_deadline_ns(uint64_t deadline_ns) {
  __atomic_store_n(&crumbs__capture.deadline_ns, deadline_ns != 0 ? deadline_ns : CRUMBS__CAPTURE_DEADLINE_NS,
                   __ATOMIC_RELAXED);
}

void crumbs__thread_capture_testing_skip_mask_check(bool skip) {
  __atomic_store_n(&crumbs__capture.skip_mask_check, skip ? 1u : 0u, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_slow_leaver(bool enabled) {
  __atomic_store_n(&crumbs__capture.slow_leaver, enabled ? CRUMBS__LATE_ARMED : CRUMBS__LATE_OFF, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_stale_request(bool enabled) {
  __atomic_store_n(&crumbs__capture.stale_request, enabled ? CRUMBS__LATE_ARMED : CRUMBS__LATE_OFF, __ATOMIC_RELEASE);
}

void crumbs__thread_capture_testing_late_answer(bool enabled) {
  __atomic_store_n(&crumbs__capture.late_answer, enabled ? CRUMBS__LATE_ARMED : CRUMBS__LATE_OFF, __ATOMIC_RELEASE);
}
