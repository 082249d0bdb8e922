// crumbs_stack_capture.h — the calling thread's return addresses, for non-fatal reports.
#ifndef CRUMBS_STACK_CAPTURE_H
#define CRUMBS_STACK_CAPTURE_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/// Fills `frames` with the caller's return address and its callers', by frame pointers, within
/// the thread's stack. Returns the count. Not signal-safe (pthread_getattr_np allocates).
uint32_t crumbs_capture_current_stack(uint64_t *frames, uint32_t capacity);
#ifdef __cplusplus
}
#endif
#endif
