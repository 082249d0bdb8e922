// crumbs_termination_testing.c — the termination line's pure pieces, fed a buffer or a file by
// the tests and the fuzz targets (crumbs_crash_testing.h): the handler's redaction, its ELF
// symbol lookup, the Swift name it prints and which frames are Crumbs' own. Test-only. Not
// signal-safe; libc calls: open, fstat, close (the lookup in a file).
#define _GNU_SOURCE
#include "crash/crumbs_elf_symbol.h"
#include "crash/crumbs_redact.h"
#include "crumbs_crash_testing.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

size_t crumbs_termination_message_testing_redact(const char *text, size_t length, char *out,
                                                 size_t capacity) {
  bool cut;
  return crumbs__redact_pairs(text, length, out, capacity, &cut);
}

static int32_t crumbs__testing_lookup(const crumbs__elf_file *file, uint64_t address, char *name,
                                      size_t capacity, uint64_t *start) {
  crumbs__elf_query query = {.address = address, .symbol_value = 0, .name_offset = 0, .found = false};
  crumbs__elf_strings strings;
  if (capacity > 0) name[0] = '\0';
  if (!crumbs__elf_symbols_find(file, &query, 1, &strings)) return -1;
  if (!query.found) return 0;
  crumbs__elf_symbol_name(file, &strings, query.name_offset, name, capacity);
  if (start != NULL) *start = query.symbol_value;
  return 1;
}

int32_t crumbs_elf_symbol_testing_lookup(const uint8_t *bytes, size_t size, uint64_t address, char *name,
                                         size_t capacity, uint64_t *start) {
  // An empty input still needs a non-NULL pointer to mean "in memory".
  static const uint8_t nothing = 0;
  crumbs__elf_file file = {.fd = -1,
                           .bytes = bytes != NULL ? bytes : &nothing,
                           .size = bytes != NULL ? size : 0};
  return crumbs__testing_lookup(&file, address, name, capacity, start);
}

int32_t crumbs_elf_symbol_testing_lookup_file(const char *path, uint64_t address, char *name, size_t capacity,
                                              uint64_t *start) {
  if (capacity > 0) name[0] = '\0';
  crumbs__elf_file file = {.fd = open(path, O_RDONLY | O_CLOEXEC), .bytes = NULL, .size = 0};
  if (file.fd < 0) return -2;
  struct stat status;
  int32_t result = -1;
  if (fstat(file.fd, &status) == 0 && status.st_size > 0) {
    file.size = (uint64_t)status.st_size;
    result = crumbs__testing_lookup(&file, address, name, capacity, start);
  }
  close(file.fd);
  return result;
}

size_t crumbs_swift_name_testing_simplify(const char *mangled, char *buffer, size_t capacity) {
  return crumbs__swift_name_simplify(mangled, buffer, capacity);
}

bool crumbs_symbol_testing_is_crumbs(const char *name) { return crumbs__symbol_is_crumbs(name); }
