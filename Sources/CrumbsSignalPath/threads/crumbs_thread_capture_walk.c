// crumbs_thread_capture_walk.c — the asked threads' stacks walked into their entries: each
// parked thread's stack found (registered bounds, else /proc/self/maps read once for all), a
// thread blocked in a system call walked where it blocks, without a signal, from what
// /proc/self/task/TID/syscall shows, and every answer written into the thread table
// (docs/crash-capture.md#threads-every-other-thread).
//
// Entry points, in call order: crumbs__capture_find_stacks, crumbs__capture_walk_blocked,
// crumbs__capture_write_entry.
//
// ASYNC-SIGNAL-SAFE: everything here. libc calls: memset; open, read, close (crumbs_maps.c,
// crumbs_proc_threads.c); the unwinder's (unwind/crumbs_unwind.h).

#define _GNU_SOURCE
#include "kit/crumbs_format.h"
#include "threads/crumbs_thread_capture.h"

#include <string.h>

/// Whether slot `index` answered this capture and is parked (not yet released).
static bool crumbs__parked(uint32_t index) {
  return __atomic_load_n(&crumbs__capture.slots[index].state, __ATOMIC_ACQUIRE) ==
         CRUMBS__SLOT_WORD(crumbs__capture_generation(), CRUMBS__SLOT_ANSWERED);
}

/// Whether slot `index`'s stack is to be walked now: parked, or being read where it blocks.
static bool crumbs__stack_wanted(uint32_t index) {
  return crumbs__capture.slots[index].reading || crumbs__parked(index);
}

/// The stack pointer that finds slot `slot`'s stack: the one the kernel saved at its blocked
/// call while it is being read there, else the one its answer copied.
static uint64_t crumbs__stack_sp(const crumbs__capture_slot *slot) {
  return slot->reading ? slot->blocked.sp : slot->context.sp;
}

/// One maps line against every parked thread still without bounds: the file is read once.
static bool crumbs__find_stacks(const char *line, size_t length, void *context) {
  (void)context;
  crumbs__maps_entry entry;
  if (!crumbs__crash_parse_maps_line(line, length, &entry) || entry.perms[0] != 'r') return true;
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t count = capture->slot_count;
  for (uint32_t index = 1; index < count; index++) {
    const crumbs__capture_slot *slot = &capture->slots[index];
    if (capture->stack_source[index] != CRUMBS_STACK_UNKNOWN || !crumbs__stack_wanted(index)) continue;
    uint64_t sp = crumbs__stack_sp(slot);
    uint64_t probe = sp != 0 ? sp : slot->context.fp;
    if (probe >= entry.start && probe < entry.end) {
      capture->stack_low[index] = entry.start;
      capture->stack_high[index] = entry.end;
      capture->stack_source[index] = CRUMBS_STACK_PROC_MAPS;
    }
  }
  return true;
}

void crumbs__capture_find_stacks(void) {
  crumbs__capture_state *capture = &crumbs__capture;
  uint32_t count = capture->slot_count;
  bool need_maps = false;
  for (uint32_t index = 1; index < count; index++) {
    if (capture->stack_source[index] != CRUMBS__STACK_NOT_LOOKED || !crumbs__stack_wanted(index)) continue;
    const crumbs__capture_slot *slot = &capture->slots[index];
    uint64_t sp = crumbs__stack_sp(slot), fp = slot->reading ? 0 : slot->context.fp;
    capture->stack_source[index] = CRUMBS_STACK_UNKNOWN;
    if (slot->stack_high != 0 && ((sp >= slot->stack_low && sp < slot->stack_high) ||
                                  (fp >= slot->stack_low && fp < slot->stack_high))) {
      capture->stack_low[index] = slot->stack_low;
      capture->stack_high[index] = slot->stack_high;
      capture->stack_source[index] = CRUMBS_STACK_REGISTERED;
    } else {
      need_maps = true;
    }
  }
  if (need_maps) crumbs__crash_each_maps_line(crumbs__find_stacks, NULL);
}

/// Whether two readings of a thread's syscall line name the same blocked call at the same place.
static bool crumbs__same_call(const crumbs__blocked_syscall *first, const crumbs__blocked_syscall *second) {
  if (first->number != second->number || first->sp != second->sp || first->pc != second->pc) return false;
  for (unsigned index = 0; index < 6; index++) {
    if (first->arguments[index] != second->arguments[index]) return false;
  }
  return true;
}

