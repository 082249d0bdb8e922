// crumbs_unwind_async.c — Swift async frames in a crash backtrace: the async context below a
// frame record, and the chain of async callers it leads to (CRUMBS_FRAME_ASYNC).
//
// Swift async frames on Linux: the compiler here does not set bit 60 of the saved frame pointer
// (checked by disassembling Swift 6.3 output for x86_64; it does on Darwin), and the runtime
// backtracer recognizes async functions by their mangled names, which a handler cannot read. So
// a frame is taken as async when its return address lies in the Swift concurrency runtime (the
// executor calls a resume function directly; an async function is never called otherwise) and
// the word below its frame record is an async context whose resume pointer starts a function
// (bit 60, when some toolchain sets it, is taken at its word). The chain then follows
// context → (parent, resume function) like the runtime backtracer, reading the heap through
// process_vm_readv (crumbs_unwind_memory.c), which fails with EFAULT instead of faulting.
// Called by the walk (crumbs_unwind.c) after each step that read a frame record.
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio. libc calls: through
// crumbs_unwind_memory.c (syscall(SYS_process_vm_readv, SYS_gettid)); plain loads only from
// module text and .eh_frame_hdr segments (crumbs__modules_function_start, crumbs_modules.c). The
// chain is bounded by the frame capacity.

#include "unwind/crumbs_unwind_parts.h"

uint64_t crumbs__unwind_concurrency_runtime;

/// Whether the frame executing `inner_pc` whose record is at `record_at` (its saved frame
/// pointer `saved_fp`, its return address `return_address`) is a Swift async function resumed
/// by the executor: returns its async context, or 0.
uint64_t crumbs__unwind_async_context(const crumbs__module_table *modules, const crumbs__unwind_state *state,
                                      uint64_t inner_pc, uint64_t record_at, uint64_t saved_fp,
                                      uint64_t return_address) {
  if (record_at < 8) return 0;
  uint64_t context = 0;
  if (!crumbs__unwind_stack_word(state->low, state->high, record_at - 8, &context) || context == 0) return 0;
  if (saved_fp & CRUMBS__ASYNC_FRAME_BIT) return context;
  uint64_t runtime = crumbs__unwind_concurrency_runtime;
  int runtime_module = runtime != 0 ? crumbs__modules_for_text(modules, runtime) : -1;
  // The runtime's own frames call each other: only a frame outside it, called by it, is a
  // resumed async function.
  if (runtime_module < 0 || crumbs__modules_for_text(modules, return_address - 1) != runtime_module ||
      crumbs__modules_for_text(modules, inner_pc) == runtime_module) {
    return 0;
  }
  // An async context starts with its parent context and the function that resumes the parent:
  // that one must begin a function (an FDE starts there), which a random word rarely does.
  uint64_t words[2];
  if (!crumbs__unwind_read_anywhere(context, words, sizeof words)) return 0;
  if (words[1] == 0 || crumbs__modules_function_start(modules, words[1]) != words[1]) return 0;
  return context;
}

/// Appends the resume points of the async callers, from `context` up its parent chain.
uint32_t crumbs__unwind_async_chain(uint64_t context, uint64_t *frames, uint8_t *marks, uint32_t count,
                                    uint32_t capacity) {
  for (uint32_t links = 0; context != 0 && count < capacity && links < capacity; links++) {
    uint64_t words[2]; // parent, resume function
    if ((context & 7u) != 0 || !crumbs__unwind_read_anywhere(context, words, sizeof words)) break;
    if (words[1] == 0) break;
    frames[count] = words[1] & ~CRUMBS__ASYNC_FRAME_BIT;
    marks[count] = CRUMBS_FRAME_ASYNC;
    count++;
    context = words[0];
  }
  return count;
}
