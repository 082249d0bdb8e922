// crumbs_unwind.c — the crashing thread's backtrace: CFI, frame pointers, async contexts, and a
// checked stack scan last, each frame marked with how it was found.
//
// Why C: it runs inside the crash handler (a signal handler), on a thread whose memory may be
// corrupt, where the Swift runtime must not run.
//
// Entry points, in call order:
//   crumbs__unwind_registers_from_context   the interrupted registers, DWARF-numbered
//   crumbs__crash_unwind                    the whole backtrace with a CRUMBS_FRAME_* mark each;
//     per frame, the first that works of:
//       leaf insertion      frame 0 outside every module (a call through a bad pointer): the
//                           caller is at [sp] / in LR (CRUMBS_FRAME_INSERTED)
//       signal trampoline   x86_64 __restore_rt: the interrupted registers from its ucontext
//       CFI                 the module's .eh_frame (crumbs_cfi.c), found through the
//                           .eh_frame_hdr recorded with the module row (crumbs_modules.c);
//                           CRUMBS_FRAME_CFI unless the return address was the one a frame
//                           record holds, so a frame-pointer build reads as before
//       frame pointer       [fp] / [fp + 8] (no mark)
//       stack scan          the next word above sp that is a return address whose call can
//                           reach the inner frame (CRUMBS_FRAME_GUESSED); the unwind resumes
//                           from it exactly as from any frame
//     and after each step, the Swift async chain when the frame was an async function resumed by
//     the concurrency runtime (CRUMBS_FRAME_ASYNC, crumbs__async_chain)
//   crumbs__crash_walk_frames               the plain frame-pointer walk (non-fatal captures)
//
// Why CFI whenever a frame has an FDE, not only where frame pointers are missing: it is exact at
// every instruction (a prologue, an epilogue, a leaf that keeps no frame, glibc built without
// frame pointers, where the frame-pointer register holds anything), whereas a frame-pointer
// walk silently skips the caller in those places. Where both apply they agree, and the frame is
// left unmarked. It costs a binary search and a short program per frame (a few microseconds).
// Frame pointers remain the fallback for code without .eh_frame, and the scan the last resort.
//
// Swift async frames on Linux: the compiler here does not set bit 60 of the saved frame pointer
// (checked by disassembling Swift 6.3 output for x86_64; it does on Darwin), and the runtime
// backtracer recognizes async functions by their mangled names, which a handler cannot read. So
// a frame is taken as async when its return address lies in the Swift concurrency runtime (the
// executor calls a resume function directly; an async function is never called otherwise) and
// the word below its frame record is an async context whose resume pointer starts a function
// (bit 60, when some toolchain sets it, is taken at its word). The chain then follows
// context → (parent, resume function) like the runtime backtracer, reading the heap through
// process_vm_readv, which fails with EFAULT instead of faulting.
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio. libc calls:
// syscall(SYS_gettid, SYS_process_vm_readv) (stack words, async contexts), memcpy, and
// crumbs__crash_mapping_containing (open/read/close of /proc/thread-self/maps) after a signal
// trampoline. Stack words are never plain loads: they are copied through the kernel a 4 KiB
// chunk at a time (crumbs__stack_word), because the stack's bounds may come from
// /proc/self/maps, which does not show guard regions installed inside a mapping
// (MADV_GUARD_INSTALL: glibc 2.42's thread stacks, Linux 6.13+), and a stack overflow leaves the
// SP in one; such a word reads as absent, the way EFAULT says. (Where process_vm_readv is
// refused — a seccomp filter, ENOSYS — stack words fall back to plain loads.) Plain loads
// otherwise only from the text of modules in the record's module table (return-address checks)
// and the segment holding a module's .eh_frame_hdr, of rows checked at the crash (crumbs_modules.c:
// a dlclose'd library's row is marked unloaded the first time a lookup lands in it, and never
// read). A fault despite all this makes the handler finish a partial record and die
// by the original signal (crumbs_crash_handler.c); it never loops.
// Every loop is bounded: frames by the capacity, steps by twice that, the scan by 64 KiB of
// stack, the async chain by the capacity.
//
// aarch64: CFI and frame records use x29/x30/sp and a leaf's caller comes from LR, but the
// signal trampoline (the vDSO's __kernel_rt_sigreturn) is not recognized, a direct call's PLT
// stub is not followed, and a scanned frame's sp is a guess (x86_64's is exact: right above the
// return address). Only x86_64 is tested here.
//
// Why the bounds come from /proc/self/maps when nothing better is registered: a thread's stack
// range is known exactly only from pthread_getattr_np, which allocates and may not be called in
// a handler; so we take it at install / crumbs_crash_prepare_thread where we can, and otherwise
// the handler reads the mapping that holds the stack pointer (crumbs_maps.c). Every address
// from the stack pointer to the end of that mapping is mapped and readable.

