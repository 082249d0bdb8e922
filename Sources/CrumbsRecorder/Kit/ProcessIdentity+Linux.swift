// ProcessIdentity+Linux.swift — one process, named so that pid reuse cannot fool a reader: pid,
// start time (field 22 of /proc/<pid>/stat, through crumbs_process_stat, the parser the fork
// handler uses too), boot id and pid namespace. Ring headers keep their writer's, so whether a
// ring's writer still runs is decided per process, not by a lock a forked child may hold.
// Not signal-safe (the signal path reads the start time in C).

import CrumbsPlatform
import CrumbsSignalPath
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

package struct ProcessIdentity: Sendable, Equatable {
  package var pid: Int32
  /// Clock ticks after boot; 0 when unknown.
  package var startTicks: UInt64
  package var bootID: [UInt8]
  /// The inode of /proc/<pid>/ns/pid; 0 when unknown.
  package var pidNamespace: UInt64

  package init(pid: Int32, startTicks: UInt64, bootID: [UInt8], pidNamespace: UInt64) {
    self.pid = pid
    self.startTicks = startTicks
    self.bootID = bootID
    self.pidNamespace = pidNamespace
  }

  /// This process, read now (a forked child is another process than its parent was).
  package static var current: ProcessIdentity {
    ProcessIdentity(
      pid: Syscall.processID(), startTicks: ownStartTicks() ?? 0, bootID: SystemFacts.bootID,
      pidNamespace: SystemFacts.pidNamespace(of: "self"))
  }

  /// What a reader can tell about whether the process still runs.
  package enum Liveness: Equatable, Sendable {
    /// Same boot, same pid namespace, and a process with that pid and start time is there and is
    /// not a zombie.
    case running
    /// Another boot, or no such process (the pid is free, or taken by a later process).
    case gone
    /// Nothing to compare: start time or namespace unknown, or another pid namespace (the pid
    /// means nothing here). The caller decides otherwise.
    case unknown
  }

  /// Whether the process still runs, as seen from this one.
  package var liveness: Liveness {
    let here = SystemFacts.pidNamespace(of: "self")
    guard pid > 0, startTicks != 0, pidNamespace != 0, here != 0, pidNamespace == here,
      !SystemFacts.bootID.allSatisfy({ $0 == 0 })
    else { return .unknown }
    guard SystemFacts.isCurrentBoot(bootID) else { return .gone }
    var ticks: UInt64 = 0
    var state: CChar = 0
    guard crumbs_process_stat(pid, &ticks, &state) else { return .gone }
    // A zombie has closed everything and will never write again.
    if ticks != startTicks || state == CChar(UInt8(ascii: "Z")) || state == CChar(UInt8(ascii: "X")) {
      return .gone
    }
    return .running
  }

  /// Field 22 of /proc/<pid>/stat (`pid` 0: this process), or nil when unreadable.
  package static func startTicks(of pid: Int32) -> UInt64? {
    var ticks: UInt64 = 0
    var state: CChar = 0
    return crumbs_process_stat(pid, &ticks, &state) ? ticks : nil
  }

  /// This process's start ticks (`startTicks(of: 0)`), read once per process: the ring's header
  /// and the crash record both need them on the caller's thread of `CrumbsClient.start`, and
  /// each read of /proc/self/stat costs tens of microseconds there (the kernel formats the
  /// whole line). Keyed by pid, so a forked child reads its own.
  package static func ownStartTicks() -> UInt64? {
    let pid = Syscall.processID()
    // Atomics, not a lock: a fork while another thread held a lock would leave it held in the
    // child. The ticks are stored before the pid that vouches for them.
    if ownStartPID.load(ordering: .acquiring) == pid { return ownStartValue.load(ordering: .relaxed) }
    guard let ticks = startTicks(of: 0) else { return nil }
    ownStartValue.store(ticks, ordering: .relaxed)
    ownStartPID.store(pid, ordering: .releasing)
    return ticks
  }
  private static let ownStartPID = Atomic<Int32>(0)
  private static let ownStartValue = Atomic<UInt64>(0)
}
