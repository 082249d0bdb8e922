// Test-only: a request served after a crash, or not (crumbs_test_after_crash.h).
// The handler is async-signal-safe: write, poll, clock_gettime.

#define _GNU_SOURCE
#include "crumbs_test_after_crash.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int crumbs__request[2] = {-1, -1}; // the handler writes one byte: "serve it now"
static int crumbs__reply[2] = {-1, -1};   // the worker writes one byte once it served
static int crumbs__ready[2] = {-1, -1};   // the worker writes one byte before it blocks
static int crumbs__wait_ms;
static struct sigaction crumbs__before; // the action the handler replaced

static void crumbs__say(const char *text) { (void)!write(STDOUT_FILENO, text, strlen(text)); }

static void *crumbs__late_worker(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "late-worker");
  char byte = 1;
  (void)!write(crumbs__ready[1], &byte, 1);
  ssize_t got;
  do {
    got = read(crumbs__request[0], &byte, 1);
  } while (got < 0 && errno == EINTR);
  if (got == 1) {
    crumbs__say("served\n");
    (void)!write(crumbs__reply[1], &byte, 1);
  }
  return NULL;
}

static long crumbs__now_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void crumbs__after_crash(int signal_number, siginfo_t *info, void *context) {
  int saved_errno = errno;
  // What the Swift runtime's backtracer does first: SIG_DFL back for the signals it handles.
  static const int handled[] = {SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV};
  struct sigaction default_action;
  memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (unsigned index = 0; index < sizeof handled / sizeof handled[0]; index++) {
    sigaction(handled[index], &default_action, NULL);
  }
  char byte = 1;
  (void)!write(crumbs__request[1], &byte, 1);
  struct pollfd reply = {crumbs__reply[0], POLLIN, 0};
  long deadline = crumbs__now_ms() + crumbs__wait_ms;
  int served = 0;
  // The whole wait, served or not: the backtracer takes that long (and more) to symbolicate.
  for (long left = crumbs__wait_ms; left > 0; left = deadline - crumbs__now_ms()) {
    if (poll(&reply, served ? 0 : 1, (int)left) > 0) served = 1;
  }
  crumbs__say(served ? "after-crash served\n" : "after-crash not-served\n");
  if (crumbs__before.sa_flags & SA_SIGINFO) {
    crumbs__before.sa_sigaction(signal_number, info, context);
  } else if (crumbs__before.sa_handler != SIG_DFL && crumbs__before.sa_handler != SIG_IGN) {
    crumbs__before.sa_handler(signal_number);
  }
  errno = saved_errno;
}

int crumbs_test_start_late_worker(int wait_ms) {
  crumbs__wait_ms = wait_ms;
  if (pipe(crumbs__request) != 0 || pipe(crumbs__reply) != 0 || pipe(crumbs__ready) != 0) return -1;
  pthread_t thread;
  if (pthread_create(&thread, NULL, crumbs__late_worker, NULL) != 0) return -1;
  char byte;
  if (read(crumbs__ready[0], &byte, 1) != 1) return -1;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__after_crash;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  return sigaction(SIGSEGV, &action, &crumbs__before);
}
