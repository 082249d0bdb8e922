// Clock+Linux.swift — the one place the Swift side reads a clock.
//
// Two clocks (and the thread's CPU time, for the CLI's stress figures), for two questions: "how long" (CLOCK_MONOTONIC: deadlines, durations, rates; never
// jumps; its coarse reading for a heartbeat's stamp) and "when" (CLOCK_REALTIME: timestamps a person or a server reads; may jump). The ring
// has its own tick clock in C (crumbs_ring_append.h), anchored to both of these.
// Not used from signal handlers (the signal path reads clocks in C).

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

package enum SystemClock {
  /// CLOCK_MONOTONIC in nanoseconds: for deadlines and durations.
  package static func monotonicNanoseconds() -> UInt64 { read(CLOCK_MONOTONIC) }

  /// CLOCK_MONOTONIC_COARSE in nanoseconds: the monotonic clock as of the kernel's last tick
  /// (1–10 ms behind), read from the vDSO's data without the hardware counter, so a few times
  /// cheaper than `monotonicNanoseconds` (which reads the TSC, or the hypervisor's clock in a
  /// VM). For stamps taken on a hot path whose reader wants milliseconds, not nanoseconds.
  package static func coarseMonotonicNanoseconds() -> UInt64 { read(CLOCK_MONOTONIC_COARSE) }

  /// CLOCK_REALTIME in nanoseconds since the Unix epoch: for timestamps. 0 before 1970.
  package static func wallNanoseconds() -> UInt64 { read(CLOCK_REALTIME) }

  /// CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
  package static func threadCPUNanoseconds() -> UInt64 { read(CLOCK_THREAD_CPUTIME_ID) }

  /// CLOCK_MONOTONIC in seconds, for deadlines written in seconds.
  package static func monotonicSeconds() -> Double { Double(monotonicNanoseconds()) / 1e9 }

  private static func read(_ clock: clockid_t) -> UInt64 {
    var now = timespec()
    clock_gettime(clock, &now)  // cannot fail for these clocks on Linux
    guard now.tv_sec >= 0, now.tv_nsec >= 0 else { return 0 }
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
  }
}
