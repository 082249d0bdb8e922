// crumbs_modules.c — the module table a crash record needs for symbolication after the fact:
// gathered at install and on refresh, completed at crash time from /proc/self/maps for a library
// a frame lies in, with each row's .eh_frame_hdr for the unwinder and unloaded rows found out.
// Design (refresh, seqlock, CFI rows, unloaded libraries): docs/crash-capture.md#the-module-table
//
// Entry points, in call order:
//   crumbs__modules_scan / crumbs__modules_changes   (install, refresh) the table
//   crumbs__modules_check (_read_only for a live capture)  [crash] rows checked as looked up
//   crumbs__modules_for_text                               [crash] the row holding a pc
//   crumbs__modules_cfi_for / crumbs__modules_function_start [crash] the unwinder's CFI lookups
//   crumbs__modules_add_at_crash                          [crash] rows loaded since a scan
//
// ASYNC-SIGNAL-SAFE: for_text (loads; at crash time process_vm_readv through
// crumbs__crash_read_memory, memcmp, memcpy), check (memset), add_at_crash (open/read/close of
// /proc/self/maps, crumbs_maps.c; memset; loads from mappings the maps file says are readable),
// cfi_for and function_start (the table, and loads inside a module's .eh_frame_hdr segment
// through crumbs_cfi.c). NOT SIGNAL-SAFE: scan and changes (dl_iterate_phdr, readlink), at
// install and on refresh. All take the table as a view (crumbs__module_table, unwind/crumbs_unwind.h).

#define _GNU_SOURCE
#include "unwind/crumbs_unwind.h"
#include "kit/crumbs_format.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

crumbs__module_cfi crumbs__modules_cfi[CRUMBS_CRASH_MAX_MODULES];

/// Where the module's .eh_frame_hdr is loaded (PT_GNU_EH_FRAME) and the bounds of the PT_LOAD
/// segment holding it, the only bytes the CFI parser may read. Zeros when there is none.
/// Safe to call from a signal handler (loads from the program headers only).
static void crumbs__find_eh_frame_hdr(const ElfW(Phdr) * headers, size_t count, uint64_t bias,
                                      crumbs__module_cfi *cfi) {
  cfi->header = cfi->low = cfi->high = 0;
  uint64_t header = 0;
  for (size_t index = 0; index < count; index++) {
    if (headers[index].p_type == PT_GNU_EH_FRAME) header = bias + headers[index].p_vaddr;
  }
  if (header == 0) return;
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *segment = &headers[index];
    if (segment->p_type != PT_LOAD || !(segment->p_flags & PF_R)) continue;
    uint64_t low = bias + segment->p_vaddr;
    uint64_t high = low + segment->p_filesz; // file-backed bytes: .eh_frame is never in .bss
    if (header >= low && header < high) {
      cfi->low = low;
      cfi->high = high;
      cfi->header = header;
      return;
    }
  }
}

typedef struct crumbs__scan_state {
  const crumbs__module_table *modules;
  uint32_t count;
  uint64_t adds;
} crumbs__scan_state;

/// Finds NT_GNU_BUILD_ID in the PT_NOTE segments of a loaded object whose program headers are
/// `headers` and load bias `bias`. Notes outside [readable_low, readable_high) are not read.
/// Safe to call from a signal handler (loads, memcmp, memcpy).
static void crumbs__read_build_id(const ElfW(Phdr) * headers, size_t count, uint64_t bias,
                                  uint64_t readable_low, uint64_t readable_high,
                                  crumbs_crash_module *module) {
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *header = &headers[index];
    if (header->p_type != PT_NOTE) continue;
    uint64_t low = bias + header->p_vaddr;
    if (low < readable_low || low + header->p_memsz > readable_high) continue;
    const unsigned char *note = (const unsigned char *)(uintptr_t)low;
    const unsigned char *end = note + header->p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *note_header = (const ElfW(Nhdr) *)note;
      size_t name_size = (note_header->n_namesz + 3u) & ~3u;
      size_t descriptor_size = (note_header->n_descsz + 3u) & ~3u;
      const unsigned char *name = note + sizeof(ElfW(Nhdr));
      const unsigned char *descriptor = name + name_size;
      if (descriptor + note_header->n_descsz > end) break;
      if (note_header->n_type == NT_GNU_BUILD_ID && note_header->n_namesz == 4 &&
          memcmp(name, "GNU", 4) == 0) {
        uint32_t size = note_header->n_descsz;
        if (size > CRUMBS_CRASH_BUILD_ID_SIZE) size = CRUMBS_CRASH_BUILD_ID_SIZE;
        memcpy(module->build_id, descriptor, size);
        module->build_id_size = size;
        return;
      }
      note = descriptor + descriptor_size;
    }
  }
}

