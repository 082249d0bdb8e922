// crumbs_hooks.h — the one door through which tests reach inside the signal path: a struct of
// hook pointers and switches that is NULL in the product. A test-only C target
// (Tests/CrumbsSignalPathTesting) fills one and publishes it; every hook site costs one load
// while it is NULL. Each hook holds a thread at one step of the thread capture's protocol, or
// makes the crash handler fault inside itself, so the tests reproduce without timing the races
// a loaded machine produces by chance (docs/crash-capture.md#test-hooks).
//
// ASYNC-SIGNAL-SAFE: crumbs__hooks_get (an atomic load). The hooks themselves run in signal
// handlers and say what they call.
#ifndef CRUMBS_HOOKS_H
#define CRUMBS_HOOKS_H

#include "crumbs_crash_record.h"

#include <stdbool.h>
#include <stdint.h>

struct crumbs__capture_slot;

typedef struct crumbs__hooks {
  // Switches (atomic words; 0: off).
  uint32_t fault_inside_handler; // the crash handler faults while writing the record
  uint32_t ask_blocked_threads;  // the capture asks threads whatever their blocked mask says
  uint32_t signal_blocked;       // live captures signal blocked threads instead of reading them
  // The capture handler, on the asked thread (threads/crumbs_thread_capture.c).
  bool (*late_stop)(const struct crumbs__capture_slot *slot); // before its answer
  void (*late_done)(void);                                    // past its answer
  void (*stale_hold)(int signal_number, uint32_t tid);        // at its door
  void (*stale_linger)(uint32_t tid);                         // leaving without an answer
  void (*slow_leaver_stop)(int asked_with);                   // leaving
  void (*uninstall_done)(void);                               // uninstall dealt with the signals
  // The crash's capture (threads/crumbs_thread_capture_crash.c).
  void (*late_go)(void);        // it took a live capture over
  void (*stale_go)(void);       // it waited for the leavers
  void (*uninstall_meet)(void); // it is about to ask the threads
  void (*slow_leaver_go)(void); // it asked every thread
  // The live capture (threads/crumbs_thread_capture_live.c).
  void (*live_parked)(void);                                // a thread is parked and walked
  void (*live_answered)(const crumbs_crash_record *record); // answers came in
} crumbs__hooks;

/// NULL in the product; a test target stores its table here (release) before it arms a hook.
extern const crumbs__hooks *crumbs__hooks_armed;

/// The armed table, or NULL. Safe to call from a signal handler (one atomic load).
static inline const crumbs__hooks *crumbs__hooks_get(void) {
  return __atomic_load_n(&crumbs__hooks_armed, __ATOMIC_ACQUIRE);
}

/// Calls hook `name` with the arguments when a table is armed and holds it.
#define CRUMBS__HOOK(name, ...)                                                                             \
  do {                                                                                                      \
    const crumbs__hooks *crumbs__hooks_now = crumbs__hooks_get();                                           \
    if (crumbs__hooks_now != NULL && crumbs__hooks_now->name != NULL) crumbs__hooks_now->name(__VA_ARGS__); \
  } while (0)
/// CRUMBS__HOOK for a hook without arguments.
#define CRUMBS__HOOK0(name)                                                                      \
  do {                                                                                           \
    const crumbs__hooks *crumbs__hooks_now = crumbs__hooks_get();                                \
    if (crumbs__hooks_now != NULL && crumbs__hooks_now->name != NULL) crumbs__hooks_now->name(); \
  } while (0)
/// Whether switch `name` is on (false when no table is armed).
#define CRUMBS__HOOK_ON(name) \
  (crumbs__hooks_get() != NULL && __atomic_load_n(&crumbs__hooks_get()->name, __ATOMIC_ACQUIRE) != 0)

#endif // CRUMBS_HOOKS_H
