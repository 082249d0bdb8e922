// crumbs_crash_record_write.c — what the crash record holds, written by the crashing thread:
// the signal, registers, backtrace (crumbs_unwind.c), every other thread (crumbs_thread_capture.c),
// time and memory, what was said before the signal, the fatal breadcrumb, the complete marker.
// When to write it, and whom to call before and after, is crumbs_crash_handler.c's.
//
// Entry points, in call order (crash/crumbs_crash.h):
//   crumbs__crash_own_record     the installed record, unless it is another process's
//   crumbs__crash_write_record   the whole record, for the thread that won the first crash
//   crumbs__crash_finish_record  duration and complete marker (also for a PARTIAL record)
// Registers and clocks are read through crumbs_context.c, as the thread capture reads them.
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio. libc calls:
//   sysinfo, prctl(PR_GET_NAME), sigaltstack (query only), getpid; and through what it calls:
//   clock_gettime (crumbs_context.c), crumbs_thread_capture.c, crumbs_thread_waits.c,
//   crumbs_unwind.c, crumbs_maps.c,
//   crumbs_modules.c and the ring append (their own headers list theirs).

#define _GNU_SOURCE
#include "crash/crumbs_crash.h"
#include "threads/crumbs_threads.h"
#include "unwind/crumbs_unwind.h"
#include "kit/crumbs_format.h"
#include "kit/crumbs_hooks.h"
#include "crumbs_ring.h"
#include "crumbs_signal_names.h"
#include "crash/crumbs_terminate.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

// MARK: - Registers (crumbs_context.c reads them)

static crumbs__context_registers crumbs__copy_registers(crumbs_crash_record *record, const void *context) {
  crumbs__context_registers result;
  record->register_count =
      crumbs__context_copy_registers(context, record->registers, CRUMBS_CRASH_MAX_REGISTERS, &result);
  return result;
}

// MARK: - The record

static void crumbs__record_signal(crumbs_crash_record *record, int signal_number, const siginfo_t *info) {
  record->signal_number = signal_number;
  record->signal_code = info != NULL ? info->si_code : 0;
  record->signal_errno = info != NULL ? info->si_errno : 0;
  // "" when the table has no name: the reader shows the number.
  crumbs__format_copy(record->signal_name, sizeof record->signal_name, crumbs_signal_name(signal_number));
  crumbs__format_copy(record->code_name, sizeof record->code_name,
                      crumbs_signal_code_name(signal_number, record->signal_code));
  if (info == NULL) return;
  int code = info->si_code;
  if (code == SI_USER || code == SI_QUEUE || code == SI_TKILL) {
    record->sender_pid = info->si_pid;
    record->sender_uid = info->si_uid;
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_HAS_SENDER, __ATOMIC_RELAXED);
  } else if (code > 0 && (signal_number == SIGSEGV || signal_number == SIGBUS || signal_number == SIGILL ||
                          signal_number == SIGFPE || signal_number == SIGTRAP)) {
    record->fault_address = (uint64_t)(uintptr_t)info->si_addr;
  }
}

