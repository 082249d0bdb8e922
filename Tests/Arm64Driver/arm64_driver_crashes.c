// arm64_driver_crashes.c — the aarch64 driver's crash cases: each signal the crash handler takes,
// a call through a bad pointer, and the unwind through frame records, CFI-only frames, libc and
// a leaf, with return addresses signed by pointer authentication (arm64_driver.c says how the
// driver runs).
#define _GNU_SOURCE
#include "arm64_driver.h"
#include "kit/crumbs_context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ucontext.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/// A wild address: in the user range, never mapped.
#define DRIVER_WILD 0x7e57dead0000ull

volatile int driver_sink;

/// ESR_ELx exception classes the kernel (or qemu) reports for our faults.
static unsigned driver_esr_class(uint64_t esr) { return (unsigned)(esr >> 26) & 0x3fu; }

/// One crash case: the child's body crashes; the record must be complete, by `signal_number`,
/// at `fault_address` (DRIVER_ANY_ADDRESS: any), and `esr_class` (0: none expected) the ESR's.
static void driver_crash_case(const char *name, void (*body)(const char *), int signal_number,
                              uint64_t fault_address, unsigned esr_class) {
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, body);
  char file[128];
  snprintf(file, sizeof file, "%s.crash", name);
  const crumbs_crash_record *record = driver_read_record(file);
  bool passed = driver_died_by(status, signal_number, why, sizeof why) &&
                driver_check_record(record, signal_number, fault_address, why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  if (passed && esr_class != 0) {
    // qemu-user writes no ESR record into the signal frame (a kernel does, for a fault): a 0
    // there is what the emulator gives, and the esr-record case proves the reading instead.
    uint64_t esr = record->registers[DRIVER_ESR];
    if (esr != 0 && driver_esr_class(esr) != esr_class) {
      snprintf(why, sizeof why, "esr 0x%llx: class 0x%x, not 0x%x", (unsigned long long)esr,
               driver_esr_class(esr), esr_class);
      passed = false;
    }
  }
  driver_report(name, passed, "%s%s%s", text, passed ? "" : ": ", why);
}

// MARK: - Signals

static void driver_segv_null(const char *name) {
  driver_install(name);
  volatile int *volatile pointer = NULL;
  *pointer = 1;
}

void driver_case_segv_null(const char *name) {
  // A data abort from EL0 (class 0x24), a write (WnR).
  driver_crash_case(name, driver_segv_null, SIGSEGV, 0, 0x24);
}

static void driver_segv_wild(const char *name) {
  driver_install(name);
  volatile int *volatile pointer = (volatile int *)(uintptr_t)DRIVER_WILD;
  driver_sink = *pointer;
}

void driver_case_segv_wild(const char *name) {
  driver_crash_case(name, driver_segv_wild, SIGSEGV, DRIVER_WILD, 0x24);
}

__attribute__((noinline)) void driver_bad_caller(void) {
  void (*volatile function)(void) = (void (*)(void))(uintptr_t)DRIVER_WILD;
  function();
  driver_sink++;
}

static void driver_bad_call(const char *name) {
  driver_install(name);
  driver_bad_caller();
}

/// A call through a wild pointer: the pc is outside every module, so the caller is LR, inserted
/// as frames[1] (CRUMBS_CRASH_FLAG_LEAF_FRAME_INSERTED).
void driver_case_bad_call(const char *name) {
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, driver_bad_call);
  const crumbs_crash_record *record = driver_read_record("bad-call.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, DRIVER_WILD, why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  if (passed &&
      (record->frame_count < 3 || strcmp(driver_symbol(record->frames[1]), "driver_bad_caller") != 0 ||
       !(record->frame_marks[1] & CRUMBS_FRAME_INSERTED))) {
    snprintf(why, sizeof why, "frames[1] is %s (mark %u), not driver_bad_caller from LR",
             driver_symbol(record->frames[1]), record->frame_marks[1]);
    passed = false;
  }
  uint64_t esr = record != NULL ? record->registers[DRIVER_ESR] : 0;
  if (passed && esr != 0 && driver_esr_class(esr) != 0x20) {
    snprintf(why, sizeof why, "esr 0x%llx is no instruction abort",
             (unsigned long long)record->registers[DRIVER_ESR]);
    passed = false;
  }
  driver_report(name, passed, "%s, frames[1] %s%s%s", text,
                record != NULL ? driver_symbol(record->frames[1]) : "-", passed ? "" : ": ", why);
}

