// crumbs_maps.c — reading this thread's /proc/thread-self/maps inside the crash handler: the stack's bounds when none
// were registered (crumbs_crash_handler.c), and the modules loaded since the last module scan
// that hold a frame (crumbs_modules.c); and the line reader under it, which the thread capture
// also uses for /proc status files (crumbs_proc_threads.c), whatever their lines' length. Also
// the protection at a fault's address once a first chance returned from it
// (crumbs__crash_mapping_protection).
//
// Why C, and why by hand: the handler runs in a signal handler, where fopen/getline (malloc,
// locks) are not allowed. The file is read with open/read into a static chunk buffer, each line
// gathered in a static line buffer: static, so the handler's (alternate) stack stays small; only
// the first crashing thread (the one that won the record) ever reads it, one caller at a time.
// crumbs__crash_mapping_protection runs before any record, on any thread, several at once: it
// parses as the file streams through 512 bytes of its own stack instead.
//
// ASYNC-SIGNAL-SAFE: everything in this file. libc calls: open, read, close. No malloc, no
// locks, no stdio.

#include "unwind/crumbs_unwind.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static char crumbs__maps_chunk[4096];
static char crumbs__maps_line[512];

bool crumbs__crash_each_maps_line(bool (*line)(const char *text, size_t length, void *context),
                                  void *context) {
  // This thread's view, not the process's: /proc/self names the main thread, whose maps read
  // empty once it has ended (the thread capture lets asked threads end: crumbs_thread_capture.c).
  // /proc/thread-self is Linux 3.17+; older kernels get /proc/self.
  if (crumbs__crash_each_line("/proc/thread-self/maps", line, context)) return true;
  return crumbs__crash_each_line("/proc/self/maps", line, context);
}

bool crumbs__crash_each_line(const char *path, bool (*line)(const char *text, size_t length, void *context),
                             void *context) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t line_length = 0;
  bool more = true;
  while (more) {
    ssize_t count = read(fd, crumbs__maps_chunk, sizeof crumbs__maps_chunk);
    if (count <= 0) break;
    for (ssize_t index = 0; index < count && more; index++) {
      char c = crumbs__maps_chunk[index];
      if (c != '\n') {
        // A line longer than the buffer is cut: its leading fields, which every caller needs,
        // always fit; only a very long path is lost (the caller sees it cut).
        if (line_length < sizeof crumbs__maps_line) crumbs__maps_line[line_length++] = c;
        continue;
      }
      more = line(crumbs__maps_line, line_length, context);
      line_length = 0;
    }
  }
  if (more && line_length > 0) line(crumbs__maps_line, line_length, context);
  close(fd);
  return true;
}

/// Parses hex digits at *cursor; advances past them.
static uint64_t crumbs__parse_hex(const char **cursor, const char *end) {
  uint64_t value = 0;
  const char *p = *cursor;
  for (; p < end; p++) {
    char c = *p;
    uint64_t digit;
    if (c >= '0' && c <= '9') digit = (uint64_t)(c - '0');
    else if (c >= 'a' && c <= 'f') digit = (uint64_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = (uint64_t)(c - 'A' + 10);
    else break;
    value = (value << 4) | digit;
  }
  *cursor = p;
  return value;
}

static const char *crumbs__skip_spaces(const char *cursor, const char *end) {
  while (cursor < end && *cursor == ' ') cursor++;
  return cursor;
}

bool crumbs__crash_parse_maps_line(const char *line, size_t length, crumbs__maps_entry *entry) {
  // "start-end perms offset major:minor inode   path"
  const char *end = line + length;
  const char *cursor = line;
  entry->start = crumbs__parse_hex(&cursor, end);
  if (cursor >= end || *cursor != '-') return false;
  cursor++;
  entry->end = crumbs__parse_hex(&cursor, end);
  cursor = crumbs__skip_spaces(cursor, end);
  if (end - cursor < 4) return false;
  for (int index = 0; index < 4; index++) entry->perms[index] = cursor[index];
  cursor = crumbs__skip_spaces(cursor + 4, end);
  entry->offset = crumbs__parse_hex(&cursor, end);
  cursor = crumbs__skip_spaces(cursor, end);
  uint64_t major = crumbs__parse_hex(&cursor, end);
  if (cursor < end && *cursor == ':') cursor++;
  entry->device = (major << 32) | crumbs__parse_hex(&cursor, end);
  cursor = crumbs__skip_spaces(cursor, end);
  entry->inode = 0;
  while (cursor < end && *cursor >= '0' && *cursor <= '9') {
    entry->inode = entry->inode * 10 + (uint64_t)(*cursor - '0');
    cursor++;
  }
  cursor = crumbs__skip_spaces(cursor, end);
  entry->path = cursor;
  entry->path_length = (size_t)(end - cursor);
  return entry->start < entry->end;
}

typedef struct crumbs__containing_query {
  uint64_t address;
  crumbs__maps_entry entry;
  bool found;
} crumbs__containing_query;

static bool crumbs__find_containing(const char *line, size_t length, void *context) {
  crumbs__containing_query *query = (crumbs__containing_query *)context;
  crumbs__maps_entry entry;
  if (!crumbs__crash_parse_maps_line(line, length, &entry)) return true;
  if (query->address < entry.start || query->address >= entry.end) return true;
  query->entry = entry;
  query->found = true;
  return false;
}

bool crumbs__crash_mapping_containing(uint64_t address, uint64_t *start, uint64_t *end) {
  crumbs__containing_query query = {.address = address, .found = false};
  if (!crumbs__crash_each_maps_line(crumbs__find_containing, &query) || !query.found) return false;
  if (query.entry.perms[0] != 'r') return false;
  *start = query.entry.start;
  *end = query.entry.end;
  return true;
}

int crumbs__crash_mapping_protection(uint64_t address) {
  int fd = open("/proc/thread-self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  // Parsed as it streams by, through a buffer on this stack: several threads may ask at once,
  // and while one of them records a crash with the static buffers above.
  char chunk[512];
  uint64_t start = 0, end = 0;
  int field = 0, perm_index = 0, protection = 0, found = -1;
  bool more = true;
  while (more) {
    ssize_t count = read(fd, chunk, sizeof chunk);
    if (count <= 0) break;
    for (ssize_t index = 0; index < count && more; index++) {
      char c = chunk[index];
      if (c == '\n') {
        if (field >= 2 && address >= start && address < end) found = protection;
        // Lines come in address order: past the address, nothing further holds it.
        if (found >= 0 || start > address) more = false;
        start = end = 0;
        field = perm_index = protection = 0;
        continue;
      }
      int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      switch (field) {
      case 0:
        if (c == '-') {
          field = 1;
        } else if (digit >= 0) {
          start = start << 4 | (uint64_t)digit;
        }
        break;
      case 1:
        if (c == ' ') {
          field = 2;
        } else if (digit >= 0) {
          end = end << 4 | (uint64_t)digit;
        }
        break;
      case 2:
        if (c == ' ') {
          field = 3;
          break;
        }
        if (perm_index == 0 && c == 'r') protection |= PROT_READ;
        if (perm_index == 1 && c == 'w') protection |= PROT_WRITE;
        if (perm_index == 2 && c == 'x') protection |= PROT_EXEC;
        perm_index++;
        break;
      default: break;
      }
    }
  }
  close(fd);
  return found;
}
