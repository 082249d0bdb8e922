// crumbs_bench_store.h — the heartbeat's floor: one relaxed atomic store of a flag, in C, the
// same loop shape as the Swift beat it is compared with (HangFigures). Benchmark fixture, not
// part of Crumbs.

#ifndef CRUMBS_BENCH_STORE_H
#define CRUMBS_BENCH_STORE_H

#include <stdint.h>

/// `count` relaxed stores of 1 into `*flag`, not inlined into the caller.
__attribute__((noinline)) static void crumbs_bench_relaxed_stores(uint8_t *flag, uint64_t count) {
  for (uint64_t index = 0; index < count; index++) __atomic_store_n(flag, 1, __ATOMIC_RELAXED);
}

#endif // CRUMBS_BENCH_STORE_H
