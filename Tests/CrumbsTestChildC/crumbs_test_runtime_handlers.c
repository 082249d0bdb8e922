// crumbs_test_runtime_handlers.c — signal handlers that behave like the runtimes that own
// SIGSEGV (a JVM, a wasm engine, libsigsegv): they fix faults on memory of their own and return;
// for any other fault they give up in one of the ways such runtimes do. And a vfork() child
// that crashes.

#define _GNU_SOURCE
#include "crumbs_test_child.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char *crumbs_test_runtime_page;
static long crumbs_test_page_size;
static volatile int crumbs_test_recovered;
static int crumbs_test_give_up;
static struct sigaction crumbs_test_runtime_saved;

static void crumbs_test_runtime_handler(int signal_number, siginfo_t *info, void *context) {
  char *address = (char *)info->si_addr;
  if (address >= crumbs_test_runtime_page && address < crumbs_test_runtime_page + crumbs_test_page_size) {
    // Ours: fixed, and the faulting instruction runs again (the context is left as it was).
    mprotect(crumbs_test_runtime_page, (size_t)crumbs_test_page_size, PROT_READ | PROT_WRITE);
    crumbs_test_recovered++;
    return;
  }
  switch (crumbs_test_give_up) {
  case CRUMBS_TEST_GIVE_UP_RESTORE_AND_RETURN:
    // A JVM for a fault it does not own: its saved action back, then the fault comes back to it.
    sigaction(signal_number, &crumbs_test_runtime_saved, NULL);
    return;
  case CRUMBS_TEST_GIVE_UP_RESTORE_AND_RAISE:
    sigaction(signal_number, &crumbs_test_runtime_saved, NULL);
    raise(signal_number);
    return;
  case CRUMBS_TEST_GIVE_UP_CHAIN:
  default:
    // Installed after Crumbs: pass it on to the saved action (Crumbs' handler).
    if (crumbs_test_runtime_saved.sa_flags & SA_SIGINFO) {
      crumbs_test_runtime_saved.sa_sigaction(signal_number, info, context);
    } else if (crumbs_test_runtime_saved.sa_handler != SIG_DFL &&
               crumbs_test_runtime_saved.sa_handler != SIG_IGN) {
      crumbs_test_runtime_saved.sa_handler(signal_number);
    }
    return;
  }
}

int crumbs_test_install_runtime_handler(int signal_number, int give_up) {
  crumbs_test_page_size = sysconf(_SC_PAGESIZE);
  if (crumbs_test_runtime_page == NULL) {
    void *page =
        mmap(NULL, (size_t)crumbs_test_page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return -1;
    crumbs_test_runtime_page = page;
  }
  crumbs_test_give_up = give_up;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs_test_runtime_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  return sigaction(signal_number, &action, &crumbs_test_runtime_saved);
}

__attribute__((noinline)) void crumbs_test_runtime_fault(int value) {
  mprotect(crumbs_test_runtime_page, (size_t)crumbs_test_page_size, PROT_NONE);
  // The same instruction and address every time.
  *(volatile int *)crumbs_test_runtime_page = value;
}

int crumbs_test_runtime_recovered(void) { return crumbs_test_recovered; }

uintptr_t crumbs_test_runtime_handler_address(void) { return (uintptr_t)crumbs_test_runtime_handler; }

int crumbs_test_vfork_child_crashes(void) {
  pid_t child = vfork();
  if (child == 0) {
    *(volatile int *)(uintptr_t)16 = 1; // the child dies by SIGSEGV, sharing our memory
    _exit(0);
  }
  if (child < 0) return -1;
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status) - 1;
}
