// crumbs_elf_symbol.h — naming a code address from a module's ELF file at crash time: its
// symbol table read with pread, and the readable part of a Swift mangled name. Internal to
// CrumbsSignalPath (the termination message, crumbs_termination_message.c, is its one user;
// tests and the fuzzer reach it through crumbs_termination_message.h). The file is untrusted:
// every read is bounded and checked, the scan has a budget; garbage gives "not found".
// Design (why at crash time, from the file): docs/crash-capture.md#symbols-from-the-executable
//
// Entry points, in call order:
//   crumbs__elf_symbols_find   one pass over `.symtab` (else `.dynsym`) for several addresses,
//                              entries judged by crumbs_elf_symbol_rank (the reports' rule too,
//                              include/crumbs_termination_message.h)
//   crumbs__elf_symbol_name    a found symbol's name, bounded
//   crumbs__swift_name_simplify / crumbs__symbol_is_crumbs   what to show, what to skip
//
// SIGNAL SAFETY: every function is async-signal-safe and reentrant: pread (the file case),
// plain loads and stores into caller buffers; no static state, no allocation, no locks.

#ifndef CRUMBS_ELF_SYMBOL_H
#define CRUMBS_ELF_SYMBOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Where the ELF bytes come from: a file descriptor read with pread (the handler), or bytes in
/// memory (tests, the fuzzer). `size` bounds every read either way.
typedef struct crumbs__elf_file {
  int fd;               // read with pread when `bytes` is NULL
  const uint8_t *bytes; // tests and fuzzing: the whole file
  uint64_t size;        // the file's size (fstat), the bound of every read
} crumbs__elf_file;

/// One address to name: in, the address as the file sees it (runtime address minus the load
/// bias); out, the symbol holding it.
typedef struct crumbs__elf_query {
  uint64_t address;
  uint64_t symbol_value; // the symbol's start, same space as `address`
  uint32_t name_offset;  // into the string table
  bool found;
} crumbs__elf_query;

/// The string table of the symbol table searched (file offset and size).
typedef struct crumbs__elf_strings {
  uint64_t offset, size;
} crumbs__elf_strings;

/// Most symbol-table bytes one search reads: 32 MiB, about 1.4 million ELF64 symbols (a large
/// Swift server has a few hundred thousand); past it the rest is not looked at.
#define CRUMBS__ELF_SCAN_BUDGET (32u << 20)

/// Finds, in one pass over `.symtab` (or `.dynsym` without one), the function symbol whose
/// [value, value + size) holds each query's address. Returns false when the file has no usable
/// symbol table (not ELF of this machine's class and byte order, truncated, malformed); queries
/// left `found == false` are not covered by a sized function symbol within the scan budget.
/// Safe to call from a signal handler (pread; a 4 KiB stack buffer).
bool crumbs__elf_symbols_find(const crumbs__elf_file *file, crumbs__elf_query *queries, uint32_t count,
                              crumbs__elf_strings *strings);

/// Copies the NUL-terminated name at `name_offset` of `strings` into `buffer` (`capacity`
/// bytes, cut to fit, always NUL-terminated when capacity > 0). Returns its length, 0 when it
/// cannot be read. Safe to call from a signal handler (pread).
size_t crumbs__elf_symbol_name(const crumbs__elf_file *file, const crumbs__elf_strings *strings,
                               uint32_t name_offset, char *buffer, size_t capacity);

/// The identifiers of a Swift mangled name's entity, joined by dots:
/// "$s5MyApp6ParserC5parseyyF" → "MyApp.Parser.parse" (no demangler: the module, the nominal
/// types and the member name, up to where the signature starts). Returns the length written to
/// `buffer`, or 0 when `mangled` is not a Swift name this reads (word substitutions, punycode,
/// standard-library shortcuts): the caller shows the raw name. Safe to call from a signal
/// handler (pure).
size_t crumbs__swift_name_simplify(const char *mangled, char *buffer, size_t capacity);

/// Whether `name` is Crumbs' own code, linked statically into the app: a C symbol starting with
/// "crumbs_", or a Swift symbol of a module named `Crumbs` or `Crumbs` + a capitalised word
/// (CrumbsRecorder, CrumbsLogging, CrumbsTracing…) without `Test` in it (test modules play the
/// app). Safe to call from a signal handler (pure).
bool crumbs__symbol_is_crumbs(const char *name);

#endif // CRUMBS_ELF_SYMBOL_H
