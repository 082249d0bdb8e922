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

#endif // CRUMBS_BENCH_SPIN_H
