// Test-only C helpers for hostile answers to `crumbs threads` (crumbs_test_requests.c): a
// process that takes the request signal itself to learn the cookie, and a referee that makes a
// pid be reused at one exact moment of the CLI's work (fanotify permission events; clone3 with
// set_tid). Why C: a signal handler, and a cloned child of a multithreaded process, may only
// make async-signal-safe calls.
#ifndef CRUMBS_TEST_REQUESTS_H
#define CRUMBS_TEST_REQUESTS_H
#include <stdint.h>

/// Takes `signal_number` with a handler of our own that writes each request's value (the cookie,
/// 4 bytes) to a pipe; returns the pipe's read end, or -1 (errno set).
int crumbs_test_catch_requests(int signal_number);
/// The next cookie from that pipe (blocks); -1 at end or on error.
int64_t crumbs_test_next_request(int fd);

/// A fanotify descriptor with permission events for every open of the file at `path` (root
/// only); -1 (errno set) otherwise.
int crumbs_test_watch_opens(const char *path);
/// Waits at most `timeout_ms` for an open of the watched file by a process other than
/// `ignored_pid` (every open by that one is allowed at once). Returns 1 and the event's pid and
/// descriptor (the opener waits until crumbs_test_allow_open), 0 on timeout, -1 on error.
int crumbs_test_next_open(int fd, int ignored_pid, int timeout_ms, int *pid, int *event_fd);
/// Lets the held open go on, and closes its event descriptor.
int crumbs_test_allow_open(int fd, int event_fd);

/// Starts a child with exactly pid `pid` (clone3 with set_tid: root only, Linux 5.5) that
/// takes `signal_number` at its default action (which, for a real-time signal, ends it) and
/// waits forever. Returns its pid, or -1 (errno set: EEXIST when the pid is taken).
int crumbs_test_spawn_with_pid(int pid, int signal_number);
/// If child `pid` has ended, reaps it and returns its wait status; -1 while it runs.
int crumbs_test_reap_if_ended(int pid);
#endif
