// crumbs_altstack.h — the crash handler's alternate signal stacks. Internal to CrumbsSignalPath
// (crumbs_crash_install.c drives it). Design: docs/crash-capture.md#alternate-stacks
//
// Entry points, in call order:
//   crumbs__altstack_reserve               (install, once) map the pool, guard its first stacks
//   crumbs__altstack_guard_rest            (after install, off the caller's thread) the others
//   crumbs__altstack_give_install_thread   (install) the installing thread's own stack
//   crumbs__altstack_resolve_calls         (install) bind the libc calls the hook makes
//   crumbs__altstack_start                 (install) hand out stacks: the ring's first-append hook,
//                                          and (by choice) to every thread created from now on
//   [a thread created after install]       crumbs_thread_start.c: give_this_thread on the new thread
//   [first append of each thread]          the hook gives the thread a stack from the pool
//   crumbs__altstack_give_this_thread      (prepare_thread) the same, asked for explicitly; the
//                                          pool grows by a chunk of stacks when used up
//   crumbs__altstack_stop                  (uninstall) stop handing out stacks
//   crumbs__altstack_restore_install_thread  (uninstall) the installing thread's previous stack
//
// SIGNAL SAFETY: the first-append hook is async-signal-safe (it may run inside a signal handler
// that appends); every function declared here is set-up code: not signal-safe.

#ifndef CRUMBS_ALTSTACK_H
#define CRUMBS_ALTSTACK_H

#include <stdbool.h>
#include <stdint.h>

/// Bytes of one alternate stack when the configuration says 0.
#define CRUMBS__ALTSTACK_DEFAULT_SIZE (64u * 1024u)
/// Alternate stacks in the pool when the configuration says 0, and the most it may ask for.
#define CRUMBS__ALTSTACK_DEFAULT_COUNT 64u
#define CRUMBS__ALTSTACK_MAX_COUNT 1024u

/// Maps the pool once: `count` stacks for other threads plus one for the installing thread,
/// `size` bytes each (rounded up to pages; 0: the defaults above), and sets the guard page below
/// the first `eager` of them (0: all). Later calls do nothing and return true. Returns false
/// (errno set) when the mapping failed. Not signal-safe.
bool crumbs__altstack_reserve(uint32_t size, uint32_t count, uint32_t eager);

/// Sets the guard pages `crumbs__altstack_reserve` left for later. Idempotent. Not signal-safe.
void crumbs__altstack_guard_rest(void);

/// Gives the calling (installing) thread the pool's extra stack unless it has an alternate stack
/// at least as large, remembering the one it had. Once: later calls do nothing. Not signal-safe.
void crumbs__altstack_give_install_thread(void);

/// Gives back the installing thread's previous alternate stack, when called on that thread and
/// it still uses ours. Not signal-safe.
void crumbs__altstack_restore_install_thread(void);

/// Calls once each libc function the first-append hook uses, so no lazy PLT binding (which
/// takes the loader's lock) happens in a signal handler. Not signal-safe.
void crumbs__altstack_resolve_calls(void);

/// Starts (or stops) handing out stacks: sets (or clears) the ring's first-append hook, and
/// whether threads created from now on get one at their start (`new_threads`). The pool stays
/// mapped after stop: threads may still point their alternate stack at it. Not signal-safe.
void crumbs__altstack_start(bool new_threads);
void crumbs__altstack_stop(void);

/// Whether a thread created now should get an alternate stack at its start (installed, and
/// asked for). Safe to call from anywhere (one atomic load).
bool crumbs__altstack_covers_new_threads(void);

/// Gives the calling thread an alternate stack from the pool unless it has one at least as
/// large; when the pool is used up, the pool grows by a chunk of stacks in one mapping (kept
/// for later threads: stacks of exited threads are reused, never unmapped). Returns whether it
/// has an alternate stack afterwards. Thread-safe; not signal-safe (it is the hook's work plus
/// mmap and the chunk's guards, for crumbs_crash_prepare_thread and new threads).
bool crumbs__altstack_give_this_thread(void);
/// Where stack `index` of the first pool starts: its guard page (`index` == the pool's count:
/// the installing thread's). NULL before a pool exists or past it. Any thread.
void *crumbs__altstack_guard_at(unsigned index);

#endif // CRUMBS_ALTSTACK_H
