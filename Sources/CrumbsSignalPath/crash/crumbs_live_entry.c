// crumbs_live_entry.c — the live capture's public entry (include/crumbs_live_capture.h): the
// thread capture (threads/) run on the installed crash record, whose module table the unwinder
// uses (docs/crash-capture.md#threads-every-other-thread).
//
// NOT SIGNAL-SAFE: an ordinary thread's call (the capture lists threads with malloc-free code,
// but callers serialize captures with a lock).

#include "crash/crumbs_crash.h"
#include "crumbs_live_capture.h"
#include "threads/crumbs_threads.h"

// Not inlined, and its call is never a tail call (the barrier after it): the live capture drops
// exactly this frame and its own from the calling thread's stack.
__attribute__((noinline)) int crumbs_capture_threads_live(crumbs_crash_thread_table *out,
                                                          const crumbs_live_capture_options *options,
                                                          crumbs_live_capture_stats *stats) {
  int result = crumbs__thread_capture_live(crumbs__crash_own_record(), out, options, stats);
  __asm__ volatile("" ::: "memory");
  return result;
}
