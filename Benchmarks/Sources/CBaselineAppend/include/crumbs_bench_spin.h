// crumbs_bench_spin.h — a CPU pause for the benchmarks' spin waits (Swift has no spelling for it).
// Benchmark fixture, not part of Crumbs.

#ifndef CRUMBS_BENCH_SPIN_H
#define CRUMBS_BENCH_SPIN_H

/// One spin-wait hint: `pause` on x86_64, `yield` on aarch64, nothing elsewhere.
static inline void crumbs_bench_spin_pause(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/// `iterations` turns of a dependent multiply-add chain: work that needs nothing but a core, to
/// see whether two threads at once each get one (RingAppendFigures' calibration). Returns the
/// result so the compiler keeps the loop.
static inline unsigned long long crumbs_bench_compute(long iterations) {
  unsigned long long x = 1, y = 3;
  for (long index = 0; index < iterations; index++) {
    x = x * 6364136223846793005ull + y;
    y ^= x >> 7;
  }
  return x + y;
}

#endif // CRUMBS_BENCH_SPIN_H
