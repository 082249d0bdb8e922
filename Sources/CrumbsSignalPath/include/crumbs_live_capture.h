// crumbs_live_capture.h — every thread's stack while the process lives on (hang reports, thread
// dumps on demand): the crash handler's thread capture (crumbs_thread_capture.c), run from an
// ordinary thread, each thread parked only while its own stack is walked.
//
// Entry point: crumbs_capture_threads_live (crumbs_thread_capture_live.c has the design).
//
// NOT SIGNAL-SAFE: call it from an ordinary thread, never from a signal handler. It allocates
// once (pthread_getattr_np, for the caller's own stack) before it parks any thread; while a
// thread is parked it calls only what the crash handler calls (a parked thread may hold the
// allocator's or the loader's lock). Callers serialize it with crumbs_crash_install,
// crumbs_crash_refresh_modules and crumbs_crash_uninstall, as those are with each other (the
// Swift wrapper holds the crash handler's lock around it).

#ifndef CRUMBS_LIVE_CAPTURE_H
#define CRUMBS_LIVE_CAPTURE_H

#include "crumbs_crash_record.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// How a live capture runs; zeros take the defaults.
typedef struct crumbs_live_capture_options {
  /// How long an asked thread has to answer, from its request (a thread that blocks the
  /// signals or is stopped is not waited for at all). 0: the crash handler's, 50 ms (or what
  /// crumbs_crash_testing_capture_deadline_ms set).
  uint64_t answer_deadline_ns;
  /// The whole capture at most: threads not asked by then are listed as not answering (a crash
  /// on another thread waits this long for the capture, plus a margin). 0: four times the
  /// answer deadline, at least 250 ms.
  uint64_t limit_ns;
  /// Threads asked at once: each is parked from its answer until its own walk is done, so
  /// fewer means shorter pauses and a longer capture. 0: 4.
  uint32_t window;
  uint32_t reserved;
} crumbs_live_capture_options;

/// What a live capture measured.
typedef struct crumbs_live_capture_stats {
  uint64_t started_wall_ns;  // CLOCK_REALTIME when it started
  uint64_t duration_ns;      // its start to its end (also the table's capture_duration_ns)
  uint64_t longest_pause_ns; // the longest a thread stayed parked (each entry's paused_ns)
  uint32_t longest_pause_tid;
  uint32_t parked;       // threads parked (and released)
  uint32_t signalled;    // signals sent (each a thread that was running, or left its call)
  uint32_t read_blocked; // threads walked where they block in a system call, not signalled
} crumbs_live_capture_stats;

/// crumbs_capture_threads_live's result.
enum {
  CRUMBS_LIVE_CAPTURE_OK = 0,
  /// No crash handler installed in this process (crumbs_crash_install): the capture needs its
  /// capture signal and its record's module table.
  CRUMBS_LIVE_CAPTURE_NOT_INSTALLED = 1,
  /// Another capture holds the threads: a crash being recorded (for good), or another live
  /// capture (callers serialize them: see above).
  CRUMBS_LIVE_CAPTURE_BUSY = 2,
  /// /proc/self/task could not be read: only the calling thread is listed.
  CRUMBS_LIVE_CAPTURE_LISTING_FAILED = 3,
};

/// Captures every thread of the process into `out` (the caller's buffer, never the crash
/// record): entry 0 the calling thread (CRUMBS_THREAD_REQUESTING, its own frames), then every
/// other thread as the crash handler lists them (captured with registers and frames, or not
/// answering, or not asked), `thread_count` entries. The process runs on: a thread blocked in a
/// system call is walked from where it blocks and never signalled (its call is not interrupted:
/// CRUMBS_NOT_SIGNALLED_IN_SYSCALL); a thread under a seccomp filter is never signalled
/// (CRUMBS_NOT_SIGNALLED_SECCOMP); every other thread is asked with a signal, parked from its
/// answer until its stack is walked, then released (a blocking call it enters just as the signal
/// comes may then fail with EINTR); none is ended or held. Frames are
/// walked over the installed record's module table, read only: a library loaded since its last
/// refresh gets frame-pointer and scanned frames, and is not added (list the live modules to
/// symbolicate). `options` may be NULL; `stats` may be NULL. Returns a CRUMBS_LIVE_CAPTURE_*
/// value (`out` is filled for OK and LISTING_FAILED). Not signal-safe.
int crumbs_capture_threads_live(crumbs_crash_thread_table *out, const crumbs_live_capture_options *options,
                                crumbs_live_capture_stats *stats);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_LIVE_CAPTURE_H
