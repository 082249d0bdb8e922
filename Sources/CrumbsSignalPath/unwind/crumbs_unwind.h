// crumbs_unwind.h — the face of unwind/: a thread's backtrace from its registers, memory read
// without faulting, /proc/self/maps, and the module table the unwinder looks addresses up in
// (docs/crash-capture.md#unwind-a-threads-backtrace). Internal to CrumbsSignalPath.
//
// ASYNC-SIGNAL-SAFE: every function declared here but where it says otherwise.

#ifndef CRUMBS_UNWIND_H
#define CRUMBS_UNWIND_H

#include "crumbs_crash_record.h"
#include "kit/crumbs_context.h"
#include "unwind/crumbs_cfi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// MARK: - The module table

/// The module table the unwinder looks addresses up in, as a view of where it lives: its rows,
/// their count and the seqlock generation stay in the crash record's mapping (the scan at set-up
/// and crash-time additions write them; the next launch reads them), and `flags` is the record's
/// flags word a crash-time addition marks. Nothing else of the record is the unwinder's.
typedef struct crumbs__module_table {
  crumbs_crash_module *rows; // CRUMBS_CRASH_MAX_MODULES of them
  uint32_t *count;           // atomic
  uint32_t *adds;            // dl_iterate_phdr's adds at the last scan
  uint64_t *generation;      // atomic seqlock, odd while rewritten
  uint32_t *flags;           // the record's CRUMBS_CRASH_FLAG_* word (atomic)
} crumbs__module_table;

/// The view of `record`'s module table. Lookups only read through it; only the scan and a
/// crash's additions write, and only on the installed record of this process. Pure.
static inline crumbs__module_table crumbs__module_table_of(const crumbs_crash_record *record) {
  crumbs_crash_record *table = (crumbs_crash_record *)(uintptr_t)record;
  crumbs__module_table view = {table->modules, &table->module_count, &table->module_adds,
                               &table->module_generation, &table->flags};
  return view;
}

// MARK: - Unwinder (crumbs_unwind.c and its pieces: crumbs_unwind.h)

/// Walks frame pointers from (pc, fp) within [low, high): frames[0] = pc, then return
/// addresses. Returns the count; `stop` gets a crumbs_crash_backtrace_stop.
/// Safe to call from a signal handler (reads memory only inside [low, high)).
uint32_t crumbs__unwind_walk_frames(uint64_t pc, uint64_t fp, uint64_t sp, uint64_t low, uint64_t high,
                                    uint64_t *frames, uint32_t capacity, uint32_t *stop);
/// Whether `address` is a return address: in a module's text, right after a call instruction
/// (crumbs_unwind_scan.c). Safe to call from a signal handler (reads only that module's text).
bool crumbs__unwind_is_return_address(const crumbs__module_table *modules, uint64_t address);
/// The backtrace of the thread whose registers are `registers` and whose stack is [low, high):
/// frames[0] = pc, then return addresses (and async resume points), innermost first, with
/// marks[i] the CRUMBS_FRAME_* bits saying how frame i was found. Uses `record`'s module table
/// and the CFI recorded with it (crumbs_unwind.c has the order of methods). Returns the count;
/// `stop` gets a crumbs_crash_backtrace_stop. Any thread's registers will do (the crashing
/// thread's from the handler's context, another thread's from its own signal context).
/// Safe to call from a signal handler (see crumbs_unwind.c for what it reads and calls).
uint32_t crumbs__unwind(const crumbs__module_table *modules, const crumbs__unwind_registers *registers,
                        uint64_t low, uint64_t high, uint64_t *frames, uint8_t *marks, uint32_t capacity,
                        uint32_t *stop);
/// Copies `size` bytes at `address` of this process without ever faulting
/// (crumbs_unwind_memory.c): through process_vm_readv (EFAULT for unmapped memory and guard
/// regions, which /proc/self/maps does not show), or, where the kernel refuses that call
/// (seccomp, ENOSYS), by plain loads. Safe to call from a signal handler (syscall(SYS_process_vm_readv, SYS_gettid)).
bool crumbs__crash_read_memory(uint64_t address, void *out, size_t size);
/// Copies `size` bytes at `address`, anywhere (the heap), only through the kernel: false when it
/// cannot (unmapped, or process_vm_readv refused), never a plain load: for addresses taken from
/// another thread's registers or system call (a lock word). Safe to call from a signal handler
/// (syscall(SYS_process_vm_readv, SYS_gettid)).
bool crumbs__unwind_read_anywhere(uint64_t address, void *out, size_t size);
/// The lowest address of a stack [low, high) that holds `probe` (an SP or a fault address) once
/// the unreadable pages at and right above the probe are left out: a guard region inside the
/// mapping (MADV_GUARD_INSTALL) is not part of the stack. `low` when the probe's page reads or
/// the probe is outside. Safe to call from a signal handler (crumbs__crash_read_memory).
uint64_t crumbs__crash_readable_floor(uint64_t low, uint64_t high, uint64_t probe);
/// An address in the Swift concurrency runtime (swift_job_run, found with dlsym at install), 0
/// without one: async frames are those it resumes (crumbs_unwind_async.c).
extern uint64_t crumbs__unwind_concurrency_runtime;

// MARK: - /proc/self/maps (crumbs_maps.c)

