// crumbs_unwind_memory.c — the memory the unwinder reads: stack words and async contexts
// through the kernel, never by a plain load where the kernel can do it.
//
// Why through the kernel: a stack's bounds may come from /proc/self/maps, which does not show
// guard regions installed inside a mapping (MADV_GUARD_INSTALL: glibc 2.42's thread stacks,
// Linux 6.13+), and a stack overflow leaves the SP in one; an async context lives on the heap,
// which a corrupt process may have unmapped. process_vm_readv on our own tid fails with EFAULT
// there instead of faulting. (Where the call is refused — a seccomp filter, ENOSYS — reads fall
// back to plain loads.) Stack words are copied a 4 KiB chunk at a time: the unwinder reads
// words near each other, so one copy serves dozens of them.
//
// Entry points: crumbs__crash_read_memory and crumbs__crash_readable_floor (unwind/crumbs_unwind.h,
// also used by the module checks and the record), crumbs__unwind_stack_word,
// crumbs__unwind_read_anywhere and crumbs__unwind_forget_chunk (crumbs_unwind_parts.h).
//
// ASYNC-SIGNAL-SAFE: everything in this file. No malloc, no locks, no stdio; a static chunk used
// only by the crashing thread (first crash wins). libc calls: syscall(SYS_gettid,
// SYS_process_vm_readv), memcpy.

#define _GNU_SOURCE
#include "unwind/crumbs_unwind_parts.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

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
bool crumbs__unwind_read_anywhere(uint64_t address, void *out, size_t size) {
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
void crumbs__unwind_forget_chunk(void) { crumbs__chunk_address = 1; }

/// A word of the stack being unwound, when [address, address + 8) lies in [low, high) and is
/// readable. Never a plain load: the bounds may come from /proc/self/maps, which does not show a
/// guard region installed with MADV_GUARD_INSTALL inside a mapping (glibc 2.42 guards thread
/// stacks so, kernels 6.13 and later); a stack overflow puts the SP right there.
bool crumbs__unwind_stack_word(uint64_t low, uint64_t high, uint64_t address, uint64_t *value) {
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
