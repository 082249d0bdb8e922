// crumbs_modules.c — the module map a crash record needs for symbolication after the fact.
//
// Why C: the table lives inside the crash record mapping (crumbs_crash_record.h), whose layout
// is C; the handler (C) reads it to flag frames outside every module.
//
// Design: dl_iterate_phdr is not async-signal-safe (it takes the loader lock, which the crashing
// thread may hold), so the table is gathered at install and refreshed outside the handler
// (crumbs_crash_refresh_modules, which Swift's `CrashHandler.refreshModules()` calls; it costs
// one dl_iterate_phdr step when nothing was loaded or unloaded, thanks to dlpi_adds/dlpi_subs).
// The handler only reads the table, and sets CRUMBS_CRASH_FLAG_MODULES_STALE when a frame lies
// outside it, so a reader knows a dlopen happened after the last refresh.
//
// SIGNAL SAFETY: crumbs__crash_module_for_text is async-signal-safe (loads only, no libc).
// crumbs__crash_scan_modules and crumbs__crash_module_changes are NOT (dl_iterate_phdr,
// readlink); they run at install and on refresh.
// libc calls: dl_iterate_phdr, readlink (set-up only).

#define _GNU_SOURCE
#include "crumbs_crash_internal.h"
#include "crumbs_format.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

typedef struct crumbs__scan_state {
  crumbs_crash_record *record;
  uint32_t count;
  uint64_t adds;
} crumbs__scan_state;

/// Finds NT_GNU_BUILD_ID in the PT_NOTE segments of a loaded object (mapped, so readable).
static void crumbs__read_build_id(const struct dl_phdr_info *info, crumbs_crash_module *module) {
  for (int index = 0; index < info->dlpi_phnum; index++) {
    const ElfW(Phdr) *header = &info->dlpi_phdr[index];
    if (header->p_type != PT_NOTE) continue;
    const unsigned char *note = (const unsigned char *)(info->dlpi_addr + header->p_vaddr);
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

static char crumbs__executable_path[CRUMBS_CRASH_PATH_SIZE];

static int crumbs__scan_one(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  crumbs__scan_state *state = (crumbs__scan_state *)context;
  state->adds = info->dlpi_adds + info->dlpi_subs;
  if (state->count >= CRUMBS_CRASH_MAX_MODULES) return 0;
  crumbs_crash_module *module = &state->record->modules[state->count];
  memset(module, 0, sizeof *module);
  module->load_bias = info->dlpi_addr;
  uint64_t low = UINT64_MAX, high = 0, text_low = UINT64_MAX, text_high = 0;
  for (int index = 0; index < info->dlpi_phnum; index++) {
    const ElfW(Phdr) *header = &info->dlpi_phdr[index];
    if (header->p_type != PT_LOAD) continue;
    uint64_t start = info->dlpi_addr + header->p_vaddr;
    uint64_t end = start + header->p_memsz;
    if (start < low) low = start;
    if (end > high) high = end;
    if (header->p_flags & PF_X) {
      if (start < text_low) text_low = start;
      if (end > text_high) text_high = end;
    }
  }
  if (high == 0) return 0; // nothing loaded: not worth a row
  module->start = low;
  module->end = high;
  module->text_start = text_low == UINT64_MAX ? 0 : text_low;
  module->text_end = text_high;
  const char *name = info->dlpi_name;
  // The main executable comes first with an empty name.
  if ((name == NULL || name[0] == '\0') && state->count == 0) name = crumbs__executable_path;
  crumbs__format_copy(module->path, sizeof module->path, name);
  crumbs__read_build_id(info, module);
  state->count++;
  return 0;
}

uint32_t crumbs__crash_scan_modules(crumbs_crash_record *record, uint32_t *adds_seen) {
  if (crumbs__executable_path[0] == '\0') {
    ssize_t length = readlink("/proc/self/exe", crumbs__executable_path,
                              sizeof crumbs__executable_path - 1);
    crumbs__executable_path[length > 0 ? length : 0] = '\0';
  }
  // Seqlock: odd while the table is rewritten, so a crash in the middle is flagged as torn.
  uint64_t generation = __atomic_load_n(&record->module_generation, __ATOMIC_RELAXED);
  __atomic_store_n(&record->module_generation, generation | 1u, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  crumbs__scan_state state = {record, 0, 0};
  dl_iterate_phdr(crumbs__scan_one, &state);
  __atomic_store_n(&record->module_count, state.count, __ATOMIC_RELAXED);
  record->module_adds = (uint32_t)state.adds;
  __atomic_store_n(&record->module_generation, (generation | 1u) + 1u, __ATOMIC_RELEASE);
  if (adds_seen != NULL) *adds_seen = (uint32_t)state.adds;
  return state.count;
}

static int crumbs__count_changes(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  *(uint64_t *)context = info->dlpi_adds + info->dlpi_subs;
  return 1; // the counters are the same in every entry: one is enough
}

uint64_t crumbs__crash_module_changes(void) {
  uint64_t changes = 0;
  dl_iterate_phdr(crumbs__count_changes, &changes);
  return changes;
}

int crumbs__crash_module_for_text(const crumbs_crash_record *record, uint64_t address) {
  uint32_t count = __atomic_load_n(&record->module_count, __ATOMIC_RELAXED);
  if (count > CRUMBS_CRASH_MAX_MODULES) count = CRUMBS_CRASH_MAX_MODULES;
  for (uint32_t index = 0; index < count; index++) {
    const crumbs_crash_module *module = &record->modules[index];
    if (address >= module->text_start && address < module->text_end) return (int)index;
  }
  return -1;
}