/// Load ranges of a module from its program headers: the whole mapping and the executable part.
/// Returns false when nothing is loaded. Safe to call from a signal handler (loads only).
static bool crumbs__fill_ranges(const ElfW(Phdr) * headers, size_t count, uint64_t bias,
                                crumbs_crash_module *module) {
  uint64_t low = UINT64_MAX, high = 0, text_low = UINT64_MAX, text_high = 0;
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *header = &headers[index];
    if (header->p_type != PT_LOAD) continue;
    uint64_t start = bias + header->p_vaddr;
    uint64_t end = start + header->p_memsz;
    if (start < low) low = start;
    if (end > high) high = end;
    if (header->p_flags & PF_X) {
      if (start < text_low) text_low = start;
      if (end > text_high) text_high = end;
    }
  }
  if (high == 0) return false;
  module->load_bias = bias;
  module->start = low;
  module->end = high;
  module->text_start = text_low == UINT64_MAX ? 0 : text_low;
  module->text_end = text_high;
  return true;
}

static char crumbs__executable_path[CRUMBS_CRASH_PATH_SIZE];

static int crumbs__scan_one(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  crumbs__scan_state *state = (crumbs__scan_state *)context;
  state->adds = info->dlpi_adds + info->dlpi_subs;
  if (state->count >= CRUMBS_CRASH_MAX_MODULES) return 0;
  crumbs_crash_module *module = &state->modules->rows[state->count];
  memset(module, 0, sizeof *module);
  // Nothing loaded: not worth a row.
  if (!crumbs__fill_ranges(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr, module)) return 0;
  const char *name = info->dlpi_name;
  // The main executable comes first with an empty name.
  if ((name == NULL || name[0] == '\0') && state->count == 0) name = crumbs__executable_path;
  crumbs__format_copy(module->path, sizeof module->path, name);
  crumbs__find_eh_frame_hdr(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr,
                            &crumbs__modules_cfi[state->count]);
  // A loaded object's notes are mapped, so readable: no bounds to keep to.
  crumbs__read_build_id(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr, 0, UINT64_MAX, module);
  state->count++;
  return 0;
}

