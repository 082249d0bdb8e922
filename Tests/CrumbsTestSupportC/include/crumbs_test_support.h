// Test-only C helpers. Why C: they install signal handlers that append breadcrumbs, and a signal
// handler must not run Swift code.
#ifndef CRUMBS_TEST_SUPPORT_H
#define CRUMBS_TEST_SUPPORT_H
#include <stdint.h>

/// Installs a handler for `signal_number` that appends one breadcrumb
/// ("from signal handler", level info, type system, flag FROM_SIGNAL_HANDLER) to the installed
/// ring and counts how many it appended. Returns 0 or -1 (errno set).
int crumbs_test_install_appending_handler(int signal_number);
/// Breadcrumbs appended by that handler so far.
uint64_t crumbs_test_signal_appends(void);
#endif
