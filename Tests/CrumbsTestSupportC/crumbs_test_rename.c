// Test-only: a hostile app's symbolic-link swap, renameat2(RENAME_EXCHANGE) in a loop, run while
// a processor works in the directory (RingDirectoryLinkSwapTests). Only the system call.
#define _GNU_SOURCE // syscall
#include "crumbs_test_support.h"

#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int64_t crumbs_test_exchange_loop(int directory, const char *first, const char *second, uint64_t count) {
  int64_t done = 0;
  for (uint64_t index = 0; index < count; index++) {
    if (syscall(SYS_renameat2, directory, first, directory, second, RENAME_EXCHANGE) == 0) {
      done++;
    } else if (index == 0) {
      return -1;
    }
  }
  return done;
}