/// One line of /proc/self/maps, parsed in place.
typedef struct crumbs__maps_entry {
  uint64_t start, end; // [start, end)
  uint64_t offset;     // in the file
  uint64_t device;     // major << 32 | minor
  uint64_t inode;      // 0 for anonymous mappings
  char perms[4];       // "r-xp"
  const char *path;    // into the line, not NUL-terminated; path_length 0 when anonymous
  size_t path_length;
} crumbs__maps_entry;

/// Calls `line` with each line of /proc/self/maps (without its newline; a line longer than the
/// internal buffer is cut) until it returns false. Returns false when the file cannot be read.
/// Safe to call from a signal handler (open/read/close into static buffers: not reentrant, one
/// caller at a time, which the handler's first-crash-wins rule gives).
bool crumbs__crash_each_maps_line(bool (*line)(const char *text, size_t length, void *context),
                                  void *context);
/// Calls `line` with each line of the file at `path` (a /proc file: read in chunks, so a line of
/// any length is seen, cut to the internal buffer), until it returns false. Returns false when
/// the file cannot be opened. Safe to call from a signal handler (same static buffers as
/// crumbs__crash_each_maps_line: one caller at a time, never nested).
bool crumbs__crash_each_line(const char *path, bool (*line)(const char *text, size_t length, void *context),
                             void *context);
/// Parses one maps line. Safe to call from a signal handler (pure).
bool crumbs__crash_parse_maps_line(const char *line, size_t length, crumbs__maps_entry *entry);
/// The readable mapping holding `address`, from /proc/self/maps. Safe to call from a signal
/// handler (see crumbs__crash_each_maps_line).
bool crumbs__crash_mapping_containing(uint64_t address, uint64_t *start, uint64_t *end);
/// The protection (PROT_READ | PROT_WRITE | PROT_EXEC bits) /proc/self/maps gives the mapping
/// holding `address`, or -1 when none does (or the file cannot be read). Safe to call from a
/// signal handler on any number of threads at once (open, read, close; a buffer on the stack,
/// not the static ones above).
int crumbs__crash_mapping_protection(uint64_t address);

// MARK: - Module table (crumbs_modules.c)

/// Where module row i's .eh_frame_hdr is loaded, and the readable segment [low, high) holding it
/// (and, in every linker's output, .eh_frame too). header 0: the module has none.
typedef struct crumbs__module_cfi {
  uint64_t header, low, high;
} crumbs__module_cfi;
/// One per row of the record's module table, written with the row (scan, crash-time additions).
extern crumbs__module_cfi crumbs__modules_cfi[CRUMBS_CRASH_MAX_MODULES];

/// Scans loaded modules into `record` (dl_iterate_phdr). Not signal-safe.
uint32_t crumbs__modules_scan(const crumbs__module_table *modules, uint32_t *adds_seen);
/// dl_iterate_phdr's current load counter (dlpi_adds + dlpi_subs). Not signal-safe.
uint64_t crumbs__modules_changes(void);
/// The module whose executable range holds `address`, or -1; at crash time only a row checked
/// present (crumbs__modules_check). Safe to call from a signal handler.
int crumbs__modules_for_text(const crumbs__module_table *modules, uint64_t address);
/// Starts checking `record`'s rows at crash time: from now on a lookup
/// (crumbs__modules_for_text) checks the row it lands in, once, and flags it
/// CRUMBS_CRASH_MODULE_UNLOADED and skips it when its library is gone (its text unreadable, or
/// another build ID mapped there), so the handler never reads an unloaded library's text or
/// CFI. Safe to call from a signal handler (memset; the lookups: crumbs__crash_read_memory).
void crumbs__modules_check(const crumbs__module_table *modules);
/// crumbs__modules_check for a live capture: rows are checked the same way, but a row
/// found unloaded is only skipped, not flagged in the record (which it never writes), until
/// crumbs__modules_check_stop. Safe to call from a signal handler (memset).
void crumbs__modules_check_read_only(const crumbs__module_table *modules);
/// Ends crumbs__modules_check_read_only: lookups trust every row again.
void crumbs__modules_check_stop(void);
/// The CFI region and .eh_frame_hdr of the module whose text holds `address`: false when the
/// module has none. Safe to call from a signal handler (crumbs__modules_for_text).
bool crumbs__modules_cfi_for(const crumbs__module_table *modules, uint64_t address,
                             crumbs__cfi_region *region, uint64_t *header);
/// Start of the function holding `address` according to its module's FDE table, or 0. Safe to
/// call from a signal handler (loads inside the module's .eh_frame_hdr segment only).
uint64_t crumbs__modules_function_start(const crumbs__module_table *modules, uint64_t address);
/// Adds to `record`'s module table every module holding one of `addresses` that the table lacks
/// (a library loaded after the last scan), as /proc/self/maps and the module's mapped ELF
/// headers describe it, flagged CRUMBS_CRASH_MODULE_FOUND_AT_CRASH; takes the table's seqlock
/// (does nothing while a refresh holds it). Returns how many it added. Safe to call from a
/// signal handler (crumbs__crash_each_maps_line; loads only from mappings the maps file says
/// are readable).
uint32_t crumbs__modules_add_at_crash(const crumbs__module_table *modules, const uint64_t *addresses,
                                      uint32_t count);

#endif // CRUMBS_UNWIND_H
