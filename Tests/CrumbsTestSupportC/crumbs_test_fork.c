// Test-only: a forked child that holds a copy of one descriptor until told to go. The child
// calls only close, read and _exit (async-signal-safe), as a child of a multithreaded process
// must.
#include "crumbs_test_support.h"

#include <unistd.h>

int crumbs_test_fork_blocked_child(int read_fd, int keep_fd) {
  pid_t child = fork();
  if (child == 0) {
    for (int fd = 3; fd < 65536; fd++) {
      if (fd != read_fd && fd != keep_fd) close(fd);
    }
    char byte;
    while (read(read_fd, &byte, 1) < 0) {
    }
    _exit(0);
  }
  return child;
}
