// crumbs_baseline_append.c — set-up and tear-down of the baseline mapping (see the header).

#include "crumbs_baseline_append.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int crumbs_baseline_open(crumbs_baseline_ring *ring, const char *path, uint32_t slot_count,
                         uint32_t slot_size) {
  if (slot_count == 0 || (slot_count & (slot_count - 1)) != 0 || slot_size < 16) return EINVAL;
  size_t size = 4096 + (size_t)slot_count * slot_size;
  int descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (descriptor < 0) return errno;
  // Reserve the blocks as the ring does (posix_fallocate), so neither pays for holes.
  int failure = posix_fallocate(descriptor, 0, (off_t)size);
  if (failure != 0) {
    close(descriptor);
    return failure;
  }
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0);
  if (base == MAP_FAILED) {
    failure = errno;
    close(descriptor);
    return failure;
  }
  ring->counter = (uint64_t *)base;
  ring->slots = (unsigned char *)base + 4096;
  ring->slot_mask = slot_count - 1;
  ring->slot_size = slot_size;
  ring->base = base;
  ring->mapped_size = size;
  ring->descriptor = descriptor;
  return 0;
}

void crumbs_baseline_close(crumbs_baseline_ring *ring) {
  munmap(ring->base, ring->mapped_size);
  close(ring->descriptor);
  ring->base = NULL;
}

void crumbs_bench_ledger_floor(unsigned char *entry, const char *name, size_t name_length, const void *ids,
                               uint64_t count) {
  uint64_t *state = (uint64_t *)(void *)entry;
  for (uint64_t index = 0; index < count; index++) {
    uint64_t free_state = __atomic_load_n(state, __ATOMIC_RELAXED);
    if ((free_state & 3u) != 0) continue;
    if (!__atomic_compare_exchange_n(state, &free_state, free_state | 1u, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
      continue;
    __builtin_memcpy(entry + 16, ids, 32);
    __builtin_memcpy(entry + 64, name, name_length);
    uint64_t open_state = free_state | 2u;
    __atomic_store_n(state, open_state, __ATOMIC_RELEASE);
    __atomic_compare_exchange_n(state, &open_state, free_state + 4u, false, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
  }
}

void crumbs_bench_relaxed_stores(uint8_t *flag, uint64_t count) {
  for (uint64_t index = 0; index < count; index++) __atomic_store_n(flag, 1, __ATOMIC_RELAXED);
}

void crumbs_bench_stamped_stores(uint64_t *stamp, uint64_t count, int clock) {
  for (uint64_t index = 0; index < count; index++) {
    struct timespec now;
    clock_gettime(clock, &now);
    __atomic_store_n(stamp, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec, __ATOMIC_RELAXED);
  }
}
