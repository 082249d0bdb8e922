// crumbs_elf_symbol.c — a module's symbol table read at crash time, and Swift names made
// readable (see crumbs_elf_symbol.h for the contract).
//
// Design: the ELF header, then the section headers (in 4 KiB chunks) to find `.symtab` (else
// `.dynsym`) and its linked string table; then one pass over the symbols in 4 KiB chunks, each
// symbol compared with every query (a handful of frames), so a table is read once whatever the
// number of frames. Which entries can name code, and how they rank, is one rule for the handler
// and the reports (crumbs_elf_symbol_rank; the reports' SortedSymbols and SymbolScan call it
// through CrumbsRecorder's ELFSymbolRule). What differs is the choice, and why: the handler
// takes the first sized function holding the address and stops when every frame is named (a
// bounded number of preads in a signal handler: no sort, no section read per symbol, so neither
// unsized symbols, which end where their section does, nor code that is not typed a function);
// the reports take what their sorted table names (the innermost, best-ranked symbol, unsized
// ones too), which SymbolScan finds without sorting. Every offset and size from the file is
// checked (crumbs__elf_span) before a read; reads go through crumbs__elf_read, which refuses
// anything past the file's size.
//
// ASYNC-SIGNAL-SAFE: everything in this file. libc calls: pread. No static state (reentrant:
// tests call it from several threads), no allocation, no locks.

#define _GNU_SOURCE
#include "crash/crumbs_elf_symbol.h"
#include "crumbs_termination_message.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <unistd.h>

#ifndef STT_GNU_IFUNC
#define STT_GNU_IFUNC 10
#endif

/// Whether [offset, offset + size) lies inside the file (overflow-checked). Pure.
static bool crumbs__elf_span(const crumbs__elf_file *file, uint64_t offset, uint64_t size) {
  return offset <= file->size && size <= file->size - offset;
}

/// Reads exactly `size` bytes at `offset`, or returns false. Safe to call from a signal handler
/// (pread, retried on EINTR; a short read is a failure).
static bool crumbs__elf_read(const crumbs__elf_file *file, uint64_t offset, void *out, size_t size) {
  if (!crumbs__elf_span(file, offset, size)) return false;
  uint8_t *bytes = (uint8_t *)out;
  if (file->bytes != NULL) {
    for (size_t index = 0; index < size; index++) bytes[index] = file->bytes[offset + index];
    return true;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t count = pread(file->fd, bytes + done, size - done, (off_t)(offset + done));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return false;
    done += (size_t)count;
  }
  return true;
}

/// A section header's table entry, checked: inside the file. Pure but for the read.
static bool crumbs__elf_section(const crumbs__elf_file *file, const ElfW(Ehdr) * header, uint32_t index,
                                ElfW(Shdr) * section) {
  if (index >= header->e_shnum) return false;
  uint64_t offset = (uint64_t)header->e_shoff + (uint64_t)index * sizeof(ElfW(Shdr));
  return crumbs__elf_read(file, offset, section, sizeof *section);
}

/// The ELF header, checked: this machine's class and byte order, section headers of the expected
/// entry size and inside the file.
static bool crumbs__elf_header(const crumbs__elf_file *file, ElfW(Ehdr) * header) {
  if (!crumbs__elf_read(file, 0, header, sizeof *header)) return false;
  const unsigned char *ident = header->e_ident;
  if (ident[EI_MAG0] != ELFMAG0 || ident[EI_MAG1] != ELFMAG1 || ident[EI_MAG2] != ELFMAG2 ||
      ident[EI_MAG3] != ELFMAG3) {
    return false;
  }
#if __SIZEOF_POINTER__ == 8
  if (ident[EI_CLASS] != ELFCLASS64) return false;
#else
  if (ident[EI_CLASS] != ELFCLASS32) return false;
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (ident[EI_DATA] != ELFDATA2LSB) return false;
#else
  if (ident[EI_DATA] != ELFDATA2MSB) return false;
#endif
  if (header->e_shentsize != sizeof(ElfW(Shdr)) || header->e_shnum == 0) return false;
  return crumbs__elf_span(file, header->e_shoff, (uint64_t)header->e_shnum * sizeof(ElfW(Shdr)));
}

