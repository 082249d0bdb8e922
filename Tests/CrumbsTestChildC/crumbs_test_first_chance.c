// crumbs_test_first_chance.c — signal handlers that were there before Crumbs and do not recover:
// one that writes a line and _exit(70)s, one that writes a line per call (its first 20) and returns (it
// counts its calls and gives up with _exit(99) after 10,000, so a fault loop ends the test
// instead of hanging it), and one that recovers by siglongjmp, as wasm engines do. Each writes with write(2) only: they run inside a signal handler.

#define _GNU_SOURCE
#include "crumbs_test_child.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile int crumbs_test_returning_calls;

/// "NAME N\n" on stdout with write(2).
static void crumbs_test_write_count(const char *name, int count) {
  char line[64];
  size_t length = strlen(name);
  if (length > 40) length = 40;
  memcpy(line, name, length);
  line[length++] = ' ';
  char digits[12];
  int used = 0;
  do {
    digits[used++] = (char)('0' + count % 10);
    count /= 10;
  } while (count > 0 && used < 11);
  while (used > 0) line[length++] = digits[--used];
  line[length++] = '\n';
  (void)!write(1, line, length);
}

static void crumbs_test_exiting_handler(int signal_number, siginfo_t *info, void *context) {
  (void)info;
  (void)context;
  crumbs_test_write_count("exiting-handler", signal_number);
  _exit(70);
}

static void crumbs_test_returning_handler(int signal_number) {
  int calls = ++crumbs_test_returning_calls;
  // The first 20 calls only: nobody reads the pipe after "crashing", and a loop would fill it.
  if (calls <= 20) crumbs_test_write_count("returning-handler", calls);
  if (calls >= 10000) {
    (void)!write(1, "looped\n", 7);
    _exit(99);
  }
  (void)signal_number;
}

static int crumbs_test_install(int signal_number, struct sigaction *action) {
  sigemptyset(&action->sa_mask);
  return sigaction(signal_number, action, NULL);
}

int crumbs_test_install_exiting_handler(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs_test_exiting_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  return crumbs_test_install(signal_number, &action);
}

int crumbs_test_install_returning_handler(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = crumbs_test_returning_handler;
  action.sa_flags = SA_ONSTACK | SA_NODEFER;
  return crumbs_test_install(signal_number, &action);
}

uintptr_t crumbs_test_exiting_handler_address(void) { return (uintptr_t)crumbs_test_exiting_handler; }
uintptr_t crumbs_test_returning_handler_address(void) { return (uintptr_t)crumbs_test_returning_handler; }

static sigjmp_buf crumbs_test_jump;

static void crumbs_test_jumping_handler(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  (void)info;
  (void)context;
  siglongjmp(crumbs_test_jump, 1);
}

int crumbs_test_install_jumping_handler(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs_test_jumping_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  return crumbs_test_install(signal_number, &action);
}

uintptr_t crumbs_test_jumping_handler_address(void) { return (uintptr_t)crumbs_test_jumping_handler; }

int crumbs_test_null_store_jumped(void) {
  if (sigsetjmp(crumbs_test_jump, 1)) return 1;
  *(volatile int *)(uintptr_t)16 = 1;
  return 0;
}
