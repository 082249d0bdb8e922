// crumbs_context.c — every read of a signal context (`ucontext_t`) and of a clock on the signal
// path (crumbs_context.h says why they are kept in one file).
//
// Entry points:
//   crumbs__context_clock_ns            a clock in nanoseconds
//   crumbs__context_copy_registers      a context's registers as the crash record keeps them
//   crumbs__context_unwind_registers    a context's registers by DWARF number, for the unwinder
//   crumbs__context_register_offsets    where a ucontext in memory keeps them (signal trampolines)
//   crumbs__context_pc, crumbs__context_fault_access  a fault's pc and access (first chance)
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio. libc calls:
// clock_gettime (vDSO). Bound at install (crumbs_crash_install.c calls it once).

#define _GNU_SOURCE
#include "kit/crumbs_context.h"

#include <stddef.h>
#include <ucontext.h>

// MARK: - Clocks

uint64_t crumbs__context_clock_ns(clockid_t clock) {
  struct timespec now;
  clock_gettime(clock, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

// MARK: - Registers

#if defined(__aarch64__)
/// The fault's ESR (exception syndrome register) from the records the kernel lays out after
/// `pstate` in the signal frame's mcontext (`__reserved`: each record a u32 magic and a u32
/// size, the last magic 0), 0 when there is no ESR record (a signal that is no fault). Found
/// from `pstate`, not by the area's name, which glibc and musl spell differently. Bounded by the
/// area's 4096 bytes. Pure.
static uint64_t crumbs__context_esr(const ucontext_t *context) {
  const unsigned char *area =
      (const unsigned char *)(((uintptr_t)(&context->uc_mcontext.pstate + 1) + 15u) & ~(uintptr_t)15u);
  enum { AREA_SIZE = 4096, ESR_MAGIC = 0x45535201 };
  for (uint32_t offset = 0; offset + 16 <= AREA_SIZE;) {
    uint32_t magic, size;
    __builtin_memcpy(&magic, area + offset, 4);
    __builtin_memcpy(&size, area + offset + 4, 4);
    if (magic == 0 || size < 8 || size > AREA_SIZE - offset) return 0;
    if (magic == ESR_MAGIC && size >= 16) {
      uint64_t esr;
      __builtin_memcpy(&esr, area + offset + 8, 8);
      return esr;
    }
    offset += size;
  }
  return 0;
}
#endif

#if defined(__x86_64__)
/// DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8…r15, as glibc's `gregs` indices.
static const int crumbs__dwarf_gregs[16] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                            REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                            REG_R12, REG_R13, REG_R14, REG_R15};
#endif

uint32_t crumbs__context_copy_registers(const void *raw_context, uint64_t *registers, uint32_t capacity,
                                        crumbs__context_registers *start) {
  const ucontext_t *context = (const ucontext_t *)raw_context;
  crumbs__context_registers result = {0, 0, 0, 0};
  uint32_t count = 0;
#if defined(__x86_64__)
  count = NGREG < capacity ? NGREG : capacity;
  for (uint32_t index = 0; index < count; index++) {
    registers[index] = (uint64_t)context->uc_mcontext.gregs[index];
  }
  result.pc = (uint64_t)context->uc_mcontext.gregs[REG_RIP];
  result.fp = (uint64_t)context->uc_mcontext.gregs[REG_RBP];
  result.sp = (uint64_t)context->uc_mcontext.gregs[REG_RSP];
  // After a `call` to a bad address (or a fault in a frameless leaf's first instruction), the
  // caller's return address is the word at [sp]; only readable once the stack range is known,
  // so the caller fills `leaf_return` later.
#elif defined(__aarch64__)
  uint64_t all[36];
  for (uint32_t index = 0; index < 31; index++) all[index] = (uint64_t)context->uc_mcontext.regs[index];
  all[31] = (uint64_t)context->uc_mcontext.sp;
  all[32] = (uint64_t)context->uc_mcontext.pc;
  all[33] = (uint64_t)context->uc_mcontext.pstate;
  all[34] = (uint64_t)context->uc_mcontext.fault_address;
  all[35] = crumbs__context_esr(context);
  count = 36 < capacity ? 36 : capacity;
  for (uint32_t index = 0; index < count; index++) registers[index] = all[index];
  result.pc = (uint64_t)context->uc_mcontext.pc;
  result.fp = (uint64_t)context->uc_mcontext.regs[29];
  result.sp = (uint64_t)context->uc_mcontext.sp;
  result.leaf_return = crumbs__context_code_address((uint64_t)context->uc_mcontext.regs[30]); // LR
#else
  (void)context;
  (void)registers;
  (void)capacity;
#endif
  *start = result;
  return count;
}

void crumbs__context_unwind_registers(const void *ucontext, crumbs__unwind_registers *out) {
  for (unsigned index = 0; index < CRUMBS_CFI_REGISTERS; index++) out->values[index] = 0;
  out->known = 0;
  out->pc = 0;
  if (ucontext == NULL) return;
  const ucontext_t *context = (const ucontext_t *)ucontext;
#if defined(__x86_64__)
  for (unsigned index = 0; index < 16; index++) {
    out->values[index] = (uint64_t)context->uc_mcontext.gregs[crumbs__dwarf_gregs[index]];
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

uint32_t crumbs__context_register_offsets(uint64_t *offsets, uint32_t capacity, uint64_t *pc_offset) {
#if defined(__x86_64__)
  // The kernel's rt_sigframe ucontext: uc_flags, uc_link, uc_stack (24 bytes), then mcontext's
  // gregs, which glibc's and musl's ucontext_t both lay out the same way.
  const uint64_t gregs = offsetof(ucontext_t, uc_mcontext.gregs);
  _Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "the kernel's ucontext layout");
  uint32_t count = capacity < 16 ? capacity : 16;
  for (uint32_t index = 0; index < count; index++) {
    offsets[index] = gregs + 8u * (uint64_t)crumbs__dwarf_gregs[index];
  }
  *pc_offset = gregs + 8u * (uint64_t)REG_RIP;
  return count;
#elif defined(__aarch64__)
  // The kernel's ucontext: uc_flags, uc_link, uc_stack (24 bytes), a sigset padded to 128 bytes,
  // then the 16-byte aligned sigcontext: fault_address, regs[31], sp, pc. glibc's ucontext_t
  // lays it out the same way (its sigset_t is those 128 bytes).
  const uint64_t mcontext = offsetof(ucontext_t, uc_mcontext);
  _Static_assert(offsetof(ucontext_t, uc_mcontext) == 176, "the kernel's ucontext layout");
  _Static_assert(offsetof(mcontext_t, regs) == 8 && offsetof(mcontext_t, sp) == 256 &&
                     offsetof(mcontext_t, pc) == 264,
                 "the kernel's sigcontext layout");
  uint32_t count = capacity < 32 ? capacity : 32; // x0…x30, sp: DWARF 0…31
  for (uint32_t index = 0; index < count; index++) {
    offsets[index] = mcontext +
                     (index < 31 ? offsetof(mcontext_t, regs) + 8u * index : offsetof(mcontext_t, sp));
  }
  *pc_offset = mcontext + offsetof(mcontext_t, pc);
  return count;
#else
  (void)offsets;
  (void)capacity;
  *pc_offset = 0;
  return 0;
#endif
}

uint64_t crumbs__context_pc(const void *ucontext) {
  if (ucontext == NULL) return 0;
  const ucontext_t *context = (const ucontext_t *)ucontext;
#if defined(__x86_64__)
  return (uint64_t)context->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uint64_t)context->uc_mcontext.pc;
#else
  (void)context;
  return 0;
#endif
}

uint32_t crumbs__context_fault_access(const void *ucontext) {
  if (ucontext == NULL) return 0;
  const ucontext_t *context = (const ucontext_t *)ucontext;
#if defined(__x86_64__)
  // The page fault's error code as the kernel passes it: bit 1 a write, bit 4 a fetch.
  uint64_t error = (uint64_t)context->uc_mcontext.gregs[REG_ERR];
  uint32_t access = CRUMBS__ACCESS_KNOWN;
  if (error & 2u) access |= CRUMBS__ACCESS_WRITE;
  if (error & 16u) access |= CRUMBS__ACCESS_EXECUTE;
  return access;
#elif defined(__aarch64__)
  // ESR_ELx: the exception class in bits 31..26; a data abort's WnR (bit 6) says a write, and
  // its CM (bit 8) a cache maintenance, which the architecture reports as a write too.
  uint64_t esr = crumbs__context_esr(context);
  uint32_t exception_class = (uint32_t)(esr >> 26) & 0x3fu;
  if (exception_class == 0x20 || exception_class == 0x21)
    return CRUMBS__ACCESS_KNOWN | CRUMBS__ACCESS_EXECUTE;
  if (exception_class != 0x24 && exception_class != 0x25) return 0;
  uint32_t access = CRUMBS__ACCESS_KNOWN;
  if ((esr & (1u << 6)) && !(esr & (1u << 8))) access |= CRUMBS__ACCESS_WRITE;
  return access;
#else
  (void)context;
  return 0;
#endif
}
