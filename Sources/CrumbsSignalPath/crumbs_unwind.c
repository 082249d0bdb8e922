// crumbs_unwind.c — the crashing thread's backtrace, by frame pointers, bounded by its stack.
//
// Why C: it runs inside the crash handler (a signal handler), on a thread whose memory may be
// corrupt, where the Swift runtime must not run.
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio, no libc call:
// arithmetic and loads from memory already proven readable: the thread's
// stack range, and (for the return-address checks of the stack scan and the leaf-caller
// recovery) the text of modules in the record's module table. A module unloaded since the last
// table refresh could make such a load fault; the handler then finishes a partial record and
// dies by the original signal (crumbs_crash_handler.c), it never loops.
//
// Why frame pointers and not an unwinder: Swift and C on Linux x86_64/aarch64 keep frame
// pointers by default here, and a frame-pointer walk needs nothing but loads, each of which we
// bound-check against the thread's stack first: a garbage frame pointer ends the walk, it cannot
// fault. A DWARF unwinder (libgcc's _Unwind_Backtrace, glibc's backtrace) may dlopen libgcc_s
// lazily (malloc, loader lock) and parses .eh_frame we cannot trust after memory corruption.
//
// Why the bounds come from /proc/self/maps when nothing better is registered: a thread's stack
// range is known exactly only from pthread_getattr_np, which allocates and may not be called in
// a handler; so we take it at install / crumbs_crash_prepare_thread where we can, and otherwise
// the handler reads the mapping that holds the stack pointer (crumbs_maps.c). Every address
// from the stack pointer to the end of that mapping is mapped and readable.

#include "crumbs_crash_internal.h"

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

/// The module that the direct call ending right before return address `address` goes to,
/// following a PLT stub to its bound target; -1 when that cannot be known (an indirect call, an
/// unrecognized stub, another architecture). Reads only module text, and a GOT slot inside the
/// same module's loaded range.
static int crumbs__direct_call_target_module(const crumbs_crash_record *record, uint64_t address) {
#if defined(__x86_64__)
  const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)address;
  if (code[-5] != 0xE8) return -1;
  int32_t relative = (int32_t)((uint32_t)code[-4] | (uint32_t)code[-3] << 8 |
                               (uint32_t)code[-2] << 16 | (uint32_t)code[-1] << 24);
  uint64_t target = address + (uint64_t)(int64_t)relative;
  int module = crumbs__crash_module_for_text(record, target);
  if (module < 0 || target + 16 > record->modules[module].text_end) return module;
  // A PLT stub: jmp *slot(%rip), optionally after endbr64 and a bnd prefix.
  const volatile uint8_t *stub = (const volatile uint8_t *)(uintptr_t)target;
  uint64_t after = 0;
  if (stub[0] == 0xFF && stub[1] == 0x25) {
    after = 6;
  } else if (stub[0] == 0xF3 && stub[1] == 0x0F && stub[2] == 0x1E && stub[3] == 0xFA) {
    if (stub[4] == 0xF2 && stub[5] == 0xFF && stub[6] == 0x25) after = 11;
    if (stub[4] == 0xFF && stub[5] == 0x25) after = 10;
  }
  if (after == 0) return module; // an ordinary function of this module
  const volatile uint8_t *displacement = stub + after - 4;
  int32_t slot_offset = (int32_t)((uint32_t)displacement[0] | (uint32_t)displacement[1] << 8 |
                                  (uint32_t)displacement[2] << 16 | (uint32_t)displacement[3] << 24);
  uint64_t slot = target + after + (uint64_t)(int64_t)slot_offset;
  const crumbs_crash_module *owner = &record->modules[module];
  if (slot < owner->start || slot + 8 > owner->end || (slot & 7u) != 0) return -1;
  return crumbs__crash_module_for_text(record, *(const volatile uint64_t *)(uintptr_t)slot);
#else
  (void)record;
  (void)address;
  return -1;
#endif
}

/// Whether return address `candidate` can be the caller of the frame whose pc (or return
/// address, when `inner_is_return`) is `inner`: false only when its call is a direct one that
/// goes into another module than the one `inner` is in. A stale return address left in dead
/// stack by an earlier, deeper call usually fails this: it called something else.
static bool crumbs__can_call(const crumbs_crash_record *record, uint64_t candidate, uint64_t inner,
                             bool inner_is_return) {
  int target = crumbs__direct_call_target_module(record, candidate);
  if (target < 0) return true;
  int inner_module = crumbs__crash_module_for_text(record, inner_is_return ? inner - 1 : inner);
  return inner_module < 0 || inner_module == target;
}

uint32_t crumbs__crash_scan_frames(const crumbs_crash_record *record, uint64_t sp, uint64_t high,
                                   uint64_t *frames, uint32_t count, uint32_t capacity,
                                   uint32_t *stop) {
  // Bounded: 32 KiB of stack is far more than libc's frames between a fault and our code.
  uint64_t limit = high > 16 ? high - 16 : 0;
  if (sp + 32768 < limit) limit = sp + 32768;
  for (uint64_t slot = (sp + 7) & ~(uint64_t)7; slot + 8 <= limit && count < capacity; slot += 8) {
    uint64_t candidate = *(const volatile uint64_t *)(uintptr_t)slot;
    if (!crumbs__crash_is_return_address(record, candidate)) continue;
    if (count > 0 && !crumbs__can_call(record, candidate, frames[count - 1], count > 1)) continue;
    if (count == 0 || frames[count - 1] != candidate) frames[count++] = candidate;
    // Is slot - 8 a frame record ([record] = caller's frame pointer, [record + 8] = this return
    // address) whose caller's record holds a return address too? Then the chain is back.
    if (slot < sp + 8) continue;
    uint64_t saved_fp = *(const volatile uint64_t *)(uintptr_t)(slot - 8);
    if ((saved_fp & 7u) == 0 && saved_fp > slot && saved_fp + 16 <= high &&
        crumbs__crash_is_return_address(record, ((const volatile uint64_t *)(uintptr_t)saved_fp)[1])) {
      // The walker records its pc first; hand it the next return address as that pc.
      uint64_t next_pc = ((const volatile uint64_t *)(uintptr_t)saved_fp)[1];
      uint64_t next_fp = ((const volatile uint64_t *)(uintptr_t)saved_fp)[0];
      return count + crumbs__crash_walk_frames(next_pc, next_fp, saved_fp + 16, saved_fp + 16, high,
                                               &frames[count], capacity - count, stop);
    }
  }
  return count;
}