/// Finds the symbol table to search (`.symtab`, else `.dynsym`) and its string table, both
/// checked inside the file with entries of the expected size.
static bool crumbs__elf_tables(const crumbs__elf_file *file, const ElfW(Ehdr) * header, ElfW(Shdr) * symbols,
                               crumbs__elf_strings *strings) {
  ElfW(Shdr) section, dynamic;
  bool have_static = false, have_dynamic = false;
  for (uint32_t index = 0; index < header->e_shnum && !have_static; index++) {
    if (!crumbs__elf_section(file, header, index, &section)) return false;
    if (section.sh_type == SHT_SYMTAB) {
      *symbols = section;
      have_static = true;
    } else if (section.sh_type == SHT_DYNSYM && !have_dynamic) {
      dynamic = section;
      have_dynamic = true;
    }
  }
  if (!have_static) {
    if (!have_dynamic) return false;
    *symbols = dynamic;
  }
  if (symbols->sh_entsize != sizeof(ElfW(Sym)) ||
      !crumbs__elf_span(file, symbols->sh_offset, symbols->sh_size)) {
    return false;
  }
  ElfW(Shdr) linked;
  if (!crumbs__elf_section(file, header, symbols->sh_link, &linked) || linked.sh_type != SHT_STRTAB ||
      !crumbs__elf_span(file, linked.sh_offset, linked.sh_size)) {
    return false;
  }
  strings->offset = linked.sh_offset;
  strings->size = linked.sh_size;
  return true;
}

bool crumbs__elf_symbols_find(const crumbs__elf_file *file, crumbs__elf_query *queries, uint32_t count,
                              crumbs__elf_strings *strings) {
  for (uint32_t index = 0; index < count; index++) queries[index].found = false;
  ElfW(Ehdr) header;
  ElfW(Shdr) symbols;
  if (file == NULL || !crumbs__elf_header(file, &header) ||
      !crumbs__elf_tables(file, &header, &symbols, strings)) {
    return false;
  }
  union {
    ElfW(Sym) symbols[4096 / sizeof(ElfW(Sym))];
    uint8_t bytes[4096];
  } chunk;
  uint64_t total = symbols.sh_size / sizeof(ElfW(Sym));
  uint64_t budget = CRUMBS__ELF_SCAN_BUDGET / sizeof(ElfW(Sym));
  if (total > budget) total = budget;
  uint32_t left = count;
  for (uint64_t first = 0; first < total && left > 0;) {
    uint64_t batch = total - first;
    if (batch > sizeof chunk.symbols / sizeof chunk.symbols[0])
      batch = sizeof chunk.symbols / sizeof chunk.symbols[0];
    if (!crumbs__elf_read(file, symbols.sh_offset + first * sizeof(ElfW(Sym)), chunk.symbols,
                          (size_t)batch * sizeof(ElfW(Sym)))) {
      break;
    }
    for (uint64_t at = 0; at < batch; at++) {
      const ElfW(Sym) *symbol = &chunk.symbols[at];
      // Sized functions only (see the file's comment): no section is read to place the others.
      uint8_t rank = crumbs_elf_symbol_rank(symbol->st_info, symbol->st_shndx, symbol->st_size,
                                            symbol->st_name, strings->size, false);
      if ((rank & CRUMBS_ELF_RANK_FUNCTION) == 0 || symbol->st_size == 0) continue;
      uint64_t start = symbol->st_value, size = symbol->st_size;
      for (uint32_t index = 0; index < count; index++) {
        crumbs__elf_query *query = &queries[index];
        if (query->found || query->address < start || query->address - start >= size) continue;
        query->found = true;
        query->symbol_value = start;
        query->name_offset = symbol->st_name;
        left--;
      }
    }
    first += batch;
  }
  return true;
}

