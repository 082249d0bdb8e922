// BenchSummary.swift — the figures `make bench` ends with, gathered from every part of the run.
//
// Each figures program calls `BenchSummary.record` for its headline figures (and times with the
// clocks below); when the environment names a file in BENCH_SUMMARY (`make bench` does), the
// line is appended there, and `summary.sh` prints them as one table after the last part. Without
// BENCH_SUMMARY nothing is written (the programs still print their own blocks). Lines are
// `figure|value|goal|verdict`.

#if canImport(Glibc)
  import Glibc
#endif

public enum BenchSummary {
  /// Appends one figure: what, its value, the goal ("" for none) and whether it was met (nil:
  /// no goal).
  public static func record(_ figure: String, _ value: String, goal: String = "", met: Bool? = nil) {
    guard let path = getenv("BENCH_SUMMARY").map({ String(cString: $0) }), !path.isEmpty,
      let file = fopen(path, "a")
    else { return }
    defer { fclose(file) }
    fputs("\(figure)|\(value)|\(goal)|\(met.map(verdict) ?? "")\n", file)
  }
}

/// The median of `values` (the mean of the middle two for an even count; NaN for none): every
/// figures program reports medians of its rounds.
public func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  guard !sorted.isEmpty else { return .nan }
  return sorted.count % 2 == 1
    ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// A goal's verdict as the figures print it.
public func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }

/// Monotonic nanoseconds: the one clock the figures programs time with.
public func monotonicNanoseconds() -> UInt64 { clockNanoseconds(CLOCK_MONOTONIC) }

/// CPU time of the calling thread: what the work cost, whatever else the machine was doing.
public func threadCPUNanoseconds() -> UInt64 { clockNanoseconds(CLOCK_THREAD_CPUTIME_ID) }

/// CPU time of the whole process, every thread.
public func processCPUNanoseconds() -> UInt64 { clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID) }

private func clockNanoseconds(_ clock: clockid_t) -> UInt64 {
  var now = timespec()
  clock_gettime(clock, &now)
  return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
