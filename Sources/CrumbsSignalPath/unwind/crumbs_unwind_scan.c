// crumbs_unwind_scan.c — the unwinder's last resort and its checks: whether a word is a return
// address, whether its call can have led to the frame below, and the stack scan that finds the
// next such word when neither CFI nor a frame record can step (CRUMBS_FRAME_GUESSED). The walk
// (crumbs_unwind.c) resumes from the scanned frame exactly as from any other.
//
// Why checked: a stale return address left in dead stack by an earlier, deeper call looks like
// any other. It is taken only when the call right before it can reach the frame being left
// (crumbs__unwind_can_call): a guessed frame may be lost, never a wrong one added.
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio. Reads stack words
// through crumbs_unwind_memory.c (syscall(SYS_process_vm_readv, SYS_gettid)); plain loads only
// from the text of modules in the record's module table, and a GOT slot inside the same
// module's loaded range (a PLT stub's target). Bounded: a 32 KiB window per scan, 64 KiB of
// stack per unwind.

#include "unwind/crumbs_unwind_parts.h"

/// The x86_64 stack scan's window and the total it may read (the scan may run several times).
#define CRUMBS__SCAN_WINDOW 32768u
#define CRUMBS__SCAN_BUDGET 65536u

/// Whether `address` is a return address: inside a module's text, right after a call
/// instruction (x86_64: E8 rel32, or FF /2 with its ModRM byte at one of the usual distances;
/// aarch64: BL or BLR). Reads only that module's text, which is mapped and readable.
bool crumbs__unwind_is_return_address(const crumbs__module_table *modules, uint64_t address) {
  int module = crumbs__modules_for_text(modules, address - 1);
  if (module < 0) return false;
  uint64_t text_start = modules->rows[module].text_start;
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

/// Where the direct call ending right before return address `address` goes, following a PLT
/// stub to its bound target; 0 when that cannot be known (an indirect call, another
/// architecture). Reads only module text, and a GOT slot inside the same module's loaded range.
static uint64_t crumbs__direct_call_target(const crumbs__module_table *modules, uint64_t address) {
#if defined(__x86_64__)
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)address;
  if (code[-5] != 0xE8) return 0;
  int32_t relative = (int32_t)((uint32_t)code[-4] | (uint32_t)code[-3] << 8 | (uint32_t)code[-2] << 16 |
                               (uint32_t)code[-1] << 24);
  uint64_t target = address + (uint64_t)(int64_t)relative;
  int module = crumbs__modules_for_text(modules, target);
  if (module < 0 || target + 16 > modules->rows[module].text_end) return target;
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
  const crumbs_crash_module *owner = &modules->rows[module];
  if (slot < owner->start || slot + 8 > owner->end || (slot & 7u) != 0) return 0;
  return *(const volatile uint64_t *)(uintptr_t)slot;
#elif defined(__aarch64__)
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)address;
  uint32_t instruction = (uint32_t)code[-4] | (uint32_t)code[-3] << 8 | (uint32_t)code[-2] << 16 |
                         (uint32_t)code[-1] << 24;
  (void)modules; // the table serves x86_64's PLT stubs: aarch64 does not follow them
  if ((instruction & 0xFC000000u) != 0x94000000u) return 0; // not BL
  int64_t offset = (int64_t)((int32_t)(instruction << 6) >> 6) * 4;
  return address - 4 + (uint64_t)offset; // PLT stubs are not followed on aarch64
#else
  (void)modules;
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
static bool crumbs__unwind_can_call(const crumbs__module_table *modules, uint64_t candidate, uint64_t inner) {
  uint64_t target = crumbs__direct_call_target(modules, candidate);
  if (target == 0) return true; // indirect: anything
  uint64_t inner_start = crumbs__modules_function_start(modules, inner);
  if (inner_start != 0) {
    if (target == inner_start) return true;
    // A target that starts another function we know cannot have led there; one that starts
    // none we know (a stub we cannot follow, code without CFI) proves nothing.
    return crumbs__modules_function_start(modules, target) != target;
  }
  // A direct call into a module never lands outside every module (JIT code, a bad address).
  int target_module = crumbs__modules_for_text(modules, target);
  int inner_module = crumbs__modules_for_text(modules, inner);
  return target_module < 0 || inner_module == target_module;
}

bool crumbs__unwind_scan(const crumbs__module_table *modules, crumbs__unwind_state *state, uint64_t inner_pc,
                         bool inner_exact, uint64_t inner_sp, uint64_t *scanned, uint64_t *found) {
  uint64_t slot = ((inner_sp > state->low ? inner_sp : state->low) + 7) & ~(uint64_t)7;
  uint64_t limit = state->high > 16 ? state->high - 16 : 0;
  if (slot + CRUMBS__SCAN_WINDOW < limit) limit = slot + CRUMBS__SCAN_WINDOW;
  uint64_t inner = inner_exact ? inner_pc : inner_pc - 1;
  uint64_t candidate = 0;
  bool hit = false;
  for (; slot + 8 <= limit && *scanned < CRUMBS__SCAN_BUDGET; slot += 8, *scanned += 8) {
    if (!crumbs__unwind_stack_word(state->low, state->high, slot, &candidate)) break;
    candidate = crumbs__context_code_address(candidate); // a signed return address, stripped
    if (candidate == inner_pc || !crumbs__unwind_is_return_address(modules, candidate)) continue;
    if (!crumbs__unwind_can_call(modules, candidate, inner)) continue;
    hit = true;
    break;
  }
  if (!hit) return false;
  *found = candidate;
  state->registers.pc = candidate;
  state->exact = false;
  state->registers.values[CRUMBS__REG_SP] = slot + 8;
  // When the callee pushed a frame record right after the call, [slot - 8] is the caller's
  // frame pointer; otherwise the register may still hold it (it is callee-saved).
  uint64_t saved = 0, saved_return = 0;
  if (crumbs__unwind_stack_word(state->low, state->high, slot - 8, &saved) && saved > slot &&
      crumbs__unwind_stack_word(state->low, state->high, saved + 8, &saved_return) &&
      crumbs__unwind_is_return_address(modules, crumbs__context_code_address(saved_return))) {
    state->registers.values[CRUMBS__REG_FP] = saved;
    state->registers.known |= 1ull << CRUMBS__REG_FP;
  }
  return true;
}