uint8_t crumbs_elf_symbol_rank(uint8_t info, uint16_t section, uint64_t size, uint64_t name_offset,
                               uint64_t names_size, bool code_section) {
  // Undefined, absolute or special (SHN_LORESERVE and up), or nameless.
  if (section == SHN_UNDEF || section >= SHN_LORESERVE || name_offset == 0 || name_offset >= names_size)
    return 0;
  unsigned type = ELF64_ST_TYPE(info), binding = ELF64_ST_BIND(info);
  bool function = type == STT_FUNC || type == STT_GNU_IFUNC;
  // Other symbols only when sized and in a section that holds code.
  if (!function && (type > STT_OBJECT || size == 0 || !code_section)) return 0;
  // Functions first, then global over weak over local, then the sized one.
  uint8_t rank = function ? CRUMBS_ELF_RANK_FUNCTION : 0;
  if (binding == STB_GLOBAL) rank += 4;
  if (binding == STB_WEAK) rank += 2;
  if (size > 0) rank += 1;
  return rank;
}

size_t crumbs__elf_symbol_name(const crumbs__elf_file *file, const crumbs__elf_strings *strings,
                               uint32_t name_offset, char *buffer, size_t capacity) {
  if (capacity == 0) return 0;
  buffer[0] = '\0';
  if (file == NULL || strings == NULL || name_offset >= strings->size) return 0;
  uint64_t available = strings->size - name_offset;
  size_t want = capacity - 1;
  if (want > available) want = (size_t)available;
  // strings->offset + strings->size was checked inside the file: no overflow here.
  if (want == 0 || !crumbs__elf_read(file, strings->offset + name_offset, buffer, want)) {
    buffer[0] = '\0';
    return 0;
  }
  size_t length = 0;
  while (length < want && buffer[length] != '\0') length++;
  buffer[length] = '\0';
  return length;
}

// MARK: - Swift names

/// Reads a decimal length at *cursor (no leading zero: a "0" marks word substitutions, read by
/// crumbs__swift_identifier). 0 when there is none or it is absurd.
static size_t crumbs__swift_length(const char **cursor) {
  const char *p = *cursor;
  if (*p < '1' || *p > '9') return 0;
  size_t value = 0;
  while (*p >= '0' && *p <= '9') {
    value = value * 10 + (size_t)(*p - '0');
    if (value > 4096) return 0;
    p++;
  }
  *cursor = p;
  return value;
}

/// Where a Swift mangled name's entity starts (after "$s", "_$s", "$S", "_$S", "$e"), or NULL.
static const char *crumbs__swift_entity(const char *mangled) {
  if (mangled == NULL) return NULL;
  if (mangled[0] == '_') mangled++;
  if (mangled[0] != '$' || (mangled[1] != 's' && mangled[1] != 'S' && mangled[1] != 'e')) return NULL;
  return mangled + 2;
}

/// The words of the identifiers read so far, which a later identifier may repeat by index (the
/// mangler's word substitutions: "11CrashParserO05parseC0" is CrashParser.parseCrash, "C" being
/// word 2, "Crash"). At most 26, as the mangler keeps.
typedef struct crumbs__swift_words {
  const char *start[26];
  size_t length[26];
  uint32_t count;
} crumbs__swift_words;

/// Adds the words of a literal part, split as the mangler splits them: a word starts at any
/// character that is not a digit or '_', ends before '_' or before an upper-case letter that
/// follows a non-upper-case one, and counts from 2 characters. Pure.
static void crumbs__swift_add_words(crumbs__swift_words *words, const char *text, size_t length) {
  size_t word_start = 0;
  bool in_word = false;
  for (size_t index = 0; index <= length; index++) {
    char c = index < length ? text[index] : '\0';
    if (in_word) {
      char previous = text[index - 1];
      bool upper = c >= 'A' && c <= 'Z', previous_upper = previous >= 'A' && previous <= 'Z';
      if (c == '_' || c == '\0' || (upper && !previous_upper)) {
        if (index - word_start >= 2 && words->count < 26) {
          words->start[words->count] = text + word_start;
          words->length[words->count] = index - word_start;
          words->count++;
        }
        in_word = false;
      }
    }
    if (!in_word && c != '\0' && c != '_' && !(c >= '0' && c <= '9')) {
      word_start = index;
      in_word = true;
    }
  }
}

/// Appends `length` bytes of `text` at *used when they are identifier characters and fit
/// (leaving room for the NUL). Pure.
static bool crumbs__swift_put(char *buffer, size_t capacity, size_t *used, const char *text, size_t length) {
  if (length >= capacity - *used) return false;
  for (size_t index = 0; index < length; index++) {
    char c = text[index];
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!plain) return false; // also the NUL of a name cut short
    buffer[(*used)++] = c;
  }
  return true;
}

