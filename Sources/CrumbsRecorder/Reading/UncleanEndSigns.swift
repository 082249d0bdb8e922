// UncleanEndSigns.swift — what a ring's header says came before an unclean end (so that every
// unclean end is explained): the first stop request the app took over, the first
// resource-limit signal it outlived, and the resource limits at start.
//
// Entry point: UncleanEndSigns.read(header), called by RingHeaderValidation on a header copy.
// The writers are crumbs_ring_ends.c (the signal-breadcrumb handler, CrumbsService's stop
// watcher through it, and ring creation). A word that names a signal it cannot hold (damage)
// reads as none: never a trap, never a wrong cause. Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

/// A signal the process received and outlived, and when (as the handler noted it).
public struct SignalSeen: Sendable, Equatable {
  public var signal: Int32
  /// Wall-clock nanoseconds since the Unix epoch, to the millisecond.
  public var wallNanoseconds: UInt64

  public init(signal: Int32, wallNanoseconds: UInt64) {
    self.signal = signal
    self.wallNanoseconds = wallNanoseconds
  }
}

/// One resource limit (getrlimit units); nil: unlimited.
public struct ResourceLimit: Sendable, Equatable {
  public var soft: UInt64?
  public var hard: UInt64?

  public init(soft: UInt64?, hard: UInt64?) {
    self.soft = soft
    self.hard = hard
  }
}

/// The limits a ring's writer ran under when the ring was made.
public struct ResourceLimits: Sendable, Equatable {
  /// RLIMIT_CPU, seconds of CPU time.
  public var cpuSeconds: ResourceLimit
  /// RLIMIT_FSIZE, bytes one file may grow to.
  public var fileSizeBytes: ResourceLimit
  /// RLIMIT_RTTIME, microseconds a real-time thread may run without blocking.
  public var realTimeMicroseconds: ResourceLimit

  public init(cpuSeconds: ResourceLimit, fileSizeBytes: ResourceLimit, realTimeMicroseconds: ResourceLimit) {
    self.cpuSeconds = cpuSeconds
    self.fileSizeBytes = fileSizeBytes
    self.realTimeMicroseconds = realTimeMicroseconds
  }
}

/// What the header recorded for explaining an end without a clean exit.
public struct UncleanEndSigns: Sendable, Equatable {
  /// The first SIGTERM, SIGINT or SIGHUP the app took over (handled or ignored); nil: none.
  public var stopRequest: SignalSeen?
  /// The first SIGXCPU or SIGXFSZ the process outlived; nil: none.
  public var limitSignal: SignalSeen?
  /// The resource limits at start; nil in files from before they were recorded.
  public var limits: ResourceLimits?

  public init(stopRequest: SignalSeen? = nil, limitSignal: SignalSeen? = nil, limits: ResourceLimits? = nil) {
    self.stopRequest = stopRequest
    self.limitSignal = limitSignal
    self.limits = limits
  }

  /// The signals a `stop_request` word may name.
  public static let stopSignals: Set<Int32> = [SIGTERM, SIGINT, SIGHUP]
  /// The signals a `limit_signal` word may name (and a resource limit ends a process with).
  public static let limitSignals: Set<Int32> = [SIGXCPU, SIGXFSZ]

  /// The signs in a header copy (8-byte aligned).
  package static func read(_ header: UnsafePointer<crumbs_ring_header>) -> UncleanEndSigns {
    let fields = header.pointee
    var signs = UncleanEndSigns()
    signs.stopRequest = seen(fields.stop_request, among: stopSignals)
    signs.limitSignal = seen(fields.limit_signal, among: limitSignals)
    if fields.limits_recorded == 1 {
      signs.limits = ResourceLimits(
        cpuSeconds: limit(fields.rlimit_cpu), fileSizeBytes: limit(fields.rlimit_fsize),
        realTimeMicroseconds: limit(fields.rlimit_rttime))
    }
    return signs
  }

  private static func seen(_ word: UInt64, among allowed: Set<Int32>) -> SignalSeen? {
    let signal = Int32(word & 0xFF)
    let milliseconds = word >> 8
    // Past this many milliseconds the nanoseconds would not fit: damage, not a time.
    guard allowed.contains(signal), milliseconds > 0, milliseconds < UInt64.max / 1_000_000 else {
      return nil
    }
    return SignalSeen(signal: signal, wallNanoseconds: milliseconds * 1_000_000)
  }

  private static func limit(_ pair: (UInt64, UInt64)) -> ResourceLimit {
    ResourceLimit(
      soft: pair.0 == CRUMBS_RLIMIT_NONE ? nil : pair.0, hard: pair.1 == CRUMBS_RLIMIT_NONE ? nil : pair.1)
  }
}

extension RingHeaderInfo {
  /// Whether the ring was written in another boot than this reader's: both boot ids known (not
  /// all zero) and different. The machine restarted since; an unknown id proves nothing.
  package var isFromAnotherBoot: Bool { SystemFacts.isAnotherBoot(bootID) }
}