static void driver_sigbus(const char *name) {
  driver_install(name);
  char path[512];
  snprintf(path, sizeof path, "%s/%s.empty", driver_directory, name);
  FILE *file = fopen(path, "w");
  if (file == NULL) _exit(91);
  fclose(file);
  int fd = open(path, O_RDONLY);
  // A page of a file with no bytes: the access is past its end (BUS_ADRERR).
  volatile char *mapping = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) _exit(91);
  driver_shared[1] = (uint64_t)(uintptr_t)mapping;
  driver_sink = mapping[0];
}

void driver_case_sigbus(const char *name) {
  driver_shared[1] = 0;
  char why[256] = "", text[512] = "";
  int status = driver_run_child(name, driver_sigbus);
  const crumbs_crash_record *record = driver_read_record("sigbus.crash");
  bool passed = driver_died_by(status, SIGBUS, why, sizeof why) &&
                driver_check_record(record, SIGBUS, driver_shared[1], why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  driver_report(name, passed, "%s%s%s", text, passed ? "" : ": ", why);
}

static void driver_sigill(const char *name) {
  driver_install(name);
  __asm__ volatile(".inst 0x00000000"); // udf #0
}

/// SIGILL's fault address is the pc (the kernel gives no ESR record for an undefined
/// instruction: class 0 is not asked for).
void driver_case_sigill(const char *name) {
  driver_crash_case(name, driver_sigill, SIGILL, DRIVER_ANY_ADDRESS, 0);
}

static void driver_sigtrap(const char *name) {
  driver_install(name);
  __asm__ volatile("brk #1"); // what a Swift trap is on aarch64
}

void driver_case_sigtrap(const char *name) {
  driver_crash_case(name, driver_sigtrap, SIGTRAP, DRIVER_ANY_ADDRESS, 0);
}

static void driver_sigabrt(const char *name) {
  driver_install(name);
  abort();
}

void driver_case_sigabrt(const char *name) {
  driver_crash_case(name, driver_sigabrt, SIGABRT, DRIVER_ANY_ADDRESS, 0);
}

static void driver_divide(const char *name) {
  driver_install(name);
  volatile int numerator = 7, zero = 0, minimum = -2147483647 - 1, minus_one = -1;
  int quotient = numerator / zero;    // sdiv: 0, no trap
  int overflow = minimum / minus_one; // sdiv: INT_MIN, no trap
  driver_shared[2] = (uint64_t)(uint32_t)quotient;
  driver_shared[3] = (uint64_t)(uint32_t)overflow;
  _exit(0);
}

/// Integer division by zero does not trap on aarch64 (sdiv gives 0): no SIGFPE, no record, the
/// process runs on. What a Swift `/ 0` does there is its own check's trap (SIGTRAP, brk).
void driver_case_divide(const char *name) {
  int status = driver_run_child(name, driver_divide);
  const crumbs_crash_record *record = driver_read_record("divide-by-zero.crash");
  bool exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  bool armed = record != NULL && record->state == CRUMBS_CRASH_ARMED;
  driver_report(name, exited && armed && driver_shared[2] == 0 && driver_shared[3] == 0x80000000u,
                "7 / 0 = %lld and INT_MIN / -1 = %lld without a signal (exit status %d), record %s",
                (long long)(int32_t)driver_shared[2], (long long)(int32_t)driver_shared[3],
                WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status),
                armed ? "still ARMED" : "not ARMED");
}

