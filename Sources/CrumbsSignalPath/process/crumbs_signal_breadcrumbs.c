// crumbs_signal_breadcrumbs.c — non-fatal signals as breadcrumbs, chained politely; the exit hook.
// Design (the handler's steps, how it is installed): docs/crash-capture.md#signal-breadcrumbs
//
// Entry points, in call order: crumbs_signal_breadcrumbs_install (set-up) → [signal]
// crumbs__signal_breadcrumb: breadcrumb, stop request or limit signal noted, then the saved
// action → crumbs_signal_breadcrumbs_uninstall. crumbs_exit_hook_install: the hook exit() runs.
//
// ASYNC-SIGNAL-SAFE: crumbs__signal_breadcrumb and everything it calls. No malloc, no locks, no
// stdio, no Swift; errno saved on entry and restored before returning and before the app's
// handler runs. libc calls from signal context: clock_gettime(CLOCK_MONOTONIC) (vDSO,
// crumbs_context.c; the rate limit), clock_gettime(CLOCK_REALTIME) (vDSO; when a stop request or
// limit signal came), sched_getcpu and syscall(SYS_gettid) (the ring append); getpid (is the ring
// ours? to note a stop request or limit signal, to die by a terminating signal, has a crash of
// this process begun?); through
// crumbs_die_by_signal.c memset, sigaction (libc's own), sigemptyset/sigaddset, sigprocmask,
// getpid, syscall(SYS_gettid), syscall(SYS_tgkill). Then the app's own handler, the app's business.

#define _GNU_SOURCE
#include "crumbs_signal_breadcrumbs.h"
#include "kit/crumbs_context.h"
#include "kit/crumbs_die_by_signal.h"
#include "kit/crumbs_format.h"
#include "crash/crumbs_crash.h"
#include "crumbs_ring.h"
#include "crumbs_ring_ends.h"
#include "crumbs_signal_names.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CRUMBS__SB_MAX_SIGNAL 64

// MARK: - Installed state (written by install before the action is taken, read by the handler)

static struct sigaction crumbs__sb_previous[CRUMBS__SB_MAX_SIGNAL];
static uint64_t crumbs__sb_installed_mask;                // atomic
static uint64_t crumbs__sb_reset_mask;                    // atomic: SA_RESETHAND handler already called once
static uint32_t crumbs__sb_per_second = 20;               // atomic
static int crumbs__sb_last_termination_request;           // atomic: SIGTERM/SIGINT/SIGHUP the app handled
static uint64_t crumbs__sb_window[CRUMBS__SB_MAX_SIGNAL]; // atomic: second of the window
static uint32_t crumbs__sb_count[CRUMBS__SB_MAX_SIGNAL];  // atomic: recorded in the window
static uint32_t crumbs__sb_suppressed[CRUMBS__SB_MAX_SIGNAL]; // atomic: skipped since last one

static void crumbs__signal_breadcrumb(int signo, siginfo_t *info, void *context);

bool crumbs_signal_breadcrumbs_refuses(int signo) {
  switch (signo) {
  case SIGSEGV:
  case SIGBUS:
  case SIGILL:
  case SIGFPE:
  case SIGABRT:
  case SIGTRAP:
  case SIGSYS:
  case SIGQUIT:
  case SIGKILL:
  case SIGSTOP:
  case SIGTSTP:
  case SIGTTIN:
  case SIGTTOU: return true;
  default: return signo <= 0 || signo >= CRUMBS__SB_MAX_SIGNAL;
  }
}

/// Whether SIG_DFL of `signo` terminates the process without a core dump (the fatal, core-dumping
/// ones are refused). Safe to call from a signal handler.
static bool crumbs__default_terminates(int signo) {
  switch (signo) {
  case SIGCHLD:
  case SIGCONT:
  case SIGURG:
  case SIGWINCH: return false;
  default: return true; // SIGHUP, SIGINT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1/2, SIGPOLL, SIGPROF, ...
  }
}

// MARK: - Install and uninstall (set-up, not signal-safe)

