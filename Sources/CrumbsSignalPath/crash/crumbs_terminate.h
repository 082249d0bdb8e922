// crumbs_terminate.h — the std::terminate handler that keeps an uncaught C++ exception's type
// and what() for the crash handler. Internal to CrumbsSignalPath (not in include/), shared by
// crumbs_terminate.cpp (which fills it) and the C crash handler (which copies it into the record
// when the abort() that follows arrives). C and C++.
//
// Entry points, in call order:
//   crumbs__terminate_install     (crash install) set our terminate handler, keeping the previous
//   [an uncaught C++ exception]   ours records type and what() here, then calls the previous one
//                                 (libstdc++'s verbose handler prints them and calls abort())
//   [SIGABRT]                     the crash handler copies crumbs__crash_uncaught into the record
//   crumbs__terminate_uninstall   (crash uninstall) the previous handler back, if ours is current
//
// SIGNAL SAFETY: the crash handler only reads crumbs__crash_uncaught (plain loads after an
// acquire load of its flags). The terminate handler is not a signal handler, but it allocates
// nothing either: it may run after a std::bad_alloc. Install and uninstall are set-up code.

#ifndef CRUMBS_TERMINATE_H
#define CRUMBS_TERMINATE_H

#include "crumbs_crash_record.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The C++ half of a crumbs_crash_message (cxx_* fields), written once by the first thread
/// whose std::terminate runs with an exception; `cxx_flags` is stored last (release) and is 0
/// until then.
extern crumbs_crash_message crumbs__crash_uncaught;

/// Makes our handler the std::terminate handler; the first call keeps the one it replaces
/// (chained to after recording). Not signal-safe.
void crumbs__terminate_install(void);

/// Gives back the handler install replaced, when ours is still the current one. Not
/// signal-safe.
void crumbs__terminate_uninstall(void);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_TERMINATE_H