#define _GNU_SOURCE
#include "crumbs_cfi.h"
#include "crumbs_crash_internal.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

uint32_t crumbs__crash_walk_frames(uint64_t pc, uint64_t fp, uint64_t sp, uint64_t low,
                                   uint64_t high, uint64_t *frames, uint32_t capacity,
                                   uint32_t *stop) {
  uint32_t count = 0;
  if (capacity == 0) {
    *stop = CRUMBS_BACKTRACE_FULL;
    return 0;
  }
  frames[count++] = pc;
  if (low >= high) {
    *stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
    return count;
  }
  // Nothing below the stack pointer belongs to a live frame (x86_64 leaf red zone aside, which
  // holds no frame record), so the lowest frame record we trust is at sp.
  uint64_t floor = sp > low ? sp : low;
  while (true) {
    if (count >= capacity) {
      *stop = CRUMBS_BACKTRACE_FULL;
      return count;
    }
    if (fp == 0) {
      *stop = CRUMBS_BACKTRACE_END_OF_CHAIN;
      return count;
    }
    if ((fp & 7u) != 0) {
      *stop = CRUMBS_BACKTRACE_MISALIGNED;
      return count;
    }
    if (fp < floor || fp > high - 16) {
      *stop = fp < floor && fp >= low ? CRUMBS_BACKTRACE_NOT_ASCENDING : CRUMBS_BACKTRACE_OUT_OF_BOUNDS;
      return count;
    }
    // A frame record: [fp] = caller's frame pointer, [fp + 8] = return address (x86_64 and
    // aarch64 AAPCS64 alike).
    const volatile uint64_t *record = (const volatile uint64_t *)(uintptr_t)fp;
    uint64_t next = record[0];
    uint64_t return_address = record[1];
    if (return_address == 0) {
      *stop = CRUMBS_BACKTRACE_END_OF_CHAIN;
      return count;
    }
    frames[count++] = return_address;
    // Frames grow down, so callers' records sit strictly higher: this rules out loops.
    floor = fp + 16;
    fp = next;
  }
}

/// Whether `address` is a return address: inside a module's text, right after a call
/// instruction (x86_64: E8 rel32, or FF /2 with its ModRM byte at one of the usual distances;
/// aarch64: BL or BLR). Reads only that module's text, which is mapped and readable.
bool crumbs__crash_is_return_address(const crumbs_crash_record *record, uint64_t address) {
  int module = crumbs__crash_module_for_text(record, address - 1);
  if (module < 0) return false;
  uint64_t text_start = record->modules[module].text_start;
  if (address < text_start + 8) return false;
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)address;
#if defined(__x86_64__)
  if (code[-5] == 0xE8) return true;
  static const int distances[] = {2, 3, 6, 7};
  for (unsigned index = 0; index < sizeof distances / sizeof distances[0]; index++) {
    int distance = distances[index];
    if (code[-distance] == 0xFF && (code[-distance + 1] & 0x38) == 0x10) return true;
  }
  return false;
#elif defined(__aarch64__)
  uint32_t instruction = (uint32_t)code[-4] | (uint32_t)code[-3] << 8 | (uint32_t)code[-2] << 16 |
                         (uint32_t)code[-1] << 24;
  return (instruction & 0xFC000000u) == 0x94000000u || (instruction & 0xFFFFFC1Fu) == 0xD63F0000u;
#else
  return false;
#endif
}

// MARK: - Registers

#if defined(__x86_64__)
#define CRUMBS__REG_FP 6u
#define CRUMBS__REG_SP 7u
#elif defined(__aarch64__)
#define CRUMBS__REG_FP 29u
#define CRUMBS__REG_LR 30u
#define CRUMBS__REG_SP 31u
#else
#define CRUMBS__REG_FP 0u
#define CRUMBS__REG_SP 0u
#endif

/// Bit 60 of a saved frame pointer: an async frame record (Darwin's convention).
#define CRUMBS__ASYNC_FRAME_BIT (1ull << 60)

uint64_t crumbs__unwind_concurrency_runtime;

void crumbs__unwind_registers_from_context(const void *ucontext, crumbs__unwind_registers *out) {
  for (unsigned index = 0; index < CRUMBS_CFI_REGISTERS; index++) out->values[index] = 0;
  out->known = 0;
  out->pc = 0;
  if (ucontext == NULL) return;
  const ucontext_t *context = (const ucontext_t *)ucontext;
#if defined(__x86_64__)
  // DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8…r15.
  static const int order[16] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP,
                                REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
  for (unsigned index = 0; index < 16; index++) {
    out->values[index] = (uint64_t)context->uc_mcontext.gregs[order[index]];
  }
  out->known = 0xffffu;
  out->pc = (uint64_t)context->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  for (unsigned index = 0; index < 31; index++) {
    out->values[index] = (uint64_t)context->uc_mcontext.regs[index];
  }
  out->values[31] = (uint64_t)context->uc_mcontext.sp;
  out->known = 0xffffffffu;
  out->pc = (uint64_t)context->uc_mcontext.pc;
#endif
}

