// crumbs_process.c — a process's state and start time from /proc (see crumbs_process.h).
//
// ASYNC-SIGNAL-SAFE: everything in this file. libc calls: open, read, close. The path is built
// with crumbs_format.c (plain loops); the line is parsed in place, on the caller's stack.

#include "crumbs_process.h"
#include "kit/crumbs_format.h"

#include <fcntl.h>
#include <unistd.h>

bool crumbs_process_stat(int32_t pid, uint64_t *start_ticks, char *state) {
  char path[48];
  if (pid == 0) {
    crumbs__format_copy(path, sizeof path, "/proc/self/stat");
  } else {
    size_t used = crumbs__format_copy(path, sizeof path, "/proc/");
    used = crumbs__format_append_decimal(path, sizeof path, used, pid);
    crumbs__format_append(path, sizeof path, used, "/stat");
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // "pid (comm) S ppid ...": one read gets the whole line (a few hundred bytes).
  char line[1024];
  ssize_t length = read(fd, line, sizeof line);
  close(fd);
  if (length <= 0) return false;
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  ssize_t close_paren = -1;
  for (ssize_t index = 0; index < length; index++) {
    if (line[index] == ')') close_paren = index;
  }
  if (close_paren < 0 || close_paren + 2 >= length) return false;
  *state = line[close_paren + 2];
  // Field 3 (the state) starts at close_paren + 2; field 22 is 19 spaces further.
  ssize_t cursor = close_paren + 2;
  for (int field = 3; field < 22 && cursor < length; cursor++) {
    if (line[cursor] == ' ') field++;
  }
  uint64_t ticks = 0;
  while (cursor < length && line[cursor] >= '0' && line[cursor] <= '9') {
    ticks = ticks * 10 + (uint64_t)(line[cursor] - '0');
    cursor++;
  }
  *start_ticks = ticks;
  return true;
}
