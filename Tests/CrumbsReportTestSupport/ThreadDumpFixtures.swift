// ThreadDumpFixtures.swift — live-capture snapshots for tests of the thread-dump answer and its
// writer, made by hand (no capture runs).

import CrumbsPlatform

@testable import CrumbsRecorder

extension ThreadSnapshot {
  /// A snapshot of `threads` threads named "thread-N" (tid 100 + N), each with `frames` as its
  /// return addresses, and `modules`.
  package static func sample(
    threads: Int = 2, frames: [UInt64] = [0x1000, 0x2000], modules: [LoadedModule] = []
  )
    -> ThreadSnapshot
  {
    let table = CrashRecord.ThreadTable(
      threads: (0..<threads).map { index in
        CrashRecord.Thread(
          id: UInt32(100 + index), name: "thread-\(index)", state: .captured, signal: nil, registers: [],
          frames: frames, frameMarks: frames.map { _ in 0 }, backtraceStop: .endOfChain, stackLow: 0,
          stackHigh: 0, stackSource: .registered)
      }, seen: UInt32(threads), captured: UInt32(threads), noAnswer: 0, captureSignal: 64,
      captureNanoseconds: 1_000,
      deadlineNanoseconds: 50_000_000, flags: 0)
    return ThreadSnapshot(
      table: table, callerID: 100, wallNanoseconds: 1_700_000_000_000_000_000,
      longestPauseNanoseconds: 250_000,
      modules: modules)
  }
}