// MARK: - Memory the unwinder reads

/// Copies `size` bytes at `address` of this process through the kernel (process_vm_readv), so
/// an unmapped or guarded address fails with EFAULT instead of a signal. Returns the count
/// copied, or -1 with errno. Safe to call from a signal handler.
static long crumbs__kernel_read(uint64_t address, void *out, size_t size) {
  struct iovec local = {.iov_base = out, .iov_len = size};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)address, .iov_len = size};
  // Our own tid, not getpid(): the pid names the main thread, which has no memory to read once
  // it has ended (the thread capture lets asked threads end: crumbs_thread_capture.c).
  return syscall(SYS_process_vm_readv, syscall(SYS_gettid), &local, 1L, &remote, 1L, 0L);
}

/// Copies `size` bytes at `address`, anywhere (the heap), only through the kernel: false when it
/// cannot (unmapped, or process_vm_readv refused). Safe to call from a signal handler.
static bool crumbs__read_anywhere(uint64_t address, void *out, size_t size) {
  return address != 0 && crumbs__kernel_read(address, out, size) == (long)size;
}

/// Whether process_vm_readv works here: 1 yes, -1 refused (ENOSYS, EPERM: a seccomp filter, an
/// old kernel), 0 not tried yet. Only the first crashing thread reads memory, so a plain int.
static int crumbs__kernel_reads;

/// The one stack chunk (CRUMBS__CHUNK bytes, aligned) last read through the kernel: stack words
/// are read near each other, so one copy serves dozens of them.
#define CRUMBS__CHUNK 4096u
static uint64_t crumbs__chunk_address = 1; // 1: none (never aligned)
static bool crumbs__chunk_readable;
static uint8_t crumbs__chunk[CRUMBS__CHUNK];

bool crumbs__crash_read_memory(uint64_t address, void *out, size_t size) {
  if (address == 0 || size == 0) return false;
  if (crumbs__kernel_reads >= 0) {
    long copied = crumbs__kernel_read(address, out, size);
    if (copied == (long)size) {
      crumbs__kernel_reads = 1;
      return true;
    }
    if (copied >= 0 || errno == EFAULT || crumbs__kernel_reads > 0) return false;
    crumbs__kernel_reads = -1; // refused: plain loads from here on (the old way)
  }
  const volatile uint8_t *source = (const volatile uint8_t *)(uintptr_t)address;
  uint8_t *target = (uint8_t *)out;
  for (size_t index = 0; index < size; index++) target[index] = source[index];
  return true;
}

/// Forgets the stack chunk: a new unwind may read a stack that changed since.
static void crumbs__forget_chunk(void) { crumbs__chunk_address = 1; }

/// A word of the stack being unwound, when [address, address + 8) lies in [low, high) and is
/// readable. Never a plain load: the bounds may come from /proc/self/maps, which does not show a
/// guard region installed with MADV_GUARD_INSTALL inside a mapping (glibc 2.42 guards thread
/// stacks so, kernels 6.13 and later); a stack overflow puts the SP right there.
static bool crumbs__stack_word(uint64_t low, uint64_t high, uint64_t address, uint64_t *value) {
  if ((address & 7u) != 0 || address < low || high < 8 || address > high - 8) return false;
  uint64_t chunk = address & ~(uint64_t)(CRUMBS__CHUNK - 1);
  if (chunk != crumbs__chunk_address) {
    crumbs__chunk_address = chunk;
    crumbs__chunk_readable = crumbs__crash_read_memory(chunk, crumbs__chunk, CRUMBS__CHUNK);
  }
  if (!crumbs__chunk_readable) return false;
  __builtin_memcpy(value, crumbs__chunk + (address - chunk), sizeof *value);
  return true;
}

uint64_t crumbs__crash_readable_floor(uint64_t low, uint64_t high, uint64_t probe) {
  if (probe < low || probe >= high) return low;
  uint8_t byte = 0;
  uint64_t page = probe & ~(uint64_t)(CRUMBS__CHUNK - 1);
  if (crumbs__crash_read_memory(page > low ? page : low, &byte, 1)) return low;
  // At most 1 MiB of guard above the probe: far more than any guard a library installs.
  for (uint32_t pages = 0; pages < 256; pages++) {
    page += CRUMBS__CHUNK;
    if (page >= high) return low;
    if (crumbs__crash_read_memory(page, &byte, 1)) return page;
  }
  return low;
}

