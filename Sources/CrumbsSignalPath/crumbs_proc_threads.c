// crumbs_proc_threads.c — this process's threads as /proc shows them, read inside the crash
// handler for the thread capture (crumbs_thread_capture.c; the live capture reads the same): the
// task list, each thread's state, blocked and pending signals, its name, and whether anyone watches the process die (a core dump, a
// tracer). /proc/self/maps has its own file (crumbs_maps.c), whose line reader this one uses;
// a process's stat line, crumbs_process.c.
//
// Why C, and why by hand: these run in a signal handler, where opendir/readdir and fopen
// (malloc, locks) are not allowed: the task directory is read with getdents64 into a static
// buffer, the status files line by line through crumbs__crash_each_line.
//
// ASYNC-SIGNAL-SAFE: everything in this file but crumbs__proc_threads_resolve (install). No
// malloc, no locks, no stdio; static buffers, used only by the thread holding the capture
// (crumbs_thread_capture.c, "Who captures"). libc calls: open, read, close, syscall(SYS_getdents64), memcmp, memcpy, getrlimit,
// prctl(PR_GET_DUMPABLE). Each is bound at install (crumbs__proc_threads_resolve).

#define _GNU_SOURCE
#include "crumbs_crash_internal.h"
#include "crumbs_format.h"

#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// MARK: - The task list

/// Parses a decimal directory name; 0 when it is not one.
static uint32_t crumbs__parse_tid(const char *text) {
  uint32_t value = 0;
  if (*text == '\0') return 0;
  for (; *text != '\0'; text++) {
    if (*text < '0' || *text > '9' || value > 429496728u) return 0;
    value = value * 10 + (uint32_t)(*text - '0');
  }
  return value;
}

bool crumbs__proc_each_thread(bool (*thread)(uint32_t tid, void *context), void *context) {
  static char entries[4096];
  int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool more = true;
  while (more) {
    long bytes = syscall(SYS_getdents64, fd, entries, sizeof entries);
    if (bytes <= 0) break;
    for (long offset = 0; more && offset + 19 < bytes;) {
      // struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[].
      uint16_t record_length;
      memcpy(&record_length, entries + offset + 16, sizeof record_length);
      if (record_length == 0 || offset + record_length > bytes) break;
      uint32_t tid = crumbs__parse_tid(entries + offset + 19);
      offset += record_length;
      if (tid != 0) more = thread(tid, context);
    }
  }
  close(fd);
  return true;
}

void crumbs__proc_threads_resolve(void) {
  struct rlimit limit;
  (void)getrlimit(RLIMIT_CORE, &limit);
  (void)prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) close(fd);
  (void)syscall(SYS_getdents64, -1, NULL, 0);
}

// MARK: - One thread

/// What crumbs__proc_thread_status gathers, line by line.
typedef struct crumbs__status_lines {
  char state;
  uint64_t blocked;
  uint64_t pending;
  uint32_t found; // 1: State seen, 2: SigBlk seen (SigPnd comes before it)
} crumbs__status_lines;

/// The hex mask after a status line's "Name:\t" (`skip` bytes).
static uint64_t crumbs__status_mask(const char *line, size_t length, size_t skip) {
  uint64_t mask = 0;
  for (size_t digit = skip; digit < length; digit++) {
    char c = line[digit];
    uint64_t value = c >= '0' && c <= '9' ? (uint64_t)(c - '0') : c >= 'a' && c <= 'f' ? (uint64_t)(c - 'a' + 10) : 16;
    if (value == 16) break;
    mask = mask << 4 | value;
  }
  return mask;
}

