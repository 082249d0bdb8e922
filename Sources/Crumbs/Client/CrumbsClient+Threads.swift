// CrumbsClient+Threads.swift — every thread of this process, now: `captureThreads()`, the same
// snapshot `crumbs threads PID` asks for from outside (through ThreadDumpResponder), named here
// with this process's symbol tables. Not signal-safe.

import CrumbsPlatform

/// Every thread of the process at one moment, as `captureThreads()` took it.
public struct ThreadDump: Sendable, Equatable {
  /// The calling thread first, then every other thread, each with its name, how the capture
  /// found it and its symbolicated frames (async callers marked `foundBy: .async`), as a crash
  /// report holds them.
  public var threads: [CrashReport.Thread]
  /// When it was taken, nanoseconds since the Unix epoch.
  public var timeUnixNano: UInt64
  /// The longest any thread stayed paused by the capture.
  public var longestPauseNanoseconds: UInt64
  /// The operations open in the in-flight ledger just after the capture, oldest first, each
  /// with its age then and the thread that began it; nil when the ring has no ledger.
  public var openOperations: CrashReport.OpenOperations?
  /// What each thread (the calling one aside) waited on just after the capture: its system
  /// call and arguments, and for a futex wait the lock it is on (a glibc mutex or rwlock, a PI
  /// mutex such as `Synchronization.Mutex`, a condition variable, a semaphore) and its owner's
  /// tid where the lock records one.
  public var waits: [ThreadWait] = []
  /// The wait-for graph's verdict: a deadlock (a cycle of lock waits) or the longest chain of
  /// waits and what its last thread does; nil when no thread waits for a named owner.
  public var verdict: WaitVerdict?
  /// `verdict` in words ("deadlock: a (tid 12) → b (tid 13) → a (tid 12) (mutexes 0x…, 0x…)";
  /// a chain's end under the last thread's first frame in the executable).
  public var verdictText: String?
  /// The cooperative pool's seats: which pool threads are idle, run, or are blocked in the
  /// kernel (in which call, under which app frame); nil when no pool thread was captured.
  public var poolCensus: PoolCensus? = nil
}

/// Why `captureThreads()` has no dump.
public struct ThreadCaptureError: Error, Equatable, CustomStringConvertible {
  /// The capture's own words.
  public var reason: String
  public var description: String { "crumbs: cannot capture the threads: \(reason)" }
}

extension CrumbsClient {
  /// Every thread's stack now, the way `crumbs threads PID` prints it. A thread blocked in a
  /// system call (`sleep`, `read`, `poll`, a lock) is walked where it blocks without a signal:
  /// its call returns what it would have without the capture (`notSignalled` says
  /// `in_system_call`). A thread under a seccomp filter is never signalled (`seccomp`; without
  /// frames when it was running). Every other thread is paused by a signal only while its
  /// registers and stack are copied, then runs on; a blocking call it enters just as the signal
  /// arrives is interrupted once (docs/hangs.md lists what still can be). Symbolicated in this process
  /// (the client's symbolication options; symbol tables kept between calls). At most one
  /// capture runs at a time in the process: a call during another waits for it. The operations
  /// open in the ledger come with it (`openOperations`), aged as they are read, and what each
  /// thread waits on with the wait-for graph's verdict (`waits`, `verdict`: a deadlock names
  /// its cycle).
  public func captureThreads() throws(ThreadCaptureError) -> ThreadDump {
    let snapshot: ThreadSnapshot
    do {
      snapshot = try LiveThreadCapture.capture()
    } catch {
      throw ThreadCaptureError(reason: "\(error)")
    }
    let threads = CrashReportBuilder.threads(of: snapshot, symbolicator: liveSymbolicator)
    let verdict = snapshot.waits?.verdict().map {
      HangFacts.namingEnd($0, threads: threads, executable: SystemFacts.executablePath)
    }
    let names = Dictionary(
      snapshot.table.threads.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
    var dump = ThreadDump(
      threads: threads,
      timeUnixNano: snapshot.wallNanoseconds, longestPauseNanoseconds: snapshot.longestPauseNanoseconds,
      openOperations: ring.openOperations().map {
        CrashReport.OpenOperations($0, death: SystemClock.wallNanoseconds())
      }, waits: snapshot.waits?.threads ?? [], verdict: verdict,
      verdictText: verdict.map { ThreadWaits.describe($0, names: names) })
    dump.poolCensus = PoolCensus.take(
      threads: dump.threads, waits: snapshot.waits, seats: DispatchPools.seats())
    return dump
  }

  /// The responder to `crumbs threads`, when the configuration wants one and the client records,
  /// or why it could not start (no free signal): one of the client's `problems`.
  static func startThreadDumps(_ configuration: CrumbsConfiguration, ring: BreadcrumbRing, enabled: Bool)
    -> (responder: ThreadDumpResponder?, problem: String?)
  {
    guard configuration.answersThreadDumps, enabled else {
      return (nil, nil)
    }
    do {
      return (try ThreadDumpResponder.start(ring: ring), nil)
    } catch {
      return (nil, "\(error)")
    }
  }
}