/// The CFI region and .eh_frame_hdr of the module whose text holds `address`.
static bool crumbs__cfi_for(const crumbs_crash_record *record, uint64_t address,
                            crumbs__cfi_region *region, uint64_t *header) {
  int module = crumbs__crash_module_for_text(record, address);
  if (module < 0) return false;
  const crumbs__module_cfi *cfi = &crumbs__crash_module_cfi[module];
  if (cfi->header == 0 || cfi->low >= cfi->high) return false;
  region->low = cfi->low;
  region->high = cfi->high;
  region->bytes = (const uint8_t *)(uintptr_t)cfi->low;
  *header = cfi->header;
  return true;
}

/// Start of the function holding `address` according to its module's FDE table, or 0.
static uint64_t crumbs__function_start(const crumbs_crash_record *record, uint64_t address) {
  crumbs__cfi_region region;
  uint64_t header = 0, fde = 0, start = 0, end = 0;
  if (!crumbs__cfi_for(record, address, &region, &header)) return 0;
  if (crumbs__cfi_find_fde(&region, header, address, &fde, &start, &end) != CRUMBS_CFI_OK) return 0;
  return start;
}

// MARK: - Return-address checks (the stack scan)

/// Where the direct call ending right before return address `address` goes, following a PLT
/// stub to its bound target; 0 when that cannot be known (an indirect call, another
/// architecture). Reads only module text, and a GOT slot inside the same module's loaded range.
static uint64_t crumbs__direct_call_target(const crumbs_crash_record *record, uint64_t address) {
#if defined(__x86_64__)
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)address;
  if (code[-5] != 0xE8) return 0;
  int32_t relative = (int32_t)((uint32_t)code[-4] | (uint32_t)code[-3] << 8 |
                               (uint32_t)code[-2] << 16 | (uint32_t)code[-1] << 24);
  uint64_t target = address + (uint64_t)(int64_t)relative;
  int module = crumbs__crash_module_for_text(record, target);
  if (module < 0 || target + 16 > record->modules[module].text_end) return target;
  // A PLT stub: jmp *slot(%rip), optionally after endbr64 and a bnd prefix.
  const volatile uint8_t *stub = (const volatile uint8_t *)(uintptr_t)target;
  uint64_t after = 0;
  if (stub[0] == 0xFF && stub[1] == 0x25) {
    after = 6;
  } else if (stub[0] == 0xF2 && stub[1] == 0xFF && stub[2] == 0x25) {
    after = 7;
  } else if (stub[0] == 0xF3 && stub[1] == 0x0F && stub[2] == 0x1E && stub[3] == 0xFA) {
    if (stub[4] == 0xF2 && stub[5] == 0xFF && stub[6] == 0x25) after = 11;
    if (stub[4] == 0xFF && stub[5] == 0x25) after = 10;
  }
  if (after == 0) return target; // an ordinary function of this module
  const volatile uint8_t *displacement = stub + after - 4;
  int32_t slot_offset = (int32_t)((uint32_t)displacement[0] | (uint32_t)displacement[1] << 8 |
                                  (uint32_t)displacement[2] << 16 | (uint32_t)displacement[3] << 24);
  uint64_t slot = target + after + (uint64_t)(int64_t)slot_offset;
  const crumbs_crash_module *owner = &record->modules[module];
  if (slot < owner->start || slot + 8 > owner->end || (slot & 7u) != 0) return 0;
  return *(const volatile uint64_t *)(uintptr_t)slot;
#elif defined(__aarch64__)
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)address;
  uint32_t instruction = (uint32_t)code[-4] | (uint32_t)code[-3] << 8 | (uint32_t)code[-2] << 16 |
                         (uint32_t)code[-1] << 24;
  if ((instruction & 0xFC000000u) != 0x94000000u) return 0; // not BL
  int64_t offset = (int64_t)((int32_t)(instruction << 6) >> 6) * 4;
  return address - 4 + (uint64_t)offset; // PLT stubs are not followed on aarch64
#else
  (void)record;
  (void)address;
  return 0;
#endif
}

/// Whether return address `candidate` can be the caller of the frame executing `inner` (an
/// instruction address, not a return address). False when its call is a direct one that cannot
/// have led there: with the inner function's FDE known, the call must go to that function's
/// start (through a PLT stub or not); without it, at least into the inner frame's module (so
/// never into code outside every module). A
/// stale return address left in dead stack by an earlier, deeper call fails this: it called
/// something else. (A tail call in between also fails it: a guessed frame is then lost, never
/// a wrong one added.)
static bool crumbs__can_call(const crumbs_crash_record *record, uint64_t candidate, uint64_t inner) {
  uint64_t target = crumbs__direct_call_target(record, candidate);
  if (target == 0) return true; // indirect: anything
  uint64_t inner_start = crumbs__function_start(record, inner);
  if (inner_start != 0) {
    if (target == inner_start) return true;
    // A target that starts another function we know cannot have led there; one that starts
    // none we know (a stub we cannot follow, code without CFI) proves nothing.
    return crumbs__function_start(record, target) != target;
  }
  // A direct call into a module never lands outside every module (JIT code, a bad address).
  int target_module = crumbs__crash_module_for_text(record, target);
  int inner_module = crumbs__crash_module_for_text(record, inner);
  return target_module < 0 || inner_module == target_module;
}