// MARK: - Unwinding

/// A leaf: no frame, LR never saved (nor signed), the fault in its body.
__attribute__((noinline)) void driver_leaf(int *pointer) { *pointer = 42; }

/// A frame record (x29/x30), its saved return address signed.
__attribute__((noinline)) void driver_unwind_c(int *pointer) {
  driver_shared[22] = ((const uint64_t *)__builtin_frame_address(0))[1];
  driver_leaf(pointer);
  driver_sink++;
}

int driver_compare(const void *left, const void *right) {
  driver_unwind_c((int *)(uintptr_t)DRIVER_WILD);
  return *(const int *)left - *(const int *)right;
}

/// No frame pointer: only CFI finds its caller. Calls libc (qsort), which calls back.
__attribute__((noinline, optimize("omit-frame-pointer"))) void driver_unwind_b(void) {
  int values[4] = {3, 1, 2, 0};
  qsort(values, 4, sizeof values[0], driver_compare);
  driver_sink += values[0];
}

__attribute__((noinline)) void driver_unwind_a(void) {
  // This frame's own saved return address as pointer authentication left it on the stack.
  driver_shared[4] = ((const uint64_t *)__builtin_frame_address(0))[1];
  driver_unwind_b();
  driver_sink++;
}

__attribute__((noinline)) void driver_unwind_child(const char *name) {
  driver_shared[23] = ((const uint64_t *)__builtin_frame_address(0))[1];
  driver_install(name);
  driver_unwind_a();
  driver_sink++;
}

/// The crash in a leaf under a callback from libc: every frame from the leaf to main, in order,
/// none with authentication bits, through libc's frames (CFI, its own module).
void driver_case_unwind(const char *name) {
  driver_shared[4] = driver_shared[22] = driver_shared[23] = 0;
  char why[256] = "", text[512] = "", frames[1024] = "";
  int status = driver_run_child(name, driver_unwind_child);
  const crumbs_crash_record *record = driver_read_record("unwind.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, DRIVER_WILD, why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  static const char *const expected[] = {"driver_leaf",         "driver_unwind_c",
                                         "driver_compare",      "<libc>",
                                         "driver_unwind_b",     "driver_unwind_a",
                                         "driver_unwind_child", "driver_run_child",
                                         "driver_case_unwind",  "main"};
  size_t next = 0, used = 0;
  for (uint32_t index = 0; record != NULL && index < record->frame_count && index < 24; index++) {
    uint64_t frame = record->frames[index];
    const char *symbol = driver_symbol(frame);
    bool libc = driver_in_libc(frame);
    used += (size_t)snprintf(frames + used, sizeof frames - used, "%s%s%s", index ? " < " : "", symbol,
                             record->frame_marks[index] & CRUMBS_FRAME_CFI ? "[cfi]" : "");
    if (used >= sizeof frames) used = sizeof frames - 1;
    if (passed && (frame >> 48) != 0) {
      snprintf(why, sizeof why, "frame %u 0x%llx keeps authentication bits", index,
               (unsigned long long)frame);
      passed = false;
    }
    if (next < sizeof expected / sizeof expected[0] &&
        (strcmp(expected[next], "<libc>") == 0 ? libc : strcmp(symbol, expected[next]) == 0)) {
      next++;
    }
  }
  if (passed && next != sizeof expected / sizeof expected[0]) {
    snprintf(why, sizeof why, "frames stop matching at %s", expected[next]);
    passed = false;
  }
  // The proof that the frames above were signed: the return addresses three frames saved carry
  // a code (each has 15 bits of it: one may be all zero by chance, three hardly).
  uint64_t saved = driver_shared[4];
  if ((saved >> 48) == 0) saved = driver_shared[22];
  if ((saved >> 48) == 0) saved = driver_shared[23];
  if (passed && (saved >> 48) == 0) {
    snprintf(why, sizeof why, "return addresses are not signed (saved 0x%llx): run under -cpu max",
             (unsigned long long)saved);
    passed = false;
  }
  driver_report(name, passed, "%s; signed return address 0x%llx; %s%s%s", text, (unsigned long long)saved,
                frames, passed ? "" : ": ", why);
}

