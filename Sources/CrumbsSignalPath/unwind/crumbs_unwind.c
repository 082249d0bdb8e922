// crumbs_unwind.c — a thread's backtrace: CFI, frame pointers, async contexts, and a checked
// stack scan last, each frame marked with how it was found. This file is the walk; the pieces it
// calls each have their own (crumbs_unwind_parts.h lists them).
// Design (why CFI first, memory reads, aarch64): docs/crash-capture.md#unwind-a-threads-backtrace
//
// Entry points, in call order:
//   crumbs__context_unwind_registers   the interrupted registers, DWARF-numbered (crumbs_context.c)
//   crumbs__unwind               the whole backtrace, a CRUMBS_FRAME_* mark each; per frame
//                                      the first that works of leaf insertion, signal trampoline,
//                                      CFI, frame pointer, stack scan; then the Swift async chain
//   crumbs__unwind_walk_frames          the plain frame-pointer walk (non-fatal captures)
//
// ASYNC-SIGNAL-SAFE: everything in this file and the unwinder's others. No malloc, no locks, no
// stdio. libc calls: syscall(SYS_gettid, SYS_process_vm_readv) (stack words, async contexts:
// crumbs_unwind_memory.c; stack words are never plain loads), memcpy, and
// crumbs__crash_mapping_containing (open/read/close of /proc/thread-self/maps) at a signal
// trampoline outside every module (aarch64) and after one. Every loop is bounded: frames by the capacity, steps by twice that, the scan by
// 64 KiB of stack, the async chain by the capacity.

#include "unwind/crumbs_cfi.h"
#include "unwind/crumbs_unwind_parts.h"

#include <errno.h>