// MARK: - One step

typedef struct crumbs__unwind_state {
  crumbs__unwind_registers registers;
  bool exact;          // pc is the executing instruction (frame 0, after a signal frame)
  uint64_t low, high;  // the stack being unwound
} crumbs__unwind_state;

/// How a step ended.
enum { CRUMBS__STEP_FAILED = 0, CRUMBS__STEP_OK = 1, CRUMBS__STEP_END = 2 };

/// The register a step read the caller's frame pointer from (0: none), for the async check.
typedef struct crumbs__step_result {
  uint8_t mark;
  uint64_t saved_fp_at;
} crumbs__step_result;

static bool crumbs__known(const crumbs__unwind_registers *registers, uint32_t reg) {
  return reg < CRUMBS_CFI_REGISTERS && (registers->known >> reg & 1u);
}

/// One step by the module's CFI.
static int crumbs__step_cfi(const crumbs_crash_record *record, crumbs__unwind_state *state,
                            crumbs__step_result *result) {
  crumbs__unwind_registers *registers = &state->registers;
  uint64_t lookup = state->exact ? registers->pc : registers->pc - 1;
  crumbs__cfi_region region;
  uint64_t header = 0;
  if (!crumbs__cfi_for(record, lookup, &region, &header)) return CRUMBS__STEP_FAILED;
  crumbs__cfi_row row;
  if (crumbs__cfi_row_at(&region, header, lookup, &row) != CRUMBS_CFI_OK) return CRUMBS__STEP_FAILED;
  if (row.cfa_is_expression || !crumbs__known(registers, row.cfa_register)) return CRUMBS__STEP_FAILED;
  if (row.return_register >= CRUMBS_CFI_REGISTERS) return CRUMBS__STEP_FAILED;
  uint64_t sp = registers->values[CRUMBS__REG_SP];
  uint64_t cfa = registers->values[row.cfa_register] + (uint64_t)row.cfa_offset;
  if (cfa < sp || cfa > state->high) return CRUMBS__STEP_FAILED;
  // Saved registers lie at or above sp, and inside the stack: after a stack overflow sp can be
  // in the guard gap below it, which must not be read.
  uint64_t floor = sp > state->low ? sp : state->low;

  crumbs__unwind_registers caller = *registers;
  uint64_t return_at = 0;
  for (uint32_t reg = 0; reg < CRUMBS_CFI_REGISTERS; reg++) {
    int64_t value = row.values[reg];
    switch (row.rules[reg]) {
    case CRUMBS_CFI_SAME: break;
    case CRUMBS_CFI_UNDEFINED: caller.known &= ~(1ull << reg); break;
    case CRUMBS_CFI_OFFSET: {
      uint64_t at = cfa + (uint64_t)value, word = 0;
      if (!crumbs__stack_word(floor, state->high, at, &word)) {
        if (reg == row.return_register || reg == CRUMBS__REG_FP) return CRUMBS__STEP_FAILED;
        caller.known &= ~(1ull << reg);
        break;
      }
      caller.values[reg] = word;
      caller.known |= 1ull << reg;
      if (reg == row.return_register) return_at = at;
      if (reg == CRUMBS__REG_FP) result->saved_fp_at = at;
      break;
    }
    case CRUMBS_CFI_VAL_OFFSET:
      caller.values[reg] = cfa + (uint64_t)value;
      caller.known |= 1ull << reg;
      break;
    case CRUMBS_CFI_REGISTER:
      if (value < 0 || value >= (int64_t)CRUMBS_CFI_REGISTERS || !crumbs__known(registers, (uint32_t)value)) {
        caller.known &= ~(1ull << reg);
      } else {
        caller.values[reg] = registers->values[value];
        caller.known |= 1ull << reg;
      }
      break;
    default: // an expression we do not evaluate
      if (reg == row.return_register || reg == CRUMBS__REG_FP) return CRUMBS__STEP_FAILED;
      caller.known &= ~(1ull << reg);
      break;
    }
  }
  if (row.rules[row.return_register] == CRUMBS_CFI_UNDEFINED) return CRUMBS__STEP_END; // _start, clone
  if (!crumbs__known(&caller, row.return_register)) return CRUMBS__STEP_FAILED;
  uint64_t return_address = caller.values[row.return_register];
  // Frame 0 with nothing pushed yet (a leaf on aarch64) may keep the CFA at sp; past frame 0
  // the stack must grow toward the caller, or a damaged row could go round in circles.
  if (cfa == sp && !state->exact) return CRUMBS__STEP_FAILED;
  if (return_address == 0) return CRUMBS__STEP_END;
  caller.values[CRUMBS__REG_SP] = cfa;
  caller.known |= 1ull << CRUMBS__REG_SP;
  caller.pc = return_address;
  // The frame-pointer walk would have read this very return address from [fp + 8]: a frame
  // record, left unmarked. Anything else only CFI could find.
  uint64_t fp = registers->values[CRUMBS__REG_FP];
  result->mark = crumbs__known(registers, CRUMBS__REG_FP) && return_at != 0 && return_at == fp + 8
                     ? 0
                     : CRUMBS_FRAME_CFI;
  state->registers = caller;
  state->exact = row.signal_frame;
  return CRUMBS__STEP_OK;
}