// MARK: - The ESR record

/// A signal frame's mcontext as a kernel lays it out for a fault: an FPSIMD record, then the
/// ESR record, then the terminating zero. qemu-user writes no ESR record, so the reading of
/// one (crumbs_context.c) is proven on a context made here, as the kernel's signal frame has it.
static void driver_context_with_esr(ucontext_t *context, uint64_t esr) {
  memset(context, 0, sizeof *context);
  unsigned char *area = context->uc_mcontext.__reserved;
  uint32_t fpsimd[2] = {0x46508001u, 528u}, esr_head[2] = {0x45535201u, 16u};
  memcpy(area, fpsimd, sizeof fpsimd);
  memcpy(area + 528, esr_head, sizeof esr_head);
  memcpy(area + 536, &esr, sizeof esr);
  context->uc_mcontext.pc = 0x1234;
}

void driver_case_esr_record(const char *name) {
  ucontext_t context;
  uint64_t registers[CRUMBS_CRASH_MAX_REGISTERS];
  crumbs__context_registers start;
  // A data abort (class 0x24) that wrote (WnR), an instruction abort (0x20), and no record.
  driver_context_with_esr(&context, 0x92000046u);
  uint32_t count = crumbs__context_copy_registers(&context, registers, CRUMBS_CRASH_MAX_REGISTERS, &start);
  uint64_t data_abort = registers[DRIVER_ESR];
  uint32_t write_access = crumbs__context_fault_access(&context);
  driver_context_with_esr(&context, 0x8200000fu);
  uint32_t fetch_access = crumbs__context_fault_access(&context);
  memset(&context, 0, sizeof context);
  crumbs__context_copy_registers(&context, registers, CRUMBS_CRASH_MAX_REGISTERS, &start);
  uint64_t none = registers[DRIVER_ESR];
  uint32_t no_access = crumbs__context_fault_access(&context);
  bool passed = count == DRIVER_REGISTERS && data_abort == 0x92000046u &&
                write_access == (CRUMBS__ACCESS_KNOWN | CRUMBS__ACCESS_WRITE) &&
                fetch_access == (CRUMBS__ACCESS_KNOWN | CRUMBS__ACCESS_EXECUTE) && none == 0 &&
                no_access == 0;
  driver_report(name, passed,
                "%u registers; ESR record after an FPSIMD one read as 0x%llx (access %#x), an instruction "
                "abort's access %#x, none without a record (0x%llx, access %#x)",
                count, (unsigned long long)data_abort, write_access, fetch_access, (unsigned long long)none,
                no_access);
}

// MARK: - Frame records without CFI

void driver_records_outer(volatile int *pointer);

__attribute__((noinline)) void driver_records_child(const char *name) {
  driver_install(name);
  driver_records_outer((volatile int *)(uintptr_t)DRIVER_WILD);
  driver_sink++;
}

