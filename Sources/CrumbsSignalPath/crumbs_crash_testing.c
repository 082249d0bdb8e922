// crumbs_crash_testing.c — test-only entry points (crumbs_crash_testing.h). Not signal-safe:
// called by tests from ordinary threads; libc calls: none.
#include "crumbs_crash_testing.h"
#include "crumbs_crash_internal.h"

void crumbs_crash_testing_fault_inside_handler(bool enabled) {
  __atomic_store_n(&crumbs__crash_installed.test_fault, enabled ? 1u : 0u, __ATOMIC_RELEASE);
}

void crumbs_crash_testing_ask_blocked_threads(bool enabled) {
  crumbs__thread_capture_testing_skip_mask_check(enabled);
}