static void crumbs__record_backtrace(crumbs_crash_record *record, crumbs__context_registers registers,
                                     const void *context) {
  uint64_t low = 0, high = 0;
  const crumbs__module_table modules = crumbs__module_table_of(record);
  // From here each lookup checks the row it lands in: a library dlclose'd since the last scan
  // is flagged unloaded and nothing of it is read (crumbs_modules.c).
  crumbs__modules_check(&modules);
  // After a stack overflow the SP can point into the guard gap below the stack (the prologue
  // moved it there, the first store faulted); the frame pointer still points into the stack.
  // So the stack is the range holding the SP, or failing that the one holding the FP.
  uint64_t probes[2] = {registers.sp, registers.fp};
  record->stack_source = CRUMBS_STACK_UNKNOWN;
  for (int index = 0; index < 2 && record->stack_source == CRUMBS_STACK_UNKNOWN; index++) {
    uint64_t probe = probes[index];
    if (probe == 0) continue;
    if (crumbs__this_thread.stack_high != 0 && probe >= crumbs__this_thread.stack_low &&
        probe < crumbs__this_thread.stack_high) {
      low = crumbs__this_thread.stack_low;
      high = crumbs__this_thread.stack_high;
      record->stack_source = CRUMBS_STACK_REGISTERED;
    } else if (crumbs__crash_mapping_containing(probe, &low, &high)) {
      record->stack_source = CRUMBS_STACK_PROC_MAPS;
    }
  }
  // A guard region inside the mapping (MADV_GUARD_INSTALL: glibc 2.42's thread stacks) is not
  // in /proc/self/maps: after an overflow the fault (or the SP) lies in it. Its pages are not
  // the stack; the reader then sees the fault just below the stack's lowest address.
  if (record->stack_source != CRUMBS_STACK_UNKNOWN) {
    uint64_t fault = record->fault_address;
    low = crumbs__crash_readable_floor(low, high, fault >= low && fault < high ? fault : registers.sp);
  }
  record->stack_low = low;
  record->stack_high = high;

#if defined(__x86_64__)
  // Read through the kernel: [sp] may be in such a guard, and must not fault here.
  uint64_t leaf_return = 0;
  if (record->stack_source != CRUMBS_STACK_UNKNOWN && registers.sp >= low && registers.sp + 8 <= high &&
      (registers.sp & 7u) == 0 && crumbs__crash_read_memory(registers.sp, &leaf_return, sizeof leaf_return)) {
    registers.leaf_return = leaf_return;
  }
#endif
  record->leaf_return_candidate = registers.leaf_return;

  uint32_t generation = (uint32_t)__atomic_load_n(&record->module_generation, __ATOMIC_ACQUIRE);
  if (generation & 1u) __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_TORN, __ATOMIC_RELAXED);

  // A PC outside the table may lie in a library loaded since the last module scan: look for it
  // first, so the unwinder sees the module it is in (and its CFI). Outside every module, control
  // went to a bad address, and the unwinder inserts the caller from [sp] / LR (marked).
  if (registers.pc != 0 && crumbs__modules_for_text(&modules, registers.pc) < 0) {
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_STALE, __ATOMIC_RELAXED);
    crumbs__modules_add_at_crash(&modules, &registers.pc, 1);
  }
  crumbs__unwind_registers unwind;
  crumbs__context_unwind_registers(context, &unwind);
  uint32_t stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
  uint32_t walked = crumbs__unwind(&modules, &unwind, low, high, record->frames, record->frame_marks,
                                   CRUMBS_CRASH_MAX_FRAMES, &stop);
  // The record-wide flags readers of earlier files know, from the per-frame marks.
  for (uint32_t index = 0; index < walked; index++) {
    if (record->frame_marks[index] & CRUMBS_FRAME_INSERTED) {
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_LEAF_FRAME_INSERTED, __ATOMIC_RELAXED);
    }
    if (record->frame_marks[index] & CRUMBS_FRAME_GUESSED) {
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_STACK_SCANNED, __ATOMIC_RELAXED);
    }
  }
  record->frame_count = walked;
  record->backtrace_stop = stop;

  // Frames outside the table: the table is stale (a library loaded since the last scan, JIT
  // code, a garbage address). Find the libraries among them in /proc/self/maps.
  static uint64_t unknown[CRUMBS_CRASH_MAX_FRAMES];
  uint32_t unknown_count = 0;
  for (uint32_t index = 0; index < walked; index++) {
    // Return addresses point after the call: look up address - 1 so a call at a module's very
    // end still maps to it.
    uint64_t address = index == 0 ? record->frames[index] : record->frames[index] - 1;
    if (crumbs__modules_for_text(&modules, address) < 0) unknown[unknown_count++] = address;
  }
  if (unknown_count > 0) {
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_STALE, __ATOMIC_RELAXED);
    crumbs__modules_add_at_crash(&modules, unknown, unknown_count);
  }
}

// MARK: - What was said before the signal