/// The fault in a leaf of code without CFI (arm64_driver_records.c): its caller from LR, theirs
/// from frame records whose return addresses are signed, then CFI again in the driver.
void driver_case_frame_records(const char *name) {
  char why[256] = "", text[512] = "", frames[512] = "";
  int status = driver_run_child(name, driver_records_child);
  const crumbs_crash_record *record = driver_read_record("frame-records.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, DRIVER_WILD, why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  static const char *const expected[] = {"driver_records_leaf", "driver_records_inner",
                                         "driver_records_outer", "driver_records_child", "driver_run_child"};
  static const uint8_t marks[] = {0, CRUMBS_FRAME_INSERTED, 0, 0, 0};
  size_t used = 0;
  for (uint32_t index = 0; record != NULL && index < record->frame_count && index < 8; index++) {
    used += (size_t)snprintf(frames + used, sizeof frames - used, "%s%s[%u]", index ? " < " : "",
                             driver_symbol(record->frames[index]), record->frame_marks[index]);
    if (used >= sizeof frames) used = sizeof frames - 1;
  }
  for (uint32_t index = 0; passed && index < sizeof expected / sizeof expected[0]; index++) {
    if (index >= record->frame_count || strcmp(driver_symbol(record->frames[index]), expected[index]) != 0 ||
        record->frame_marks[index] != marks[index]) {
      snprintf(why, sizeof why, "frame %u is not %s (mark %u)", index, expected[index], marks[index]);
      passed = false;
    }
  }
  driver_report(name, passed, "%s; %s%s%s", text, frames, passed ? "" : ": ", why);
}

// MARK: - A crash in a signal handler

/// A handler that faults: the unwind must cross the signal frame back into the interrupted code.
void driver_usr1_handler(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  (void)info;
  driver_shared[32] = ((const ucontext_t *)context)->uc_mcontext.pc; // where the signal came
  volatile int *volatile pointer = (volatile int *)(uintptr_t)DRIVER_WILD;
  *pointer = 3;
}

__attribute__((noinline)) void driver_interrupted_inner(void) {
  raise(SIGUSR1);
  driver_sink++;
}

__attribute__((noinline)) void driver_interrupted_outer(void) {
  driver_interrupted_inner();
  driver_sink++;
}

__attribute__((noinline)) void driver_signal_child(const char *name) {
  driver_install(name);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = driver_usr1_handler;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &action, NULL);
  driver_interrupted_outer();
  driver_sink++;
}

/// The fault inside a signal handler: after the handler, the signal trampoline (the vDSO's
/// __kernel_rt_sigreturn; qemu-user's own page), then exactly the interrupted pc, from the
/// ucontext on the signal frame, then its callers.
void driver_case_signal_handler(const char *name) {
  driver_shared[32] = 0;
  char why[256] = "", text[512] = "", frames[768] = "";
  int status = driver_run_child(name, driver_signal_child);
  const crumbs_crash_record *record = driver_read_record("signal-handler.crash");
  bool passed = driver_died_by(status, SIGSEGV, why, sizeof why) &&
                driver_check_record(record, SIGSEGV, DRIVER_WILD, why, sizeof why);
  if (record != NULL) driver_describe_record(record, text, sizeof text);
  size_t used = 0;
  int handler = -1, interrupted = -1, inner = -1, outer = -1;
  for (uint32_t index = 0; record != NULL && index < record->frame_count && index < 16; index++) {
    const char *symbol = driver_symbol(record->frames[index]);
    used += (size_t)snprintf(frames + used, sizeof frames - used, "%s%s[%u]", index ? " < " : "", symbol,
                             record->frame_marks[index]);
    if (used >= sizeof frames) used = sizeof frames - 1;
    if (handler < 0 && strcmp(symbol, "driver_usr1_handler") == 0) handler = (int)index;
    if (interrupted < 0 && record->frames[index] == driver_shared[32]) interrupted = (int)index;
    if (inner < 0 && strcmp(symbol, "driver_interrupted_inner") == 0) inner = (int)index;
    if (outer < 0 && strcmp(symbol, "driver_interrupted_outer") == 0) outer = (int)index;
  }
  if (passed && !(handler == 0 && interrupted == 2 && inner > interrupted && outer == inner + 1)) {
    snprintf(why, sizeof why, "handler at %d, interrupted pc 0x%llx at %d (not 2), inner at %d, outer at %d",
             handler, (unsigned long long)driver_shared[32], interrupted, inner, outer);
    passed = false;
  }
  driver_report(name, passed, "%s; %s%s%s", text, frames, passed ? "" : ": ", why);
}
