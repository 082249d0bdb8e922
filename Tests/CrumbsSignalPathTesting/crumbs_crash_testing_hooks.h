// crumbs_crash_testing_hooks.h — what the test target's two files share: the hook table they
// fill (kit/crumbs_hooks.h) and the thread capture's switches.
#ifndef CRUMBS_CRASH_TESTING_HOOKS_H
#define CRUMBS_CRASH_TESTING_HOOKS_H

#include "kit/crumbs_hooks.h"

#include <stdbool.h>
#include <stdint.h>

/// The test target's table: its switches are written here, its hooks never change.
extern crumbs__hooks crumbs__testing_hooks;
/// Publishes the table to the product (idempotent). Before any switch is turned on.
void crumbs__testing_arm(void);

void crumbs__thread_capture_testing_live(int fault, int meet_fd);
void crumbs__thread_capture_testing_late_answer(bool enabled);
void crumbs__thread_capture_testing_slow_leaver(bool enabled);
void crumbs__thread_capture_testing_stale_request(bool enabled);
void crumbs__thread_capture_testing_uninstall_meets_crash(int fd);

#endif // CRUMBS_CRASH_TESTING_HOOKS_H