bool crumbs__capture_walk_blocked(const crumbs__module_table *modules, uint32_t index,
                                  crumbs_crash_thread *entry) {
  crumbs__capture_state *capture = &crumbs__capture;
  crumbs__capture_slot *slot = &capture->slots[index];
  memset(entry, 0, sizeof *entry);
  entry->tid = slot->tid;
  entry->state = CRUMBS_THREAD_CAPTURED;
  entry->not_signalled = CRUMBS_NOT_SIGNALLED_IN_SYSCALL |
                         (slot->seccomp != 0 ? CRUMBS_NOT_SIGNALLED_SECCOMP : 0u);
  entry->blocked_syscall = slot->blocked.number;
  uint32_t source = capture->stack_source[index];
  entry->stack_source = source == CRUMBS__STACK_NOT_LOOKED ? CRUMBS_STACK_UNKNOWN : source;
  bool known = entry->stack_source != CRUMBS_STACK_UNKNOWN;
  entry->stack_low = known ? capture->stack_low[index] : 0;
  entry->stack_high = known ? capture->stack_high[index] : 0;
  // What the kernel saved at the call's entry: the user pc (right after the syscall
  // instruction, in libc's wrapper) and sp; no other register. CFI steps out of the wrapper
  // from those alone (its CFA is sp-based); a caller whose CFA needs the frame pointer is
  // bridged by the checked stack scan, which recovers the frame pointer from the frame record
  // it finds (crumbs_unwind_scan.c).
  crumbs__unwind_registers registers;
  memset(&registers, 0, sizeof registers);
  registers.values[CRUMBS__REG_SP] = slot->blocked.sp;
  registers.known = 1ull << CRUMBS__REG_SP;
  registers.pc = slot->blocked.pc;
  uint32_t stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
  entry->frame_count = crumbs__unwind(modules, &registers, entry->stack_low, entry->stack_high, entry->frames,
                                      entry->frame_marks, CRUMBS_CRASH_THREAD_MAX_FRAMES, &stop);
  entry->backtrace_stop = stop;
  crumbs__blocked_syscall again;
  crumbs__thread_facts after;
  bool same = crumbs__proc_thread_syscall(slot->tid, &again) && crumbs__same_call(&slot->blocked, &again) &&
              crumbs__proc_thread_read(slot->tid, true, &after) &&
              (after.state == 'S' || after.state == 'D') && after.switches == slot->switches;
  if (!same) memset(entry, 0, sizeof *entry);
  return same;
}

bool crumbs__capture_write_entry(const crumbs__module_table *modules, uint32_t index,
                                 crumbs_crash_thread *entry, crumbs_crash_thread_table *table) {
  crumbs__capture_state *capture = &crumbs__capture;
  const crumbs__capture_slot *slot = &capture->slots[index];
  uint32_t state = CRUMBS__SLOT_STATE(__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE));
  if (state == CRUMBS__SLOT_GONE) return false;
  memset(entry, 0, sizeof *entry);
  entry->tid = slot->tid;
  entry->asked_with = slot->asked_with;
  entry->not_signalled = slot->not_signalled;
  if (state == CRUMBS__SLOT_NOT_ASKED && slot->reading) {
    // Not signalled (a seccomp filter), but blocked in a system call: walked where it blocks.
    crumbs__capture_slot *reading = &capture->slots[index];
    bool walked = crumbs__capture_walk_blocked(modules, index, entry);
    reading->reading = 0;
    if (walked) {
      crumbs__proc_thread_name(slot->tid, entry->name);
      table->captured++;
      return true;
    }
    entry->tid = slot->tid;
    entry->asked_with = slot->asked_with;
    entry->not_signalled = slot->not_signalled;
  }
  if (state != CRUMBS__SLOT_ANSWERED) {
    entry->state = state == CRUMBS__SLOT_NOT_ASKED ? CRUMBS_THREAD_NOT_ASKED : CRUMBS_THREAD_NO_ANSWER;
    if (entry->state == CRUMBS_THREAD_NO_ANSWER) table->no_answer++;
    crumbs__proc_thread_name(slot->tid, entry->name);
    return true;
  }
  entry->state = slot->also_crashed != 0 ? CRUMBS_THREAD_ALSO_CRASHED : CRUMBS_THREAD_CAPTURED;
  entry->signal_number = slot->also_crashed;
  crumbs__format_copy(entry->name, sizeof entry->name, slot->name);
  for (uint32_t r = 0; r < slot->register_count; r++) entry->registers[r] = slot->registers[r];
  entry->register_count = slot->register_count;
  uint32_t source = capture->stack_source[index];
  entry->stack_source = source == CRUMBS__STACK_NOT_LOOKED ? CRUMBS_STACK_UNKNOWN : source;
  bool known = entry->stack_source != CRUMBS_STACK_UNKNOWN;
  entry->stack_low = known ? capture->stack_low[index] : 0;
  entry->stack_high = known ? capture->stack_high[index] : 0;
  // The crash handler's unwinder (CFI, then frame records, then a checked stack scan, each
  // frame marked how it was found), so a thread stopped deep in glibc (pthread_cond_wait, whose
  // frame pointer register holds anything) still shows its callers.
  uint32_t stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
  entry->frame_count = crumbs__unwind(modules, &slot->unwind, entry->stack_low, entry->stack_high,
                                      entry->frames, entry->frame_marks, CRUMBS_CRASH_THREAD_MAX_FRAMES,
                                      &stop);
  entry->backtrace_stop = stop;
  table->captured++;
  return true;
}
