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
// Also what a live capture needs to walk a thread blocked in a system call without signalling it:
// its /proc/self/task/<tid>/syscall line (the call, its arguments, the user sp and pc the kernel
// saved) and its context-switch counts (a thread that ran in between has switched since).
//
// ASYNC-SIGNAL-SAFE: everything in this file but crumbs__proc_threads_resolve (install). No
// malloc, no locks, no stdio; static buffers, used only by the thread holding the capture
// (docs/crash-capture.md#who-captures). libc calls: open, read, close, syscall(SYS_getdents64),
// memcmp, memcpy, getrlimit, prctl(PR_GET_DUMPABLE). Each is bound at install
// (crumbs__proc_threads_resolve).

#define _GNU_SOURCE
#include "threads/crumbs_threads.h"
#include "unwind/crumbs_unwind.h"
#include "kit/crumbs_format.h"

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

/// What crumbs__proc_thread_read gathers, line by line, and which lines it still wants.
typedef struct crumbs__status_lines {
  crumbs__thread_facts *facts;
  uint32_t wanted; // CRUMBS__FACT_* bits still to find
} crumbs__status_lines;

enum {
  CRUMBS__FACT_STATE = 1u << 0,
  CRUMBS__FACT_BLOCKED = 1u << 1,
  CRUMBS__FACT_SECCOMP = 1u << 2,
  CRUMBS__FACT_VOLUNTARY = 1u << 3,
  CRUMBS__FACT_INVOLUNTARY = 1u << 4,
};

/// The hex mask after a status line's "Name:\t" (`skip` bytes).
static uint64_t crumbs__status_mask(const char *line, size_t length, size_t skip) {
  uint64_t mask = 0;
  for (size_t digit = skip; digit < length; digit++) {
    char c = line[digit];
    uint64_t value = c >= '0' && c <= '9'   ? (uint64_t)(c - '0')
                     : c >= 'a' && c <= 'f' ? (uint64_t)(c - 'a' + 10)
                                            : 16;
    if (value == 16) break;
    mask = mask << 4 | value;
  }
  return mask;
}

/// The decimal number after a status line's "Name:\t" (`skip` bytes).
static uint64_t crumbs__status_decimal(const char *line, size_t length, size_t skip) {
  uint64_t value = 0;
  for (size_t digit = skip; digit < length && line[digit] >= '0' && line[digit] <= '9'; digit++) {
    value = value * 10 + (uint64_t)(line[digit] - '0');
  }
  return value;
}

/// Whether `line` starts with `key` (a literal): its length, else 0.
static size_t crumbs__status_key(const char *line, size_t length, const char *key, size_t key_length) {
  return length > key_length && memcmp(line, key, key_length) == 0 ? key_length : 0;
}
#define CRUMBS__KEY(line, length, literal) crumbs__status_key(line, length, literal, sizeof literal - 1)

/// One line of a status file: State, SigPnd, SigBlk, Seccomp and the two context-switch counts.
/// Stops the read once every wanted line is seen (SigPnd, the thread's own pending signals,
/// comes before SigBlk).
static bool crumbs__status_line(const char *line, size_t length, void *context) {
  crumbs__status_lines *status = (crumbs__status_lines *)context;
  crumbs__thread_facts *facts = status->facts;
  size_t skip;
  if ((skip = CRUMBS__KEY(line, length, "State:\t")) != 0) {
    facts->state = line[skip];
    facts->found |= CRUMBS__FACT_STATE;
  } else if ((skip = CRUMBS__KEY(line, length, "SigPnd:\t")) != 0) {
    facts->pending = crumbs__status_mask(line, length, skip);
  } else if ((skip = CRUMBS__KEY(line, length, "SigBlk:\t")) != 0) {
    facts->blocked = crumbs__status_mask(line, length, skip);
    facts->found |= CRUMBS__FACT_BLOCKED;
  } else if ((skip = CRUMBS__KEY(line, length, "Seccomp:\t")) != 0) {
    facts->seccomp = (uint32_t)crumbs__status_decimal(line, length, skip);
    facts->found |= CRUMBS__FACT_SECCOMP;
  } else if ((skip = CRUMBS__KEY(line, length, "voluntary_ctxt_switches:\t")) != 0) {
    facts->switches += crumbs__status_decimal(line, length, skip);
    facts->found |= CRUMBS__FACT_VOLUNTARY;
  } else if ((skip = CRUMBS__KEY(line, length, "nonvoluntary_ctxt_switches:\t")) != 0) {
    facts->switches += crumbs__status_decimal(line, length, skip);
    facts->found |= CRUMBS__FACT_INVOLUNTARY;
  }
  return (facts->found & status->wanted) != status->wanted;
}