int crumbs_signal_breadcrumbs_install(uint64_t signal_mask, uint32_t per_second_limit, int *refused) {
  for (int signo = 1; signo < CRUMBS__SB_MAX_SIGNAL; signo++) {
    if ((signal_mask & (1ULL << signo)) && crumbs_signal_breadcrumbs_refuses(signo)) {
      if (refused != NULL) *refused = signo;
      return CRUMBS_SIGNAL_BREADCRUMBS_REFUSED_SIGNAL;
    }
  }
  if (signal_mask & 1ULL) {
    if (refused != NULL) *refused = 0;
    return CRUMBS_SIGNAL_BREADCRUMBS_REFUSED_SIGNAL;
  }
  __atomic_store_n(&crumbs__sb_per_second, per_second_limit != 0 ? per_second_limit : 20u, __ATOMIC_RELAXED);
  for (int signo = 1; signo < CRUMBS__SB_MAX_SIGNAL; signo++) {
    if (!(signal_mask & (1ULL << signo))) continue;
    struct sigaction current;
    if (sigaction(signo, NULL, &current) != 0) return CRUMBS_SIGNAL_BREADCRUMBS_SIGACTION_FAILED;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == crumbs__signal_breadcrumb) {
      continue; // already ours: keep the action saved when we took it
    }
    bool app_handler = (current.sa_flags & SA_SIGINFO) ||
                       (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN);
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = crumbs__signal_breadcrumb;
    if (app_handler) {
      ours.sa_mask = current.sa_mask;
      ours.sa_flags = SA_SIGINFO | (current.sa_flags &
                                    (SA_RESTART | SA_ONSTACK | SA_NODEFER | SA_NOCLDSTOP | SA_NOCLDWAIT));
    } else {
      sigemptyset(&ours.sa_mask);
      ours.sa_flags = SA_SIGINFO | SA_RESTART;
      if (signo == SIGCHLD) {
        ours.sa_flags |= current.sa_flags & (SA_NOCLDSTOP | SA_NOCLDWAIT);
        if (current.sa_handler == SIG_IGN) ours.sa_flags |= SA_NOCLDWAIT;
      }
    }
    // Saved before the action is taken: the handler never sees a half-written entry.
    crumbs__sb_previous[signo] = current;
    __atomic_and_fetch(&crumbs__sb_reset_mask, ~(1ULL << signo), __ATOMIC_RELEASE);
    __atomic_store_n(&crumbs__sb_suppressed[signo], 0, __ATOMIC_RELAXED);
    __atomic_or_fetch(&crumbs__sb_installed_mask, 1ULL << signo, __ATOMIC_RELEASE);
    if (sigaction(signo, &ours, NULL) != 0) {
      __atomic_and_fetch(&crumbs__sb_installed_mask, ~(1ULL << signo), __ATOMIC_RELEASE);
      return CRUMBS_SIGNAL_BREADCRUMBS_SIGACTION_FAILED;
    }
  }
  return CRUMBS_SIGNAL_BREADCRUMBS_OK;
}