/// One line of a status file: "State:\tS (sleeping)", "SigPnd:\t…" or "SigBlk:\t…". Stops the
/// read once State and SigBlk are seen (SigPnd, the thread's own pending signals, comes first).
static bool crumbs__status_line(const char *line, size_t length, void *context) {
  crumbs__status_lines *status = (crumbs__status_lines *)context;
  if (length > 7 && memcmp(line, "State:\t", 7) == 0) {
    status->state = line[7];
    status->found |= 1u;
  } else if (length > 8 && memcmp(line, "SigPnd:\t", 8) == 0) {
    status->pending = crumbs__status_mask(line, length, 8);
  } else if (length > 8 && memcmp(line, "SigBlk:\t", 8) == 0) {
    status->blocked = crumbs__status_mask(line, length, 8);
    status->found |= 2u;
  }
  return status->found != 3u;
}

/// A thread's scheduling state letter, blocked-signal mask and own pending signals (bit n - 1
/// for signal n), from /proc/self/task/<tid>/status, read line by line to its end if need be: the lines before
/// SigBlk have no bound (a process in many supplementary groups has a `Groups:` line of
/// kilobytes), and a mask not found would ask a thread with a signal it blocks, then wait the
/// whole deadline for it. False when it cannot be read (the thread exited) or holds neither line.
bool crumbs__proc_thread_status(uint32_t tid, char *state, uint64_t *blocked, uint64_t *pending) {
  static char path[48];
  size_t length = crumbs__format_copy(path, sizeof path, "/proc/self/task/");
  length = crumbs__format_append_decimal(path, sizeof path, length, tid);
  crumbs__format_append(path, sizeof path, length, "/status");
  crumbs__status_lines status = {'?', 0, 0, 0};
  if (!crumbs__crash_each_line(path, crumbs__status_line, &status) || status.found == 0) return false;
  *state = status.state;
  *blocked = status.blocked;
  if (pending != NULL) *pending = status.pending;
  return true;
}


/// Reads `/proc/self/task/<tid>/comm` into `name` (16 bytes, NUL-terminated, newline dropped).
void crumbs__proc_thread_name(uint32_t tid, char name[16]) {
  static char path[48];
  size_t length = crumbs__format_copy(path, sizeof path, "/proc/self/task/");
  length = crumbs__format_append_decimal(path, sizeof path, length, tid);
  crumbs__format_append(path, sizeof path, length, "/comm");
  name[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t count = read(fd, name, 15);
  close(fd);
  if (count <= 0) return;
  if (name[count - 1] == '\n') count--;
  name[count] = '\0';
}

// MARK: - Who watches the death

/// The first byte of /proc/sys/kernel/core_pattern ('|': cores go to a program), 0 when it
/// cannot be read.
static char crumbs__core_pattern_start(void) {
  static char first;
  first = 0;
  int fd = open("/proc/sys/kernel/core_pattern", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  if (read(fd, &first, 1) != 1) first = 0;
  close(fd);
  return first;
}

/// TracerPid of this thread's status line: non-zero when a debugger (or strace) is attached.
static bool crumbs__tracer_line(const char *line, size_t length, void *context) {
  if (length < 11 || memcmp(line, "TracerPid:\t", 11) != 0) return true;
  *(bool *)context = length > 11 && line[11] != '0';
  return false;
}

/// Whether someone will look at the process as the fatal signal leaves it: the kernel will
/// write a core dump (the process is dumpable, and RLIMIT_CORE is above 0 or core_pattern
/// pipes the core to a program, which the limit does not stop), or a tracer is attached. Safe
/// to call from a signal handler (prctl, getrlimit, open/read/close).
bool crumbs__proc_death_is_watched(void) {
  bool traced = false;
  if (!crumbs__crash_each_line("/proc/thread-self/status", crumbs__tracer_line, &traced)) {
    crumbs__crash_each_line("/proc/self/status", crumbs__tracer_line, &traced);
  }
  if (traced) return true;
  if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) <= 0) return false;
  struct rlimit limit;
  if (getrlimit(RLIMIT_CORE, &limit) == 0 && limit.rlim_cur > 0) return crumbs__core_pattern_start() != 0;
  // RLIMIT_CORE 0: only a pipe gets the core (the kernel refuses a limit of exactly 1).
  return crumbs__core_pattern_start() == '|';
}