/// One step by the frame record at fp: [fp] = caller's fp, [fp + 8] = return address.
static int crumbs__step_frame_pointer(crumbs__unwind_state *state, crumbs__step_result *result) {
  crumbs__unwind_registers *registers = &state->registers;
  if (!crumbs__known(registers, CRUMBS__REG_FP)) return CRUMBS__STEP_FAILED;
  uint64_t fp = registers->values[CRUMBS__REG_FP];
  uint64_t sp = registers->values[CRUMBS__REG_SP];
  // Nothing below the stack pointer belongs to a live frame (the x86_64 red zone holds no frame
  // record), and callers' records sit strictly higher: this rules out loops.
  if (fp == 0 || fp < sp || fp < state->low || state->high < 16 || fp > state->high - 16) {
    return CRUMBS__STEP_FAILED;
  }
  uint64_t next = 0, return_address = 0;
  if (!crumbs__stack_word(state->low, state->high, fp, &next) ||
      !crumbs__stack_word(state->low, state->high, fp + 8, &return_address)) {
    return CRUMBS__STEP_FAILED;
  }
  if (return_address == 0) return CRUMBS__STEP_END;
  registers->values[CRUMBS__REG_FP] = next;
  registers->values[CRUMBS__REG_SP] = fp + 16;
  registers->known |= 1ull << CRUMBS__REG_SP;
  registers->pc = return_address;
  state->exact = false;
  result->mark = 0;
  result->saved_fp_at = fp;
  return CRUMBS__STEP_OK;
}

/// The x86_64 signal trampoline (glibc's __restore_rt: mov $15, %rax; syscall): the
/// interrupted registers are in the ucontext at sp. Its FDE describes them with expressions,
/// which crumbs_cfi.c does not evaluate, so it is recognized by its code, as libgcc does.
static int crumbs__step_signal_frame(const crumbs_crash_record *record, crumbs__unwind_state *state,
                                     crumbs__step_result *result) {
#if defined(__x86_64__)
  uint64_t pc = state->registers.pc;
  int module = crumbs__crash_module_for_text(record, pc);
  if (state->exact || module < 0 || pc + 9 > record->modules[module].text_end) return CRUMBS__STEP_FAILED;
  static const uint8_t restore_rt[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)pc;
  for (unsigned index = 0; index < sizeof restore_rt; index++) {
    if (code[index] != restore_rt[index]) return CRUMBS__STEP_FAILED;
  }
  // ucontext_t at sp: uc_flags, uc_link, uc_stack (24 bytes), then mcontext's gregs.
  uint64_t gregs = state->registers.values[CRUMBS__REG_SP] + 40;
  static const int order[16] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP,
                                REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
  crumbs__unwind_registers interrupted = state->registers;
  for (unsigned index = 0; index < 16; index++) {
    if (!crumbs__stack_word(state->low, state->high, gregs + 8u * (uint64_t)order[index],
                            &interrupted.values[index])) {
      return CRUMBS__STEP_FAILED;
    }
  }
  if (!crumbs__stack_word(state->low, state->high, gregs + 8u * REG_RIP, &interrupted.pc)) {
    return CRUMBS__STEP_FAILED;
  }
  interrupted.known = 0xffffu;
  // The handler may have run on an alternate stack: the interrupted code's stack is another one.
  uint64_t sp = interrupted.values[CRUMBS__REG_SP];
  if (sp < state->low || sp >= state->high) {
    uint64_t low = 0, high = 0;
    if (!crumbs__crash_mapping_containing(sp, &low, &high)) return CRUMBS__STEP_FAILED;
    state->low = low;
    state->high = high;
  }
  state->registers = interrupted;
  state->exact = true;
  result->mark = CRUMBS_FRAME_CFI;
  result->saved_fp_at = 0;
  return CRUMBS__STEP_OK;
#else
  (void)record;
  (void)state;
  (void)result;
  return CRUMBS__STEP_FAILED; // aarch64's trampoline is in the vDSO: not recognized (yet)
#endif
}