/// Copies the Swift runtime's last fatal-error message into the record: one load of the
/// runtime's pointer, then at most CRUMBS_CRASH_SWIFT_MESSAGE_SIZE bytes up to its NUL, never
/// past the end of the readable mapping holding it (/proc/self/maps), so a damaged pointer
/// cannot fault here. Safe to call from a signal handler (crumbs__crash_mapping_containing).
static void crumbs__record_swift_message(crumbs_crash_message *message) {
  const char *const *buffer = crumbs__crash_installed.swift_fatal_message;
  if (buffer == NULL) return;
  const char *text = __atomic_load_n(buffer, __ATOMIC_ACQUIRE);
  if (text == NULL) return;
  uint64_t address = (uint64_t)(uintptr_t)text, low = 0, high = 0;
  if (!crumbs__crash_mapping_containing(address, &low, &high) || high <= address) return;
  uint64_t readable = high - address;
  uint32_t limit = readable < CRUMBS_CRASH_SWIFT_MESSAGE_SIZE ? (uint32_t)readable
                                                              : CRUMBS_CRASH_SWIFT_MESSAGE_SIZE;
  uint32_t length = 0;
  while (length < limit && text[length] != '\0') {
    message->swift_message[length] = text[length];
    length++;
  }
  message->swift_length = length;
  // Cut by the field (the byte after it is still readable: is it the NUL?) or by the mapping.
  if (length == limit && (limit == readable || text[limit] != '\0')) {
    message->swift_flags |= CRUMBS_CRASH_MESSAGE_TRUNCATED;
  }
}

/// Copies what the terminate handler saw of an uncaught C++ exception (crumbs_terminate.h), if
/// it ran. Safe to call from a signal handler (plain loads and stores).
static void crumbs__record_uncaught_exception(crumbs_crash_message *message) {
  const crumbs_crash_message *uncaught = &crumbs__crash_uncaught;
  uint32_t flags = __atomic_load_n(&uncaught->cxx_flags, __ATOMIC_ACQUIRE);
  if (!(flags & CRUMBS_CRASH_CXX_EXCEPTION)) return;
  uint32_t type_length = uncaught->cxx_type_length, what_length = uncaught->cxx_what_length;
  if (type_length > CRUMBS_CRASH_CXX_TYPE_SIZE) type_length = CRUMBS_CRASH_CXX_TYPE_SIZE;
  if (what_length > CRUMBS_CRASH_CXX_WHAT_SIZE) what_length = CRUMBS_CRASH_CXX_WHAT_SIZE;
  for (uint32_t index = 0; index < type_length; index++) message->cxx_type[index] = uncaught->cxx_type[index];
  for (uint32_t index = 0; index < what_length; index++) message->cxx_what[index] = uncaught->cxx_what[index];
  message->cxx_type_length = type_length;
  message->cxx_what_length = what_length;
  message->cxx_flags = flags;
}

/// The final breadcrumb: "SIGSEGV SEGV_MAPERR at 0x0 (pc 0x…) on thread 1234 name".
static void crumbs__append_fatal_breadcrumb(const crumbs_crash_record *record) {
  const crumbs_ring *ring = crumbs__crash_installed.ring;
  // Another process's ring (see crumbs__own_record) gets no breadcrumb and keeps its state.
  if (ring == NULL || ring->header->pid != (uint32_t)getpid()) return;
  static char message[160];
  static char signal_text[24], code_text[40], address_text[24], pc_text[24], thread_text[24];
  size_t length = crumbs_signal_name_text(record->signal_number, message, sizeof message);
  if (record->code_name[0] != '\0') {
    length = crumbs__format_append(message, sizeof message, length, " ");
    length = crumbs__format_append(message, sizeof message, length, record->code_name);
  }
  if (record->flags & CRUMBS_CRASH_FLAG_HAS_SENDER) {
    length = crumbs__format_append(message, sizeof message, length, " from pid ");
    length = crumbs__format_append_decimal(message, sizeof message, length, record->sender_pid);
  } else {
    length = crumbs__format_append(message, sizeof message, length, " at ");
    length = crumbs__format_append_hex(message, sizeof message, length, record->fault_address);
  }
  length = crumbs__format_append(message, sizeof message, length, " on thread ");
  length = crumbs__format_append_decimal(message, sizeof message, length, record->thread_id);
  if (record->thread_name[0] != '\0') {
    length = crumbs__format_append(message, sizeof message, length, " ");
    crumbs__format_append(message, sizeof message, length, record->thread_name);
  }

  crumbs__format_append_decimal(signal_text, sizeof signal_text, 0, record->signal_number);
  crumbs__format_append_decimal(code_text, sizeof code_text, 0, record->signal_code);
  crumbs__format_append_hex(address_text, sizeof address_text, 0, record->fault_address);
  crumbs__format_append_hex(pc_text, sizeof pc_text, 0, record->frame_count > 0 ? record->frames[0] : 0);
  crumbs__format_append_decimal(thread_text, sizeof thread_text, 0, record->thread_id);
  const crumbs_attribute attributes[] = {
      {"signal", signal_text}, {"code", code_text},     {"address", address_text},
      {"pc", pc_text},         {"thread", thread_text},
  };
  crumbs_ring_add(ring, CRUMBS_LEVEL_FATAL, CRUMBS_TYPE_SYSTEM, CRUMBS_SLOT_FROM_SIGNAL_HANDLER, message,
                  attributes, sizeof attributes / sizeof attributes[0]);
  crumbs_ring_set_state(ring, CRUMBS_RING_CRASHED);
}

