// crumbs_stack_capture.c — the calling thread's backtrace, for non-fatal reports.
//
// Why C: it reuses the crash handler's bounded frame-pointer walker (crumbs_unwind.c) and needs
// __builtin_frame_address, which Swift cannot reach.
//
// NOT SIGNAL-SAFE: pthread_getattr_np allocates (it reads /proc/self/maps for the main thread).
// libc calls: pthread_self, pthread_getattr_np, pthread_attr_getstack, pthread_attr_destroy.

#define _GNU_SOURCE
#include "unwind/crumbs_unwind.h"
#include "crumbs_stack_capture.h"

#include <pthread.h>

__attribute__((noinline)) uint32_t crumbs_capture_current_stack(uint64_t *frames, uint32_t capacity) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return 0;
  void *stack = NULL;
  size_t size = 0;
  int got = pthread_attr_getstack(&attributes, &stack, &size);
  pthread_attr_destroy(&attributes);
  if (got != 0 || stack == NULL) return 0;
  uint64_t low = (uint64_t)(uintptr_t)stack;
  uint64_t high = low + size;
  uint64_t frame = (uint64_t)(uintptr_t)__builtin_frame_address(0);
  uint64_t caller = crumbs__context_code_address((uint64_t)(uintptr_t)__builtin_return_address(0));
  if (frame < low || frame + 16 > high) return 0;
  uint32_t stop = 0;
  // frames[0] is where our caller called us; the walk continues from the caller's frame.
  uint64_t caller_frame = ((const uint64_t *)(uintptr_t)frame)[0];
  return crumbs__unwind_walk_frames(caller, caller_frame, frame + 16, low, high, frames, capacity, &stop);
}
