// crumbs_unwind_parts.h — what the unwinder's files share, and nothing else includes: the state of one
// unwind, the stack words and memory it reads, and the two helpers the main walk calls at each
// step (the Swift async chain, the stack scan). The unwinder's entry points for the rest of
// crash capture are its face, crumbs_unwind.h. Internal to CrumbsSignalPath.
//
// The unwinder's files, one idea each:
//   crumbs_unwind.c         the walk: per frame, leaf insertion, signal trampoline, CFI, frame
//                           pointer, then the scan; and after each step the async chain
//   crumbs_unwind_memory.c  memory the unwinder reads: through the kernel, a stack chunk at a time
//   crumbs_unwind_async.c   Swift async frames: the context below a frame record, its chain
//   crumbs_unwind_scan.c    return-address checks and the stack scan (the last resort)
// Registers come from a signal context through crumbs_context.c; a module's CFI and function
// starts through the module table (crumbs_modules.c). Calls point one way: the walk calls the
// async chain and the scan, and all three call the memory file.
//
// ASYNC-SIGNAL-SAFE: everything declared here (crumbs_unwind.c lists what each reads and calls).

#ifndef CRUMBS_UNWIND_PARTS_H
#define CRUMBS_UNWIND_PARTS_H

#include "unwind/crumbs_unwind.h"

#include <stdbool.h>
#include <stdint.h>

/// Bit 60 of a saved frame pointer: an async frame record (Darwin's convention).
#define CRUMBS__ASYNC_FRAME_BIT (1ull << 60)

/// One unwind in progress: the registers of the frame it is in, and the stack it walks.
typedef struct crumbs__unwind_state {
  crumbs__unwind_registers registers;
  bool exact;         // pc is the executing instruction (frame 0, after a signal frame)
  uint64_t low, high; // the stack being unwound
} crumbs__unwind_state;

/// Whether register `reg` (a DWARF number) holds a meaningful value. Pure.
static inline bool crumbs__unwind_known(const crumbs__unwind_registers *registers, uint32_t reg) {
  return reg < CRUMBS_CFI_REGISTERS && (registers->known >> reg & 1u);
}

// MARK: - Memory (crumbs_unwind_memory.c)

/// A word of the stack being unwound, when [address, address + 8) lies in [low, high) and is
/// readable; read through the kernel a 4 KiB chunk at a time, never by a plain load. Safe to
/// call from a signal handler (crumbs__crash_read_memory).
bool crumbs__unwind_stack_word(uint64_t low, uint64_t high, uint64_t address, uint64_t *value);
/// Forgets the stack chunk: a new unwind may read a stack that changed since. Any context.
void crumbs__unwind_forget_chunk(void);

// MARK: - Swift async frames (crumbs_unwind_async.c)

/// Whether the frame executing `inner_pc` whose record is at `record_at` (its saved frame
/// pointer `saved_fp`, its return address `return_address`) is a Swift async function resumed
/// by the executor: returns its async context, or 0. Safe to call from a signal handler.
uint64_t crumbs__unwind_async_context(const crumbs__module_table *modules, const crumbs__unwind_state *state,
                                      uint64_t inner_pc, uint64_t record_at, uint64_t saved_fp,
                                      uint64_t return_address);
/// Appends the resume points of the async callers, from `context` up its parent chain; returns
/// the new count. Safe to call from a signal handler.
uint32_t crumbs__unwind_async_chain(uint64_t context, uint64_t *frames, uint8_t *marks, uint32_t count,
                                    uint32_t capacity);

// MARK: - The stack scan (crumbs_unwind_scan.c)

/// Neither CFI nor a frame record could step from the frame executing `inner_pc` (exact: the
/// executing instruction, else a return address) whose sp was `inner_sp`: scans upward from
/// there for the next return address whose call can reach that frame, and moves `state` to it
/// (x86_64: the caller's sp is right above the slot). `scanned` counts the bytes read by every
/// scan of this unwind (bounded). False when none is found. Safe to call from a signal handler.
bool crumbs__unwind_scan(const crumbs__module_table *modules, crumbs__unwind_state *state, uint64_t inner_pc,
                         bool inner_exact, uint64_t inner_sp, uint64_t *scanned, uint64_t *found);

#endif // CRUMBS_UNWIND_PARTS_H
