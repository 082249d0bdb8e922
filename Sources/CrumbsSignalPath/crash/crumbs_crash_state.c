// crumbs_crash_state.c — the crash capture's state and its reader: what install prepares for the
// handler (crumbs__crash_installed), each thread's chain state (crumbs__crash_this_thread), and
// the installed record when it is this process's own
// (docs/crash-capture.md#crash-the-handler-and-its-record).
//
// A file of its own: install writes the state, the handler and the record writer read it. Here
// each depends on this file and calls point one way: install → handler → record writer →
// the thread capture.
//
// ASYNC-SIGNAL-SAFE: crumbs__crash_own_record, crumbs__crash_started (getpid, atomics).

#include "crash/crumbs_crash.h"

#include <unistd.h>

crumbs__crash_state crumbs__crash_installed = {.wait_ms = 3000};
__thread crumbs__crash_thread crumbs__crash_this_thread __attribute__((tls_model("initial-exec")));

crumbs_crash_record *crumbs__crash_own_record(void) {
  crumbs_crash_record *record = crumbs__crash_installed.record;
  return record != NULL && record->pid == (uint32_t)getpid() ? record : NULL;
}

bool crumbs__crash_started(void) {
  const crumbs_crash_record *record = crumbs__crash_own_record();
  return record != NULL && __atomic_load_n(&record->state, __ATOMIC_ACQUIRE) != CRUMBS_CRASH_ARMED;
}
