// crumbs_context.h — the one place the signal path reads a signal context (`ucontext_t`) or a
// clock (crumbs_context.c). Internal to CrumbsSignalPath (not in include/, so not imported by
// Swift).
//
// Why one file: the registers' names and order in a ucontext differ per architecture and libc
// (glibc's `gregs[REG_*]` on x86_64, `regs[]`/`sp`/`pc` on aarch64), and every reader of a crash
// needs them: the record's registers (crumbs_crash_record_write.c), the unwinder's start
// (crumbs_unwind.c), a signal trampoline's saved context on the stack (crumbs_unwind.c), the
// other threads' registers (crumbs_thread_capture.c). Clocks are read by the handler, the
// thread capture, the ring's anchors and the signal breadcrumbs' rate limit the same way.
// Having both here lets the crash handler, the record writer and the thread capture share them
// without depending on each other: handler → record → capture → context, one way.
//
// ASYNC-SIGNAL-SAFE: everything declared here. libc calls: clock_gettime (vDSO); the rest is
// pure (copies out of a context the caller holds).

#ifndef CRUMBS_CONTEXT_H
#define CRUMBS_CONTEXT_H

#include <stdint.h>
#include <time.h>

// MARK: - Clocks

/// `clock` in nanoseconds. Safe to call from a signal handler (clock_gettime, vDSO).
uint64_t crumbs__context_clock_ns(clockid_t clock);

// MARK: - Registers of a signal context

/// DWARF numbers of the registers the unwinder names (crumbs__unwind_registers.values).
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

/// The registers an unwind starts from.
typedef struct crumbs__context_registers {
  uint64_t pc, fp, sp, leaf_return;
} crumbs__context_registers;

/// Copies a signal context's (`ucontext_t *`) registers into `registers` (at most `capacity`,
/// in crumbs_crash_arch order) and returns how many; `start` gets those an unwind starts from
/// (leaf_return: aarch64's LR, its authentication code stripped; x86_64 leaves it 0, as [sp]
/// is read only once the stack is known). aarch64 adds the fault's ESR last, from the context's
/// ESR record (0 where the kernel wrote none). Safe to call from a signal handler (pure).
uint32_t crumbs__context_copy_registers(const void *context, uint64_t *registers, uint32_t capacity,
                                        crumbs__context_registers *start);

/// DWARF register numbers the rules are kept for: x86_64 uses 0…16 (16 is the return address
/// column, rip), aarch64 0…32 (29 fp, 30 lr, 31 sp). Rules for higher numbers (vector registers)
/// are parsed and dropped: an unwinder never needs them to find the caller.
#define CRUMBS_CFI_REGISTERS 33u

/// The registers an unwind starts from, by DWARF number (x86_64: rax rdx rcx rbx rsi rdi rbp
/// rsp r8…r15; aarch64: x0…x30, sp), `known` a bit per meaningful one, and the pc.
typedef struct crumbs__unwind_registers {
  uint64_t values[CRUMBS_CFI_REGISTERS];
  uint64_t known;
  uint64_t pc;
} crumbs__unwind_registers;

/// The registers of a signal handler's `ucontext_t *` (NULL: all unknown, pc 0).
/// Safe to call from a signal handler (copies).
void crumbs__context_unwind_registers(const void *ucontext, crumbs__unwind_registers *out);

/// Where a `ucontext_t` keeps its registers, as byte offsets from its start, for one that is
/// read from memory rather than held (the ucontext a signal trampoline's frame holds on the
/// stack): `offsets[i]` for DWARF register i, i < the returned count, and `pc_offset`. Returns
/// 0 where that layout is not known. Safe to call from a signal handler (pure).
uint32_t crumbs__context_register_offsets(uint64_t *offsets, uint32_t capacity, uint64_t *pc_offset);

/// The program counter of a signal handler's `ucontext_t *` (0 when NULL or unknown). Safe to
/// call from a signal handler (pure).
uint64_t crumbs__context_pc(const void *ucontext);

/// A code address as saved by the program (a return address from LR or from the stack), made a
/// plain address: aarch64 built with pointer authentication (-mbranch-protection, as
/// distributions build) keeps a signature in the unused top bits of every return address it
/// saves, which `xpaclri` strips (an instruction in the hint space: it does nothing on a CPU
/// without pointer authentication, where no address is signed either). Elsewhere the value
/// itself. Safe to call from a signal handler (one instruction).
static inline uint64_t crumbs__context_code_address(uint64_t value) {
#if defined(__aarch64__)
  register uint64_t link __asm__("x30") = value;
  __asm__("hint #7" : "+r"(link)); // xpaclri: strip x30's authentication code
  return link;
#else
  return value;
#endif
}

/// `crumbs__context_fault_access` bits.
enum {
  CRUMBS__ACCESS_KNOWN = 1u << 0,   // the context says how the faulting access touched memory
  CRUMBS__ACCESS_WRITE = 1u << 1,   // a store
  CRUMBS__ACCESS_EXECUTE = 1u << 2, // an instruction fetch
};

/// How the access that raised a memory fault (SIGSEGV, SIGBUS) touched memory, from the page
/// fault's error code in the context (x86_64) or its ESR record (aarch64: a data abort's WnR
/// bit, an instruction abort): CRUMBS__ACCESS_* bits, 0 where the context does not say. Safe to
/// call from a signal handler (pure).
uint32_t crumbs__context_fault_access(const void *ucontext);

#endif // CRUMBS_CONTEXT_H