// MARK: - Swift async frames

/// Whether the frame executing `inner_pc` whose record is at `record_at` (its saved frame
/// pointer `saved_fp`, its return address `return_address`) is a Swift async function resumed
/// by the executor: returns its async context, or 0.
static uint64_t crumbs__async_context(const crumbs_crash_record *record, const crumbs__unwind_state *state,
                                      uint64_t inner_pc, uint64_t record_at, uint64_t saved_fp,
                                      uint64_t return_address) {
  if (record_at < 8) return 0;
  uint64_t context = 0;
  if (!crumbs__stack_word(state->low, state->high, record_at - 8, &context) || context == 0) return 0;
  if (saved_fp & CRUMBS__ASYNC_FRAME_BIT) return context;
  uint64_t runtime = crumbs__unwind_concurrency_runtime;
  int runtime_module = runtime != 0 ? crumbs__crash_module_for_text(record, runtime) : -1;
  // The runtime's own frames call each other: only a frame outside it, called by it, is a
  // resumed async function.
  if (runtime_module < 0 || crumbs__crash_module_for_text(record, return_address - 1) != runtime_module ||
      crumbs__crash_module_for_text(record, inner_pc) == runtime_module) {
    return 0;
  }
  // An async context starts with its parent context and the function that resumes the parent:
  // that one must begin a function (an FDE starts there), which a random word rarely does.
  uint64_t words[2];
  if (!crumbs__read_anywhere(context, words, sizeof words)) return 0;
  if (words[1] == 0 || crumbs__function_start(record, words[1]) != words[1]) return 0;
  return context;
}

/// Appends the resume points of the async callers, from `context` up its parent chain.
static uint32_t crumbs__async_chain(uint64_t context, uint64_t *frames, uint8_t *marks, uint32_t count,
                                    uint32_t capacity) {
  for (uint32_t links = 0; context != 0 && count < capacity && links < capacity; links++) {
    uint64_t words[2]; // parent, resume function
    if ((context & 7u) != 0 || !crumbs__read_anywhere(context, words, sizeof words)) break;
    if (words[1] == 0) break;
    frames[count] = words[1] & ~CRUMBS__ASYNC_FRAME_BIT;
    marks[count] = CRUMBS_FRAME_ASYNC;
    count++;
    context = words[0];
  }
  return count;
}

// MARK: - The backtrace

/// The x86_64 stack scan's window and the total it may read (the scan may run several times).
#define CRUMBS__SCAN_WINDOW 32768u
#define CRUMBS__SCAN_BUDGET 65536u