void crumbs_signal_breadcrumbs_uninstall(void) {
  uint64_t mask = __atomic_load_n(&crumbs__sb_installed_mask, __ATOMIC_ACQUIRE);
  for (int signo = 1; signo < CRUMBS__SB_MAX_SIGNAL; signo++) {
    if (!(mask & (1ULL << signo))) continue;
    struct sigaction current;
    if (sigaction(signo, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
        current.sa_sigaction == crumbs__signal_breadcrumb) {
      struct sigaction previous = crumbs__sb_previous[signo];
      if (__atomic_load_n(&crumbs__sb_reset_mask, __ATOMIC_ACQUIRE) & (1ULL << signo)) {
        memset(&previous, 0, sizeof previous);
        previous.sa_handler = SIG_DFL;
        sigemptyset(&previous.sa_mask);
      }
      sigaction(signo, &previous, NULL);
    }
    __atomic_and_fetch(&crumbs__sb_installed_mask, ~(1ULL << signo), __ATOMIC_RELEASE);
  }
}

int crumbs_signal_breadcrumbs_last_termination_request(void) {
  return __atomic_load_n(&crumbs__sb_last_termination_request, __ATOMIC_ACQUIRE);
}

/// The installed ring when this process is its writer, else NULL: only the writer named in the
/// header says how its session ended or what came before (a child forked without our fork
/// handler still maps its parent's ring: crumbs_fork.h). Safe to call from a signal handler.
static const crumbs_ring *crumbs__own_ring(void) {
  const crumbs_ring *ring = crumbs_installed_ring();
  return ring != NULL && ring->header->pid == (uint32_t)getpid() ? ring : NULL;
}

/// Notes a stop request: the last in memory, the first in the ring header when the ring is this
/// process's own. Returns whether it differs from the last one noted. Safe to call from a
/// signal handler.
bool crumbs_signal_breadcrumbs_note_termination_request(int signo) {
  int before = __atomic_exchange_n(&crumbs__sb_last_termination_request, signo, __ATOMIC_ACQ_REL);
  const crumbs_ring *own = crumbs__own_ring();
  if (own != NULL) crumbs_ring_note_stop_request(own, signo, crumbs__context_clock_ns(CLOCK_REALTIME));
  return before != signo;
}

const char *crumbs_signal_breadcrumbs_app_handler_image(int signo) {
  if (signo <= 0 || signo >= CRUMBS__SB_MAX_SIGNAL) return NULL;
  struct sigaction action;
  if (sigaction(signo, NULL, &action) != 0) return NULL;
  if ((action.sa_flags & SA_SIGINFO) && action.sa_sigaction == crumbs__signal_breadcrumb) {
    if (__atomic_load_n(&crumbs__sb_reset_mask, __ATOMIC_ACQUIRE) & (1ULL << signo)) return NULL;
    action = crumbs__sb_previous[signo];
  }
  void *handler;
  if (action.sa_flags & SA_SIGINFO) {
    handler = (void *)action.sa_sigaction;
  } else if (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN) {
    return NULL;
  } else {
    handler = (void *)action.sa_handler;
  }
  Dl_info info;
  if (dladdr(handler, &info) == 0) return NULL;
  return info.dli_fname;
}

uint64_t crumbs_signal_breadcrumbs_installed_mask(void) {
  return __atomic_load_n(&crumbs__sb_installed_mask, __ATOMIC_ACQUIRE);
}

// MARK: - The handler (async-signal-safe)

/// Whether this delivery of `signo` may be recorded under the per-second limit; counts the ones
/// that may not. Safe to call from a signal handler.
static bool crumbs__within_limit(int signo, uint32_t *suppressed_before) {
  uint64_t second = crumbs__context_clock_ns(CLOCK_MONOTONIC) / 1000000000u;
  uint64_t window = __atomic_load_n(&crumbs__sb_window[signo], __ATOMIC_RELAXED);
  if (window != second && __atomic_compare_exchange_n(&crumbs__sb_window[signo], &window, second, false,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    __atomic_store_n(&crumbs__sb_count[signo], 0, __ATOMIC_RELAXED);
  }
  uint32_t recorded = __atomic_fetch_add(&crumbs__sb_count[signo], 1, __ATOMIC_RELAXED);
  if (recorded >= __atomic_load_n(&crumbs__sb_per_second, __ATOMIC_RELAXED)) {
    __atomic_fetch_add(&crumbs__sb_suppressed[signo], 1, __ATOMIC_RELAXED);
    return false;
  }
  *suppressed_before = __atomic_exchange_n(&crumbs__sb_suppressed[signo], 0, __ATOMIC_RELAXED);
  return true;
}

typedef enum crumbs__signal_action {
  CRUMBS__ACTION_HANDLER,
  CRUMBS__ACTION_IGNORED,
  CRUMBS__ACTION_DEFAULT_IGNORED,
  CRUMBS__ACTION_TERMINATES,
} crumbs__signal_action;

/// Appends the breadcrumb for one delivery. Safe to call from a signal handler.
static void crumbs__record_signal(const crumbs_ring *ring, int signo, const siginfo_t *info,
                                  crumbs__signal_action action, uint32_t suppressed_before) {
  char message[48];
  char name[28];
  crumbs_signal_name_text(signo, name, sizeof name);
  size_t used = crumbs__format_copy(message, sizeof message, name);
  crumbs__format_append(message, sizeof message, used, " received");

  crumbs_attribute attributes[8];
  size_t count = 0;
  char signal_number[24], code_text[24], sender_pid[24], sender_uid[24], skipped[24];
  attributes[count++] = (crumbs_attribute){"signal", name};
  crumbs__format_append_decimal(signal_number, sizeof signal_number, 0, signo);
  attributes[count++] = (crumbs_attribute){"signal.number", signal_number};
  static const char *const action_names[] = {"handler", "ignored", "default-ignored", "terminates"};
  attributes[count++] = (crumbs_attribute){"action", action_names[action]};
  if (info != NULL) {
    const char *code_name = crumbs_signal_code_name(signo, info->si_code);
    if (code_name == NULL) {
      crumbs__format_append_decimal(code_text, sizeof code_text, 0, info->si_code);
      code_name = code_text;
    }
    attributes[count++] = (crumbs_attribute){"signal.code", code_name};
    if (signo == SIGCHLD) {
      crumbs__format_append_decimal(sender_pid, sizeof sender_pid, 0, info->si_pid);
      crumbs__format_append_decimal(sender_uid, sizeof sender_uid, 0, info->si_status);
      attributes[count++] = (crumbs_attribute){"child.pid", sender_pid};
      attributes[count++] = (crumbs_attribute){"child.status", sender_uid};
    } else if (info->si_code <= 0) { // SI_USER, SI_QUEUE, SI_TKILL...: a process sent it
      crumbs__format_append_decimal(sender_pid, sizeof sender_pid, 0, info->si_pid);
      crumbs__format_append_decimal(sender_uid, sizeof sender_uid, 0, info->si_uid);
      attributes[count++] = (crumbs_attribute){"sender.pid", sender_pid};
      attributes[count++] = (crumbs_attribute){"sender.uid", sender_uid};
    }
  }
  if (suppressed_before > 0) {
    crumbs__format_append_decimal(skipped, sizeof skipped, 0, suppressed_before);
    attributes[count++] = (crumbs_attribute){"suppressed", skipped};
  }
  uint8_t level = CRUMBS_LEVEL_INFO;
  switch (signo) {
  case SIGTERM:
  case SIGINT:
  case SIGHUP:
  case SIGPIPE:
  case SIGXCPU:
  case SIGXFSZ:
  case SIGPWR: level = CRUMBS_LEVEL_WARNING; break;
  default: break;
  }
  if (action == CRUMBS__ACTION_TERMINATES) level = CRUMBS_LEVEL_WARNING;
  crumbs_ring_add(ring, level, CRUMBS_TYPE_SYSTEM, CRUMBS_SLOT_FROM_SIGNAL_HANDLER, message, attributes,
                  count);
}

/// Marks the ring as ended by `signo`, restores SIG_DFL and re-raises: does not return unless
/// the signal fails to kill (then the process goes on, as it would have without us: no _exit
/// here, an init process in a container ignores SIGTERM's default action). Safe to call from a
/// signal handler.
static void crumbs__terminate_by(int signo) {
  const crumbs_ring *own = crumbs__own_ring();
  if (own != NULL) crumbs_ring_mark_terminated_by_signal(own, signo);
  crumbs__die_by_signal(signo);
}

static void crumbs__signal_breadcrumb(int signo, siginfo_t *info, void *context) {
  int saved_errno = errno;
  if (signo <= 0 || signo >= CRUMBS__SB_MAX_SIGNAL) return;
  struct sigaction previous = crumbs__sb_previous[signo];
  uint64_t bit = 1ULL << signo;
  bool reset = (__atomic_load_n(&crumbs__sb_reset_mask, __ATOMIC_ACQUIRE) & bit) != 0;
  bool siginfo_handler = !reset && (previous.sa_flags & SA_SIGINFO);
  void (*plain)(int) = reset ? SIG_DFL : previous.sa_handler;

  crumbs__signal_action action;
  if (siginfo_handler || (plain != SIG_DFL && plain != SIG_IGN)) {
    action = CRUMBS__ACTION_HANDLER;
  } else if (plain == SIG_IGN) {
    action = CRUMBS__ACTION_IGNORED;
  } else if (crumbs__default_terminates(signo)) {
    action = CRUMBS__ACTION_TERMINATES;
  } else {
    action = CRUMBS__ACTION_DEFAULT_IGNORED;
  }

  // A stop request the app takes over (a ServiceGroup's graceful shutdown): the app ends the
  // session itself later, and may say it was this signal (crumbs_signal_breadcrumbs.h).
  if (action != CRUMBS__ACTION_TERMINATES && (signo == SIGTERM || signo == SIGINT || signo == SIGHUP)) {
    crumbs_signal_breadcrumbs_note_termination_request(signo);
  }
  // A resource limit the process outlives now (SIGXCPU at a CPU soft limit): the hard limit's
  // SIGKILL, if it comes, runs no code.
  if (action != CRUMBS__ACTION_TERMINATES && (signo == SIGXCPU || signo == SIGXFSZ)) {
    const crumbs_ring *own = crumbs__own_ring();
    if (own != NULL) crumbs_ring_note_limit_signal(own, signo, crumbs__context_clock_ns(CLOCK_REALTIME));
  }

  // Once a crash began, the signals a dying process gets (the SIGCHLD of the Swift runtime's
  // backtracer's helper when it ends) are not part of the trail that led to the crash: only one
  // that ends the process (a supervisor's SIGTERM cutting the death short) is recorded.
  const crumbs_ring *ring = crumbs_installed_ring();
  uint32_t suppressed_before = 0;
  if (ring != NULL && (action == CRUMBS__ACTION_TERMINATES ||
                       (!crumbs__crash_started() && crumbs__within_limit(signo, &suppressed_before)))) {
    crumbs__record_signal(ring, signo, info, action, suppressed_before);
  }

  switch (action) {
  case CRUMBS__ACTION_HANDLER:
    if (previous.sa_flags & SA_RESETHAND) {
      __atomic_or_fetch(&crumbs__sb_reset_mask, bit, __ATOMIC_RELEASE);
    }
    errno = saved_errno;
    if (siginfo_handler) {
      previous.sa_sigaction(signo, info, context);
    } else {
      plain(signo);
    }
    // The app's handler may set errno on purpose only for itself; the interrupted code keeps its own.
    break;
  case CRUMBS__ACTION_TERMINATES: crumbs__terminate_by(signo); break;
  case CRUMBS__ACTION_IGNORED:
  case CRUMBS__ACTION_DEFAULT_IGNORED: break;
  }
  errno = saved_errno;
}

// MARK: - The exit hook (runs in exit(), ordinary context)

static int crumbs__exit_hook_enabled; // atomic
static int crumbs__exit_hook_registered;

// without_status: non-NULL when the status is unknown (atexit gives none).
static void crumbs__exit_hook(int status, void *without_status) {
  if (!__atomic_load_n(&crumbs__exit_hook_enabled, __ATOMIC_ACQUIRE)) return;
  // A forked child exiting must not end its parent's session (a child forked by fork() has a
  // ring of its own: crumbs_fork.h).
  const crumbs_ring *ring = crumbs__own_ring();
  if (ring == NULL) return;
  char status_text[24];
  crumbs__format_append_decimal(status_text, sizeof status_text, 0, status);
  crumbs_attribute attributes[] = {{"lifecycle", "exit"}, {"exit.status", status_text}};
  crumbs_ring_add(ring, CRUMBS_LEVEL_INFO, CRUMBS_TYPE_SYSTEM, 0, "process exiting", attributes,
                  without_status == NULL ? 2 : 1);
  if (crumbs_ring_get_state(ring) == CRUMBS_RING_RUNNING) {
    crumbs_ring_set_state(ring, CRUMBS_RING_CLEAN);
  }
}

#if !defined(__GLIBC__)
static void crumbs__exit_hook_without_status(void) { crumbs__exit_hook(0, &crumbs__exit_hook_registered); }
#endif

bool crumbs_exit_hook_install(bool enabled) {
  __atomic_store_n(&crumbs__exit_hook_enabled, enabled ? 1 : 0, __ATOMIC_RELEASE);
  if (!enabled || crumbs__exit_hook_registered) return true;
#if defined(__GLIBC__)
  if (on_exit(crumbs__exit_hook, NULL) != 0) return false;
#else
  // on_exit is glibc's (musl has only atexit): the breadcrumb goes without the exit status.
  if (atexit(crumbs__exit_hook_without_status) != 0) return false;
#endif
  crumbs__exit_hook_registered = 1;
  return true;
}
