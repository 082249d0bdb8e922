// crumbs_crash_state.c — the crash capture's shared state, defined apart from the code that uses
// it: what install prepares for the handler (crumbs__crash_installed) and each thread's own
// crash state (crumbs__crash_this_thread); crumbs_crash_internal.h describes both.
//
// Why a file of its own: install writes them, the handler, the record writer and the thread
// capture read them. Defined in any one of those files, the others would depend on it while it
// calls them (the handler calls the record writer, which calls the thread capture); here each
// depends on this file and calls point one way: install → handler → record writer → capture.
//
// ASYNC-SIGNAL-SAFE: data only, no code.

#include "crash/crumbs_crash_internal.h"

crumbs__crash_state crumbs__crash_installed = {.wait_ms = 3000};
__thread crumbs__crash_thread crumbs__crash_this_thread __attribute__((tls_model("initial-exec")));