uint32_t crumbs__crash_unwind(const crumbs_crash_record *record, const crumbs__unwind_registers *registers,
                              uint64_t low, uint64_t high, uint64_t *frames, uint8_t *marks,
                              uint32_t capacity, uint32_t *stop) {
  if (capacity == 0) {
    *stop = CRUMBS_BACKTRACE_FULL;
    return 0;
  }
  uint32_t count = 0;
  frames[count] = registers->pc;
  marks[count++] = 0;
  if (low >= high) {
    *stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
    return count;
  }
  crumbs__forget_chunk();
  crumbs__unwind_state state = {.registers = *registers, .exact = true, .low = low, .high = high};
  uint64_t scanned = 0;
  *stop = CRUMBS_BACKTRACE_END_OF_CHAIN;

  // Frame 0 outside every module: control went to a bad address (a call through a garbage
  // pointer), and the caller's return address is at [sp] (x86_64) or in LR (aarch64).
  if (crumbs__crash_module_for_text(record, registers->pc) < 0) {
    uint64_t sp = registers->values[CRUMBS__REG_SP], caller = 0;
#if defined(__x86_64__)
    if (crumbs__stack_word(low, high, sp, &caller) && crumbs__crash_module_for_text(record, caller) >= 0 &&
        count < capacity) {
      state.registers.values[CRUMBS__REG_SP] = sp + 8;
#elif defined(__aarch64__)
    caller = registers->values[CRUMBS__REG_LR];
    if (crumbs__crash_module_for_text(record, caller) >= 0 && count < capacity) {
#else
    if (false) {
#endif
      frames[count] = caller;
      marks[count++] = CRUMBS_FRAME_INSERTED;
      state.registers.pc = caller;
      state.exact = false;
    }
  }

  for (uint32_t steps = 0; steps < 2 * capacity; steps++) {
    if (count >= capacity) {
      *stop = CRUMBS_BACKTRACE_FULL;
      return count;
    }
    crumbs__step_result result = {0, 0};
    uint64_t inner_pc = state.registers.pc;
    bool inner_exact = state.exact;
    uint64_t inner_sp = state.registers.values[CRUMBS__REG_SP];
    int outcome = crumbs__step_signal_frame(record, &state, &result);
    if (outcome == CRUMBS__STEP_FAILED) outcome = crumbs__step_cfi(record, &state, &result);
    if (outcome == CRUMBS__STEP_FAILED && inner_exact && count == 1) {
      // Frame 0 in code without CFI: a fault inside a function that keeps no frame leaves its
      // caller only at [sp] / in LR, while the frame pointer still names the caller's caller.
      // Take it when it is a real return address the frame record would not give anyway.
      uint64_t caller = 0, fp = state.registers.values[CRUMBS__REG_FP], recorded = 0;
#if defined(__x86_64__)
      bool have = crumbs__stack_word(state.low, state.high, inner_sp, &caller);
#elif defined(__aarch64__)
      bool have = crumbs__known(&state.registers, CRUMBS__REG_LR);
      caller = state.registers.values[CRUMBS__REG_LR];
#else
      bool have = false;
#endif
      if (have && crumbs__crash_is_return_address(record, caller) &&
          crumbs__stack_word(state.low, state.high, fp + 8, &recorded) && recorded != caller &&
          fp >= inner_sp) {
        frames[count] = caller;
        marks[count++] = CRUMBS_FRAME_INSERTED;
        state.registers.pc = caller;
#if defined(__x86_64__)
        state.registers.values[CRUMBS__REG_SP] = inner_sp + 8;
#endif
        state.exact = false;
        continue;
      }
    }
    if (outcome == CRUMBS__STEP_FAILED) outcome = crumbs__step_frame_pointer(&state, &result);
    if (outcome == CRUMBS__STEP_END) {
      *stop = CRUMBS_BACKTRACE_END_OF_CHAIN;
      return count;
    }
    if (outcome == CRUMBS__STEP_OK) {
      uint64_t saved_fp = state.registers.values[CRUMBS__REG_FP];
      uint64_t context = result.saved_fp_at != 0
                             ? crumbs__async_context(record, &state, inner_exact ? inner_pc : inner_pc - 1,
                                                     result.saved_fp_at, saved_fp, state.registers.pc)
                             : 0;
      if (context != 0) {
        count = crumbs__async_chain(context, frames, marks, count, capacity);
        if (count >= capacity) continue;
        state.registers.values[CRUMBS__REG_FP] = saved_fp & ~CRUMBS__ASYNC_FRAME_BIT;
      }
      frames[count] = state.registers.pc;
      marks[count++] = result.mark;
      continue;
    }

    // Neither CFI nor a frame record: scan upward from sp for the next return address whose
    // call can reach the frame we are in, and resume the unwind from it (x86_64: the caller's
    // sp is then right above that slot).
    uint64_t slot = ((inner_sp > state.low ? inner_sp : state.low) + 7) & ~(uint64_t)7;
    uint64_t limit = state.high > 16 ? state.high - 16 : 0;
    if (slot + CRUMBS__SCAN_WINDOW < limit) limit = slot + CRUMBS__SCAN_WINDOW;
    uint64_t inner = inner_exact ? inner_pc : inner_pc - 1;
    bool found = false;
    for (; slot + 8 <= limit && scanned < CRUMBS__SCAN_BUDGET; slot += 8, scanned += 8) {
      uint64_t candidate = 0;
      if (!crumbs__stack_word(state.low, state.high, slot, &candidate)) break;
      if (candidate == inner_pc || !crumbs__crash_is_return_address(record, candidate)) continue;
      if (!crumbs__can_call(record, candidate, inner)) continue;
      found = true;
      break;
    }
    if (!found) {
      *stop = state.registers.values[CRUMBS__REG_FP] == 0 ? CRUMBS_BACKTRACE_END_OF_CHAIN
                                                          : CRUMBS_BACKTRACE_OUT_OF_BOUNDS;
      return count;
    }
    uint64_t candidate = 0;
    (void)crumbs__stack_word(state.low, state.high, slot, &candidate); // read just above
    frames[count] = candidate;
    marks[count++] = CRUMBS_FRAME_GUESSED;
    state.registers.pc = candidate;
    state.exact = false;
    state.registers.values[CRUMBS__REG_SP] = slot + 8;
    // When the callee pushed a frame record right after the call, [slot - 8] is the caller's
    // frame pointer; otherwise the register may still hold it (it is callee-saved).
    uint64_t saved = 0, saved_return = 0;
    if (crumbs__stack_word(state.low, state.high, slot - 8, &saved) && saved > slot &&
        crumbs__stack_word(state.low, state.high, saved + 8, &saved_return) &&
        crumbs__crash_is_return_address(record, saved_return)) {
      state.registers.values[CRUMBS__REG_FP] = saved;
      state.registers.known |= 1ull << CRUMBS__REG_FP;
    }
  }
  *stop = CRUMBS_BACKTRACE_FULL;
  return count;
}
