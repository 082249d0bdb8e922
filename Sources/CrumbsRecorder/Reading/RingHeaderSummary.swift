// RingHeaderSummary.swift — the few fields of a ring's header that say how its session ended,
// read cheaply: what the crash-loop check reads of every waiting ring on the caller's thread of
// `CrumbsClient.start` (CrashLoopEvidence.waiting).
//
// Entry point: RingHeaderSummary.read(file:) → the summary, or nil when the file is not a ring
// `RingReader.readHeader` would accept (the same rules: RingHeaderValidation.checked).
//
// Why not `RingReader.readHeader`: it builds the whole RingHeaderInfo (five strings, the lane
// table, the hang and unclean-end fields), and in a process that just started, the first build
// instantiates the metadata of every type in it (tuples, sets, generic closures): measured at
// about a fifth of `start` (Benchmarks/README.md). This reads the header into one C struct
// with one pread and copies out plain values. Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

/// How a ring's session ended, as its header says (see the design comment).
package struct RingHeaderSummary: Sendable, Equatable {
  package var sessionID: SessionID
  package var bootID: [UInt8]
  package var state: RingState
  /// Ring creation, nanoseconds since the Unix epoch.
  package var createdWallNanoseconds: UInt64
  /// A forked child's ring (its header names a parent session).
  package var isForkedChild: Bool
  /// With state `.terminatedBySignal` only: whether a hang was going on when the signal came
  /// (RingHeaderInfo.ongoingHang != nil); false in every other state, where nobody asks.
  package var hadOngoingHang: Bool
  /// The process that wrote the ring.
  package var writer: ProcessIdentity

  /// The summary of the ring file at `path`; nil when it cannot be read or is not a ring that
  /// `RingReader.readHeader(file:)` accepts (that call says why).
  package static func read(file path: String) -> RingHeaderSummary? {
    guard let (fd, size) = try? Syscall.openRegularFileForReading(path) else { return nil }
    defer { Syscall.close(fd) }
    let tables = Int(CRUMBS_RING_HEADER_SIZE + CRUMBS_RING_MAX_LANES * CRUMBS_RING_LANE_SIZE)
    guard let bytes = try? Syscall.read(fd, at: 0, count: tables, path: path) else { return nil }
    return bytes.withUnsafeBytes { image -> RingHeaderSummary? in
      guard let header = try? RingHeaderValidation.checked(image, availableBytes: Int(clamping: size))
      else { return nil }
      return RingHeaderSummary(header)
    }
  }

  private init?(_ header: crumbs_ring_header) {
    let session = withUnsafeBytes(of: header.session_id) { SessionID(bytes: Array($0)) }
    guard let session else { return nil }
    sessionID = session
    bootID = withUnsafeBytes(of: header.boot_id) { Array($0) }
    state = RingState(raw: header.state)
    createdWallNanoseconds = header.created.wall_ns
    isForkedChild = withUnsafeBytes(of: header.parent_session_id) { raw in raw.contains { $0 != 0 } }
    hadOngoingHang =
      state == .terminatedBySignal && withUnsafePointer(to: header) { OngoingHang.read($0).0 != nil }
    writer = ProcessIdentity(
      pid: Int32(bitPattern: header.pid), startTicks: header.writer_start_ticks, bootID: bootID,
      pidNamespace: header.writer_pid_namespace)
  }
}