uint32_t crumbs__unwind_walk_frames(uint64_t pc, uint64_t fp, uint64_t sp, uint64_t low, uint64_t high,
                                    uint64_t *frames, uint32_t capacity, uint32_t *stop) {
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
    uint64_t return_address = crumbs__context_code_address(record[1]);
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

// MARK: - One step

/// How a step ended.
enum { CRUMBS__STEP_FAILED = 0, CRUMBS__STEP_OK = 1, CRUMBS__STEP_END = 2 };

/// The register a step read the caller's frame pointer from (0: none), for the async check.
typedef struct crumbs__step_result {
  uint8_t mark;
  uint64_t saved_fp_at;
} crumbs__step_result;

/// One step by the module's CFI.
static int crumbs__step_cfi(const crumbs__module_table *modules, crumbs__unwind_state *state,
                            crumbs__step_result *result) {
  crumbs__unwind_registers *registers = &state->registers;
  uint64_t lookup = state->exact ? registers->pc : registers->pc - 1;
  crumbs__cfi_region region;
  uint64_t header = 0;
  if (!crumbs__modules_cfi_for(modules, lookup, &region, &header)) return CRUMBS__STEP_FAILED;
  crumbs__cfi_row row;
  if (crumbs__cfi_row_at(&region, header, lookup, &row) != CRUMBS_CFI_OK) return CRUMBS__STEP_FAILED;
  if (row.cfa_is_expression || !crumbs__unwind_known(registers, row.cfa_register)) return CRUMBS__STEP_FAILED;
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
      if (!crumbs__unwind_stack_word(floor, state->high, at, &word)) {
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
      if (value < 0 || value >= (int64_t)CRUMBS_CFI_REGISTERS ||
          !crumbs__unwind_known(registers, (uint32_t)value)) {
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
  if (!crumbs__unwind_known(&caller, row.return_register)) return CRUMBS__STEP_FAILED;
  // A signed return address (pointer authentication) is stripped, never followed as it is.
  uint64_t return_address = crumbs__context_code_address(caller.values[row.return_register]);
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
  result->mark = crumbs__unwind_known(registers, CRUMBS__REG_FP) && return_at != 0 && return_at == fp + 8
                     ? 0
                     : CRUMBS_FRAME_CFI;
  state->registers = caller;
  state->exact = row.signal_frame;
  return CRUMBS__STEP_OK;
}

/// One step by the frame record at fp: [fp] = caller's fp, [fp + 8] = return address.
static int crumbs__step_frame_pointer(crumbs__unwind_state *state, crumbs__step_result *result) {
  crumbs__unwind_registers *registers = &state->registers;
  if (!crumbs__unwind_known(registers, CRUMBS__REG_FP)) return CRUMBS__STEP_FAILED;
  uint64_t fp = registers->values[CRUMBS__REG_FP];
  uint64_t sp = registers->values[CRUMBS__REG_SP];
  // Nothing below the stack pointer belongs to a live frame (the x86_64 red zone holds no frame
  // record), and callers' records sit strictly higher: this rules out loops.
  if (fp == 0 || fp < sp || fp < state->low || state->high < 16 || fp > state->high - 16) {
    return CRUMBS__STEP_FAILED;
  }
  uint64_t next = 0, return_address = 0;
  if (!crumbs__unwind_stack_word(state->low, state->high, fp, &next) ||
      !crumbs__unwind_stack_word(state->low, state->high, fp + 8, &return_address)) {
    return CRUMBS__STEP_FAILED;
  }
  return_address = crumbs__context_code_address(return_address);
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

/// Where the ucontext of the signal frame whose trampoline `state` has reached lies (0: `state`
/// is at no trampoline). x86_64: glibc's __restore_rt (mov $15, %rax; syscall), whose FDE
/// describes the registers with expressions, which crumbs_cfi.c does not evaluate, so it is
/// recognized by its code, as libgcc does; the ucontext is at sp. aarch64: the kernel's
/// __kernel_rt_sigreturn in the vDSO (mov x8, #139; svc #0), or wherever a signal's sa_restorer
/// or an emulator (qemu-user) put the same two instructions, in a page of no module; the
/// ucontext follows the 128-byte siginfo at sp (the kernel's rt_sigframe).
static uint64_t crumbs__signal_frame_context(const crumbs__module_table *modules,
                                             const crumbs__unwind_state *state) {
  uint64_t pc = state->registers.pc;
  if (state->exact) return 0;
#if defined(__x86_64__)
  int module = crumbs__modules_for_text(modules, pc);
  if (module < 0 || pc + 9 > modules->rows[module].text_end) return 0;
  static const uint8_t restore_rt[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)pc;
  for (unsigned index = 0; index < sizeof restore_rt; index++) {
    if (code[index] != restore_rt[index]) return 0;
  }
  return state->registers.values[CRUMBS__REG_SP];
#elif defined(__aarch64__)
  if ((pc & 3u) != 0) return 0;
  uint32_t code[2] = {0, 0};
  int module = crumbs__modules_for_text(modules, pc);
  uint64_t low = 0, high = 0;
  // In a module's text (the vDSO), a plain load; elsewhere (a page of its own) through the
  // kernel, or, only where that call is refused (not EFAULT: unmapped or guarded), inside a
  // readable mapping /proc/self/maps shows.
  bool readable = false;
  if (module >= 0) {
    readable = pc + 8 <= modules->rows[module].text_end;
  } else if (!crumbs__unwind_read_anywhere(pc, code, sizeof code)) {
    readable = errno != EFAULT && crumbs__crash_mapping_containing(pc, &low, &high) && pc + 8 <= high;
  }
  if (readable) {
    const volatile uint32_t *text = (const volatile uint32_t *)(uintptr_t)pc;
    code[0] = text[0];
    code[1] = text[1];
  }
  if (code[0] != 0xd2801168u || code[1] != 0xd4000001u) return 0;
  return state->registers.values[CRUMBS__REG_SP] + 128u;
#else
  (void)modules;
  (void)pc;
  return 0;
#endif
}

/// One step through a signal trampoline: the interrupted registers from the ucontext its frame
/// holds on the stack (crumbs_context.c knows where it keeps each register).
static int crumbs__step_signal_frame(const crumbs__module_table *modules, crumbs__unwind_state *state,
                                     crumbs__step_result *result) {
  uint64_t context = crumbs__signal_frame_context(modules, state);
  if (context == 0) return CRUMBS__STEP_FAILED;
  uint64_t offsets[CRUMBS_CFI_REGISTERS], pc_offset = 0;
  uint32_t count = crumbs__context_register_offsets(offsets, CRUMBS_CFI_REGISTERS, &pc_offset);
  if (count == 0) return CRUMBS__STEP_FAILED;
  crumbs__unwind_registers interrupted = state->registers;
  for (unsigned index = 0; index < count; index++) {
    uint64_t *value = &interrupted.values[index];
    if (!crumbs__unwind_stack_word(state->low, state->high, context + offsets[index], value)) {
      return CRUMBS__STEP_FAILED;
    }
  }
  if (!crumbs__unwind_stack_word(state->low, state->high, context + pc_offset, &interrupted.pc)) {
    return CRUMBS__STEP_FAILED;
  }
  interrupted.known = count >= 64 ? ~0ull : (1ull << count) - 1u;
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
}

// MARK: - The backtrace

uint32_t crumbs__unwind(const crumbs__module_table *modules, const crumbs__unwind_registers *registers,
                        uint64_t low, uint64_t high, uint64_t *frames, uint8_t *marks, uint32_t capacity,
                        uint32_t *stop) {
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
  crumbs__unwind_forget_chunk();
  crumbs__unwind_state state = {.registers = *registers, .exact = true, .low = low, .high = high};
  uint64_t scanned = 0;
  *stop = CRUMBS_BACKTRACE_END_OF_CHAIN;

  // Frame 0 outside every module: control went to a bad address (a call through a garbage
  // pointer), and the caller's return address is at [sp] (x86_64) or in LR (aarch64).
  if (crumbs__modules_for_text(modules, registers->pc) < 0) {
    uint64_t caller = 0;
#if defined(__x86_64__)
    uint64_t sp = registers->values[CRUMBS__REG_SP];
    if (crumbs__unwind_stack_word(low, high, sp, &caller) && crumbs__modules_for_text(modules, caller) >= 0 &&
        count < capacity) {
      state.registers.values[CRUMBS__REG_SP] = sp + 8;
#elif defined(__aarch64__)
    caller = crumbs__context_code_address(registers->values[CRUMBS__REG_LR]);
    if (crumbs__modules_for_text(modules, caller) >= 0 && count < capacity) {
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
    int outcome = crumbs__step_signal_frame(modules, &state, &result);
    if (outcome == CRUMBS__STEP_FAILED) outcome = crumbs__step_cfi(modules, &state, &result);
    if (outcome == CRUMBS__STEP_FAILED && inner_exact && count == 1) {
      // Frame 0 in code without CFI: a fault inside a function that keeps no frame leaves its
      // caller only at [sp] / in LR, while the frame pointer still names the caller's caller.
      // Take it when it is a real return address the frame record would not give anyway.
      uint64_t caller = 0, fp = state.registers.values[CRUMBS__REG_FP], recorded = 0;
#if defined(__x86_64__)
      bool have = crumbs__unwind_stack_word(state.low, state.high, inner_sp, &caller);
#elif defined(__aarch64__)
      bool have = crumbs__unwind_known(&state.registers, CRUMBS__REG_LR);
      caller = crumbs__context_code_address(state.registers.values[CRUMBS__REG_LR]);
#else
      bool have = false;
#endif
      if (have && crumbs__unwind_is_return_address(modules, caller) &&
          crumbs__unwind_stack_word(state.low, state.high, fp + 8, &recorded) && recorded != caller &&
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
                             ? crumbs__unwind_async_context(modules, &state,
                                                            inner_exact ? inner_pc : inner_pc - 1,
                                                            result.saved_fp_at, saved_fp, state.registers.pc)
                             : 0;
      if (context != 0) {
        count = crumbs__unwind_async_chain(context, frames, marks, count, capacity);
        if (count >= capacity) continue;
        state.registers.values[CRUMBS__REG_FP] = saved_fp & ~CRUMBS__ASYNC_FRAME_BIT;
      }
      frames[count] = state.registers.pc;
      marks[count++] = result.mark;
      continue;
    }

    // Neither CFI nor a frame record: the stack scan (crumbs_unwind_scan.c).
    uint64_t guessed = 0;
    if (!crumbs__unwind_scan(modules, &state, inner_pc, inner_exact, inner_sp, &scanned, &guessed)) {
      *stop = state.registers.values[CRUMBS__REG_FP] == 0 ? CRUMBS_BACKTRACE_END_OF_CHAIN
                                                          : CRUMBS_BACKTRACE_OUT_OF_BOUNDS;
      return count;
    }
    frames[count] = guessed;
    marks[count++] = CRUMBS_FRAME_GUESSED;
  }
  *stop = CRUMBS_BACKTRACE_FULL;
  return count;
}
