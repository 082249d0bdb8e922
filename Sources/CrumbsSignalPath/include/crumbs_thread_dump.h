// crumbs_thread_dump.h — how another process asks this one for a dump of its threads (`crumbs
// threads PID`): a real-time signal, chosen at start and named in the ring header, whose handler
// only wakes a responder thread.
//
// Why C: the request arrives in a signal handler, where the Swift runtime must not run.
//
// Entry points, in call order:
//   crumbs_thread_dump_install     take a real-time signal nobody handles, below the crash
//                                  handler's capture signal; write it to the ring header's
//                                  `thread_dump_signal`
//   [signal] the request handler   a request sent by a process (sigqueue: SI_QUEUE, kill: SI_USER)
//                                  writes its cookie (the sigqueue value, 0 for kill) to the wake
//                                  descriptor; everything else (a tgkill from inside the process,
//                                  a kernel-made signal, a forked child's inherited handler) is
//                                  ignored
//   crumbs_thread_dump_uninstall   the header's field back to 0, the handler made inert (it
//                                  drops requests: see crumbs_thread_dump.c for why it is not
//                                  given back to SIG_DFL), and wait for a handler still writing
//
// Who may ask: whoever may send the process a signal, by the kernel's rule for kill(2) (the
// sender's real or effective uid is the target's real or saved uid, or the sender has
// CAP_KILL). The answer is written next to the ring, with the ring's permissions (0600 in a 0700
// directory), so only a user who may read the ring reads the dump.
//
// SIGNAL SAFETY: the request handler is async-signal-safe (see crumbs_thread_dump.c for its libc
// calls). install/uninstall are set-up code: not signal-safe, not thread-safe against each other
// (the Swift wrapper serializes them).

#ifndef CRUMBS_THREAD_DUMP_H
#define CRUMBS_THREAD_DUMP_H

#include "crumbs_ring_append.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Takes the highest real-time signal whose action is SIG_DFL, below the crash handler's capture
/// signal (below SIGRTMAX when none is installed, which keeps SIGRTMAX for it), and installs the
/// request handler on it (SA_SIGINFO | SA_RESTART); after an uninstall, the signal taken then,
/// while the handler is still ours. Each request writes 4 bytes (its cookie,
/// little-endian) to `wake_descriptor`, which must be a non-blocking pipe's write end (a full pipe
/// drops the request: requests are bounded by its size). Records the signal in `ring`'s header
/// (may be NULL). Returns the signal, 0 when every candidate is taken or the fork hook that makes
/// a forked child's handler inert cannot be registered (nothing installed), or -1 when one is
/// installed already. Not signal-safe.
int crumbs_thread_dump_install(const crumbs_ring *ring, int wake_descriptor);

/// Sets the header's `thread_dump_signal` back to 0, makes the handler drop every request from
/// now on (it stays installed, inert), and returns once no request handler is still using the
/// wake descriptor: the caller may close it then. Does nothing when nothing is installed.
/// Not signal-safe.
void crumbs_thread_dump_uninstall(void);

/// The installed request signal, or 0 (none, or uninstalled). Not signal-safe (set-up state).
int crumbs_thread_dump_signal(void);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_THREAD_DUMP_H