bool crumbs__proc_thread_read(uint32_t tid, bool switches, crumbs__thread_facts *facts) {
  static char path[48];
  size_t length = crumbs__format_copy(path, sizeof path, "/proc/self/task/");
  length = crumbs__format_append_decimal(path, sizeof path, length, tid);
  crumbs__format_append(path, sizeof path, length, "/status");
  memset(facts, 0, sizeof *facts);
  facts->state = '?';
  // Seccomp comes after SigBlk; the switch counts end the file. A kernel without seccomp has no
  // Seccomp line: the read then goes on to the end, and `seccomp` stays 0.
  uint32_t wanted = CRUMBS__FACT_STATE | CRUMBS__FACT_BLOCKED | CRUMBS__FACT_SECCOMP;
  if (switches) wanted |= CRUMBS__FACT_VOLUNTARY | CRUMBS__FACT_INVOLUNTARY;
  crumbs__status_lines status = {facts, wanted};
  if (!crumbs__crash_each_line(path, crumbs__status_line, &status)) return false;
  return (facts->found & (CRUMBS__FACT_STATE | CRUMBS__FACT_BLOCKED)) != 0;
}

/// A thread's scheduling state letter, blocked-signal mask and own pending signals (bit n - 1
/// for signal n), from /proc/self/task/<tid>/status, read line by line to its end if need be: the lines before
/// SigBlk have no bound (a process in many supplementary groups has a `Groups:` line of
/// kilobytes), and a mask not found would ask a thread with a signal it blocks, then wait the
/// whole deadline for it. False when it cannot be read (the thread exited) or holds neither line.
bool crumbs__proc_thread_status(uint32_t tid, char *state, uint64_t *blocked, uint64_t *pending) {
  crumbs__thread_facts facts;
  if (!crumbs__proc_thread_read(tid, false, &facts)) return false;
  *state = facts.state;
  *blocked = facts.blocked;
  if (pending != NULL) *pending = facts.pending;
  return true;
}

/// Parses one hex number ("0x…", or bare) of a syscall line at `*at`, moving past it and one
/// space. False when there is none.
static bool crumbs__syscall_hex(const char *text, size_t length, size_t *at, uint64_t *value) {
  size_t index = *at;
  if (index + 2 <= length && text[index] == '0' && text[index + 1] == 'x') index += 2;
  size_t first = index;
  uint64_t result = 0;
  for (; index < length && index - first < 16; index++) {
    char c = text[index];
    uint64_t digit = c >= '0' && c <= '9'   ? (uint64_t)(c - '0')
                     : c >= 'a' && c <= 'f' ? (uint64_t)(c - 'a' + 10)
                                            : 16;
    if (digit == 16) break;
    result = result << 4 | digit;
  }
  if (index == first) return false;
  if (index < length && text[index] == ' ') index++;
  *at = index;
  *value = result;
  return true;
}

size_t crumbs__proc_thread_syscall_text(uint32_t tid, char *text, size_t size) {
  static char path[48];
  size_t length = crumbs__format_copy(path, sizeof path, "/proc/self/task/");
  length = crumbs__format_append_decimal(path, sizeof path, length, tid);
  crumbs__format_append(path, sizeof path, length, "/syscall");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t count = read(fd, text, size);
  close(fd);
  return count > 0 ? (size_t)count : 0;
}

bool crumbs__proc_syscall_parse(const char *text, size_t end, crumbs__blocked_syscall *out) {
  memset(out, 0, sizeof *out);
  // "running", or "-1 SP PC" (blocked, but not in a system call), or "NR A1 … A6 SP PC".
  if (end == 0 || text[0] < '0' || text[0] > '9') return false;
  size_t at = 0;
  int64_t number = 0;
  for (; at < end && text[at] >= '0' && text[at] <= '9' && number < 100000; at++)
    number = number * 10 + (text[at] - '0');
  if (at >= end || text[at] != ' ') return false;
  at++;
  for (unsigned index = 0; index < 6; index++) {
    if (!crumbs__syscall_hex(text, end, &at, &out->arguments[index])) return false;
  }
  if (!crumbs__syscall_hex(text, end, &at, &out->sp) || !crumbs__syscall_hex(text, end, &at, &out->pc))
    return false;
  out->number = (int32_t)number;
  return out->sp != 0 && out->pc != 0;
}

bool crumbs__proc_thread_syscall(uint32_t tid, crumbs__blocked_syscall *out) {
  static char text[256];
  size_t count = crumbs__proc_thread_syscall_text(tid, text, sizeof text - 1);
  return crumbs__proc_syscall_parse(text, count, out);
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