void crumbs__crash_finish_record(crumbs_crash_record *record, uint64_t started_ns) {
  record->handler_duration_ns = crumbs__context_clock_ns(CLOCK_MONOTONIC) - started_ns;
  __atomic_store_n(&record->state, CRUMBS_CRASH_COMPLETE, __ATOMIC_RELEASE);
  __atomic_store_n(&record->complete_marker, CRUMBS_CRASH_COMPLETE_MARKER, __ATOMIC_RELEASE);
}

void crumbs__crash_write_record(crumbs_crash_record *record, int signal_number, siginfo_t *info,
                                void *context, uint32_t thread_id, uint64_t started_ns,
                                crumbs__after_record after) {
  record->crash_monotonic_ns = started_ns;
  record->crash_wall_ns = crumbs__context_clock_ns(CLOCK_REALTIME);
  uint64_t boottime = crumbs__context_clock_ns(CLOCK_BOOTTIME);
  record->process_uptime_ns = record->process_start_boottime_ns != 0 &&
                                      boottime > record->process_start_boottime_ns
                                  ? boottime - record->process_start_boottime_ns
                                  : 0;
  record->thread_id = thread_id;
  crumbs__record_signal(record, signal_number, info);
  __atomic_store_n(&record->state, CRUMBS_CRASH_WRITING, __ATOMIC_RELEASE);
  // Where the thread capture handler finds this thread's fault: a live capture that asks it
  // while the request waits for that capture to finish shows the fault, not the wait.
  crumbs__this_thread.crash_context = context;
  // Ask the other threads first: they stop while this thread records its own crash.
  crumbs__thread_capture_request(record, thread_id, after);

  if (CRUMBS__HOOK_ON(fault_inside_handler)) { // tests only
    volatile uintptr_t unmapped = 8;           // through a variable: gcc -Warray-bounds flags a constant
    *(volatile int *)unmapped = 1;
  }

  prctl(PR_GET_NAME, (unsigned long)record->thread_name, 0, 0, 0);
  record->thread_name[sizeof record->thread_name - 1] = '\0';

  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && (current.ss_flags & SS_ONSTACK)) {
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_ON_ALTERNATE_STACK, __ATOMIC_RELAXED);
  }

  crumbs__context_registers registers = {0, 0, 0, 0};
  if (context != NULL) registers = crumbs__copy_registers(record, context);
  crumbs__record_backtrace(record, registers, context);
  crumbs__thread_capture_collect(record); // releases the parked threads, or keeps them
  crumbs__thread_wait_candidates(record);

  struct sysinfo memory;
  if (sysinfo(&memory) == 0) {
    record->free_memory_bytes = (uint64_t)memory.freeram * memory.mem_unit;
    record->total_memory_bytes = (uint64_t)memory.totalram * memory.mem_unit;
  }

  crumbs__record_uncaught_exception(&record->message);
  crumbs__record_swift_message(&record->message);

  crumbs__append_fatal_breadcrumb(record);
  crumbs__crash_finish_record(record, started_ns);
}
