// Test-only: a signal handler that appends to the ring. Async-signal-safe: it calls only
// crumbs_ring_add (see crumbs_ring_append.h for what that uses) and an atomic increment.
#include "crumbs_test_support.h"
#include "crumbs_ring.h"

#include <signal.h>
#include <string.h>

static uint64_t appended;

static void append_from_handler(int signal_number) {
  (void)signal_number;
  static const crumbs_attribute attributes[] = {{"origin", "signal"}};
  if (crumbs_ring_add(crumbs_installed_ring(), CRUMBS_LEVEL_INFO, CRUMBS_TYPE_SYSTEM,
                      CRUMBS_SLOT_FROM_SIGNAL_HANDLER, "from signal handler", attributes, 1)) {
    __atomic_fetch_add(&appended, 1, __ATOMIC_RELAXED);
  }
}

int crumbs_test_install_appending_handler(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = append_from_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(signal_number, &action, NULL);
}

uint64_t crumbs_test_signal_appends(void) { return __atomic_load_n(&appended, __ATOMIC_RELAXED); }