uint32_t crumbs__modules_scan(const crumbs__module_table *modules, uint32_t *adds_seen) {
  if (crumbs__executable_path[0] == '\0') {
    ssize_t length = readlink("/proc/self/exe", crumbs__executable_path, sizeof crumbs__executable_path - 1);
    crumbs__executable_path[length > 0 ? length : 0] = '\0';
  }
  // Seqlock: odd while the table is rewritten, so a crash in the middle is flagged as torn. Odd
  // already: the crash handler is adding rows (the process is dying): leave the table to it.
  uint64_t generation = __atomic_load_n(modules->generation, __ATOMIC_RELAXED);
  if ((generation & 1u) || !__atomic_compare_exchange_n(modules->generation, &generation, generation | 1u,
                                                        false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return __atomic_load_n(modules->count, __ATOMIC_RELAXED);
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  crumbs__scan_state state = {modules, 0, 0};
  dl_iterate_phdr(crumbs__scan_one, &state);
  __atomic_store_n(modules->count, state.count, __ATOMIC_RELAXED);
  *modules->adds = (uint32_t)state.adds;
  __atomic_store_n(modules->generation, (generation | 1u) + 1u, __ATOMIC_RELEASE);
  if (adds_seen != NULL) *adds_seen = (uint32_t)state.adds;
  return state.count;
}

static int crumbs__count_changes(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  *(uint64_t *)context = info->dlpi_adds + info->dlpi_subs;
  return 1; // the counters are the same in every entry: one is enough
}

uint64_t crumbs__modules_changes(void) {
  uint64_t changes = 0;
  dl_iterate_phdr(crumbs__count_changes, &changes);
  return changes;
}

// MARK: - Rows checked at crash time (async-signal-safe)

/// Per row, during a crash: 0 not checked yet, 1 present, 2 unloaded.
static uint8_t crumbs__row_state[CRUMBS_CRASH_MAX_MODULES];
/// The rows being checked (crumbs__modules_check), NULL outside a crash
/// or a live capture.
static crumbs_crash_module *crumbs__checked_rows;
/// Whether a row found unloaded is flagged in the record (a crash) or only skipped (a live
/// capture, which never writes the record).
static bool crumbs__checked_flags_rows;

/// Whether the object mapped at `module->start` now carries another build ID than the row's (a
/// library loaded where a dlclose'd one was). Read through the kernel (crumbs__crash_read_memory),
/// so memory that changed under us cannot fault; false when it cannot tell.
static bool crumbs__build_id_changed(const crumbs_crash_module *module) {
  if (module->build_id_size == 0) return false;
  static ElfW(Ehdr) elf;
  static ElfW(Phdr) headers[32];
  static unsigned char notes[512];
  if (!crumbs__crash_read_memory(module->start, &elf, sizeof elf) ||
      memcmp(elf.e_ident, ELFMAG, SELFMAG) != 0 || elf.e_phentsize != sizeof(ElfW(Phdr))) {
    return false;
  }
  size_t count = elf.e_phnum < 32 ? elf.e_phnum : 32;
  if (!crumbs__crash_read_memory(module->start + elf.e_phoff, headers, count * sizeof headers[0]))
    return false;
  // Where the first PT_LOAD (file offset 0) puts the headers gives the object's load bias.
  uint64_t bias = 0;
  bool found = false;
  for (size_t index = 0; index < count && !found; index++) {
    if (headers[index].p_type == PT_LOAD && headers[index].p_offset == 0) {
      bias = module->start - headers[index].p_vaddr;
      found = true;
    }
  }
  if (!found) return false;
  for (size_t index = 0; index < count; index++) {
    if (headers[index].p_type != PT_NOTE) continue;
    size_t size = headers[index].p_memsz < sizeof notes ? headers[index].p_memsz : sizeof notes;
    if (!crumbs__crash_read_memory(bias + headers[index].p_vaddr, notes, size)) continue;
    crumbs_crash_module now;
    now.build_id_size = 0;
    crumbs__read_build_id(&headers[index], 1, (uint64_t)(uintptr_t)notes - headers[index].p_vaddr,
                          (uint64_t)(uintptr_t)notes, (uint64_t)(uintptr_t)notes + size, &now);
    if (now.build_id_size == 0) continue;
    return now.build_id_size != module->build_id_size ||
           memcmp(now.build_id, module->build_id, now.build_id_size) != 0;
  }
  return false;
}

/// Whether row `index` of the record being checked still names what is mapped at its text:
/// checked the first time a lookup lands in it (a byte of its text read through the kernel, then
/// its build ID), remembered, and flagged CRUMBS_CRASH_MODULE_UNLOADED in the record when not.
static bool crumbs__row_present(uint32_t index) {
  if (crumbs__row_state[index] != 0) return crumbs__row_state[index] == 1;
  crumbs_crash_module *module = &crumbs__checked_rows[index];
  uint8_t byte = 0;
  bool present =
      (module->flags & CRUMBS_CRASH_MODULE_FOUND_AT_CRASH) ||
      (crumbs__crash_read_memory(module->text_start, &byte, 1) && !crumbs__build_id_changed(module));
  crumbs__row_state[index] = present ? 1 : 2;
  if (!present && crumbs__checked_flags_rows) module->flags |= CRUMBS_CRASH_MODULE_UNLOADED;
  return present;
}

int crumbs__modules_for_text(const crumbs__module_table *modules, uint64_t address) {
  uint32_t count = __atomic_load_n(modules->count, __ATOMIC_RELAXED);
  if (count > CRUMBS_CRASH_MAX_MODULES) count = CRUMBS_CRASH_MAX_MODULES;
  for (uint32_t index = 0; index < count; index++) {
    const crumbs_crash_module *module = &modules->rows[index];
    if (module->flags & CRUMBS_CRASH_MODULE_UNLOADED) continue; // nothing of it may be read
    if (address < module->text_start || address >= module->text_end) continue;
    // At crash time a row is trusted only once checked (an unloaded library's row stays in the
    // table until the next refresh): skipped when it is gone, so nothing of it is read.
    if (modules->rows == crumbs__checked_rows && !crumbs__row_present(index)) continue;
    return (int)index;
  }
  return -1;
}

void crumbs__modules_check(const crumbs__module_table *modules) {
  memset(crumbs__row_state, 0, sizeof crumbs__row_state);
  crumbs__checked_flags_rows = true;
  crumbs__checked_rows = modules->rows;
}

void crumbs__modules_check_read_only(const crumbs__module_table *modules) {
  memset(crumbs__row_state, 0, sizeof crumbs__row_state);
  crumbs__checked_flags_rows = false;
  // Never written through: crumbs__row_present writes a row's flags only when they are kept.
  crumbs__checked_rows = modules->rows;
}

void crumbs__modules_check_stop(void) { crumbs__checked_rows = NULL; }

// MARK: - Modules found at crash time (async-signal-safe)

typedef struct crumbs__late_scan {
  const crumbs__module_table *modules;
  const uint64_t *addresses;
  uint32_t count;
  uint32_t added;
  // The object the current run of maps lines belongs to (the loader maps one file's segments
  // next to each other), and its first page, which holds the ELF and program headers.
  uint64_t device, inode;
  uint64_t header_low, header_high; // 0, 0 when its offset-0 mapping was not readable
} crumbs__late_scan;

/// Adds the row for the object whose headers are mapped at scan->header_low, found at `path`.
static void crumbs__add_found_module(crumbs__late_scan *scan, const char *path, size_t path_length) {
  const crumbs__module_table *modules = scan->modules;
  uint32_t index = __atomic_load_n(modules->count, __ATOMIC_RELAXED);
  if (index >= CRUMBS_CRASH_MAX_MODULES || scan->header_low == 0) return;
  uint64_t low = scan->header_low, high = scan->header_high;
  if (high - low < sizeof(ElfW(Ehdr))) return;
  const ElfW(Ehdr) *elf = (const ElfW(Ehdr) *)(uintptr_t)low;
  if (memcmp(elf->e_ident, ELFMAG, SELFMAG) != 0 || elf->e_phentsize != sizeof(ElfW(Phdr)) ||
      elf->e_phoff > high - low || (uint64_t)elf->e_phnum * sizeof(ElfW(Phdr)) > high - low - elf->e_phoff) {
    return;
  }
  const ElfW(Phdr) *headers = (const ElfW(Phdr) *)(uintptr_t)(low + elf->e_phoff);
  // The segment mapped from file offset 0 starts at the first page: it gives the load bias.
  uint64_t bias = 0;
  bool found = false;
  for (size_t header = 0; header < elf->e_phnum && !found; header++) {
    if (headers[header].p_type == PT_LOAD && headers[header].p_offset == 0) {
      bias = low - headers[header].p_vaddr;
      found = true;
    }
  }
  crumbs_crash_module *module = &modules->rows[index];
  memset(module, 0, sizeof *module);
  if (!found || !crumbs__fill_ranges(headers, elf->e_phnum, bias, module)) return;
  crumbs__read_build_id(headers, elf->e_phnum, bias, low, high, module);
  // The program headers are in the first page (checked above): PT_GNU_EH_FRAME is read from there.
  crumbs__find_eh_frame_hdr(headers, elf->e_phnum, bias, &crumbs__modules_cfi[index]);
  size_t kept = path_length < sizeof module->path - 1 ? path_length : sizeof module->path - 1;
  memcpy(module->path, path, kept);
  module->path[kept] = '\0';
  module->flags = CRUMBS_CRASH_MODULE_FOUND_AT_CRASH;
  __atomic_store_n(modules->count, index + 1, __ATOMIC_RELAXED);
  scan->added++;
}

static bool crumbs__late_scan_line(const char *line, size_t length, void *context) {
  crumbs__late_scan *scan = (crumbs__late_scan *)context;
  crumbs__maps_entry entry;
  if (!crumbs__crash_parse_maps_line(line, length, &entry)) return true;
  if (entry.inode == 0 || entry.path_length == 0 || entry.path[0] != '/') {
    scan->inode = 0; // anonymous memory, the heap, the stack: no module
    return true;
  }
  if (entry.inode != scan->inode || entry.device != scan->device) {
    scan->inode = entry.inode;
    scan->device = entry.device;
    scan->header_low = scan->header_high = 0;
  }
  if (entry.offset == 0 && entry.perms[0] == 'r' && scan->header_low == 0) {
    scan->header_low = entry.start;
    scan->header_high = entry.end;
  }
  if (entry.perms[2] != 'x') return true;
  for (uint32_t index = 0; index < scan->count; index++) {
    uint64_t address = scan->addresses[index];
    if (address < entry.start || address >= entry.end) continue;
    if (crumbs__modules_for_text(scan->modules, address) >= 0) continue; // added already
    crumbs__add_found_module(scan, entry.path, entry.path_length);
    break;
  }
  return true;
}

uint32_t crumbs__modules_add_at_crash(const crumbs__module_table *modules, const uint64_t *addresses,
                                      uint32_t count) {
  if (count == 0) return 0;
  uint64_t generation = __atomic_load_n(modules->generation, __ATOMIC_ACQUIRE);
  if ((generation & 1u) || !__atomic_compare_exchange_n(modules->generation, &generation, generation + 1,
                                                        false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return 0;
  }
  crumbs__late_scan scan = {.modules = modules, .addresses = addresses, .count = count};
  crumbs__crash_each_maps_line(crumbs__late_scan_line, &scan);
  __atomic_store_n(modules->generation, generation + 2, __ATOMIC_RELEASE);
  if (scan.added > 0) {
    __atomic_fetch_or(modules->flags, CRUMBS_CRASH_FLAG_MODULES_ADDED_AT_CRASH, __ATOMIC_RELAXED);
  }
  return scan.added;
}

// MARK: - CFI lookups (async-signal-safe: the table, and loads inside a .eh_frame_hdr segment)

bool crumbs__modules_cfi_for(const crumbs__module_table *modules, uint64_t address,
                             crumbs__cfi_region *region, uint64_t *header) {
  int module = crumbs__modules_for_text(modules, address);
  if (module < 0) return false;
  const crumbs__module_cfi *cfi = &crumbs__modules_cfi[module];
  if (cfi->header == 0 || cfi->low >= cfi->high) return false;
  region->low = cfi->low;
  region->high = cfi->high;
  region->bytes = (const uint8_t *)(uintptr_t)cfi->low;
  *header = cfi->header;
  return true;
}

uint64_t crumbs__modules_function_start(const crumbs__module_table *modules, uint64_t address) {
  crumbs__cfi_region region;
  uint64_t header = 0, fde = 0, start = 0, end = 0;
  if (!crumbs__modules_cfi_for(modules, address, &region, &header)) return 0;
  if (crumbs__cfi_find_fde(&region, header, address, &fde, &start, &end) != CRUMBS_CFI_OK) return 0;
  return start;
}