/// Reads one identifier at *cursor into the buffer: a literal ("5parse"), or after a "0" word
/// substitutions (lower-case letters: a word, more follow; upper-case: the last word) mixed with
/// literals, ended by the last word or by "0". False for anything else (punycode "00",
/// operators). Pure.
static bool crumbs__swift_identifier(const char **cursor, crumbs__swift_words *words, char *buffer,
                                     size_t capacity, size_t *used) {
  const char *p = *cursor;
  if (*p < '0' || *p > '9') return false;
  bool substitutions = false;
  if (*p == '0') {
    if (p[1] == '0') return false;
    substitutions = true;
    p++;
  }
  for (uint32_t part = 0; part < 64; part++) {
    while (substitutions && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
      bool last = *p >= 'A' && *p <= 'Z';
      uint32_t index = (uint32_t)(last ? *p - 'A' : *p - 'a');
      if (index >= words->count ||
          !crumbs__swift_put(buffer, capacity, used, words->start[index], words->length[index])) {
        return false;
      }
      p++;
      if (last) substitutions = false;
    }
    if (*p == '0') { // ends a substituted identifier after a literal
      p++;
      break;
    }
    size_t length = crumbs__swift_length(&p);
    if (length == 0) {
      if (part > 0 && !substitutions) break; // the last word ended it
      return false;
    }
    if (!crumbs__swift_put(buffer, capacity, used, p, length)) return false;
    crumbs__swift_add_words(words, p, length);
    p += length;
    if (!substitutions) break;
  }
  *cursor = p;
  return true;
}

size_t crumbs__swift_name_simplify(const char *mangled, char *buffer, size_t capacity) {
  const char *cursor = crumbs__swift_entity(mangled);
  if (cursor == NULL || capacity < 2) return 0;
  crumbs__swift_words words = {.count = 0};
  size_t used = 0;
  uint32_t identifiers = 0;
  // The module, then each context's name followed by its kind (C class, V struct, O enum,
  // P protocol), then the member's name; what follows the last name (a signature, an argument
  // label, an accessor) ends the entity. The module's name is followed directly by the next.
  for (uint32_t step = 0; step < 64; step++) {
    if (identifiers > 0) {
      if (used + 1 >= capacity) return 0;
      buffer[used++] = '.';
    }
    if (!crumbs__swift_identifier(&cursor, &words, buffer, capacity, &used)) return 0;
    identifiers++;
    if (identifiers == 1) continue; // the module: the next name follows at once
    char kind = *cursor;
    if ((kind == 'C' || kind == 'V' || kind == 'O' || kind == 'P') && cursor[1] >= '0' && cursor[1] <= '9') {
      cursor++;
      continue;
    }
    break;
  }
  if (identifiers < 2) return 0;
  buffer[used] = '\0';
  return used;
}

bool crumbs__symbol_is_crumbs(const char *name) {
  if (name == NULL) return false;
  const char *prefix = "crumbs_";
  size_t index = 0;
  while (prefix[index] != '\0' && name[index] == prefix[index]) index++;
  if (prefix[index] == '\0') return true;
  const char *cursor = crumbs__swift_entity(name);
  if (cursor == NULL) return false;
  // The module's name, the entity's first identifier (never a word substitution: no word
  // precedes it). Crumbs' modules are `Crumbs` and `Crumbs` + a capitalised word (Recorder,
  // Logging, ServiceLifecycle…): the rule, not a list, so a new module is recognised the day it
  // is added. A name with `Test` in it is a test module (CrumbsTestChild), which plays the app.
  size_t length = crumbs__swift_length(&cursor);
  const char *module = "Crumbs";
  size_t at = 0;
  while (module[at] != '\0' && at < length && cursor[at] == module[at]) at++;
  if (module[at] != '\0') return false;
  if (at < length && !(cursor[at] >= 'A' && cursor[at] <= 'Z')) return false;
  for (; at + 4 <= length; at++) {
    const char *word = cursor + at;
    if (word[0] == 'T' && word[1] == 'e' && word[2] == 's' && word[3] == 't') return false;
  }
  return true;
}
