// BreadcrumbRing+Hang.swift — the watchdog's record of the hang going on, in the ring header,
// so that a kill during a hang is explained: a liveness probe's SIGKILL, the OOM killer or a
// deadline that ends the process during a hang runs no code of ours, so what the next launch
// says about the hang must already be in the file.
//
// Entry points, in call order (the client's watchdog thread):
//   recordHang(watch:sinceWallNanoseconds:frames:)   a watch stalled, or its frames got known
//   refreshHang(seenWallNanoseconds:)                the watchdog looked again: still hung
//   clearHang()                                      it ended
// Read back by OngoingHang.read (RingHeaderInfo.ongoingHang); the protocol, a seqlock with `seen`
// outside it, is crumbs_ring_hang.h's.
//
// One writer: these are called by one thread at a time, the watchdog's (the seqlock takes no
// lock and has no compare-and-swap: two threads writing at once could publish a mix). Not on
// the hot path and never from a signal handler: a few hundred bytes of copying per call, a
// clock read in recordHang.

import CrumbsPlatform
import CrumbsSignalPath

extension BreadcrumbRing {
  /// Records in the header that `watch` has shown no life since `sinceWallNanoseconds` (wall
  /// clock, ns since the Unix epoch), seen still hung now, with the stalled thread's top frames
  /// `frames` ("f ← g ← h", "" when unknown). Each text is cut at a character boundary to fit
  /// its field (63 and 511 bytes). Replaces a hang recorded before; call it again when the
  /// frames become known. A `since` of 0 records nothing (0 means "no hang"). Watchdog thread
  /// only (see the design comment); does nothing once the ring is closed.
  package func recordHang(watch: String, sinceWallNanoseconds: UInt64, frames: String) {
    guard let ring = openHandle else { return }
    let now = SystemClock.wallNanoseconds()
    withUTF8Bytes(of: watch) { watchBytes, watchCount in
      withUTF8Bytes(of: frames) { frameBytes, frameCount in
        crumbs_ring_record_hang(
          ring, watchBytes?.assumingMemoryBound(to: CChar.self), watchCount, sinceWallNanoseconds,
          max(now, sinceWallNanoseconds), frameBytes?.assumingMemoryBound(to: CChar.self), frameCount)
      }
    }
  }

  /// The watchdog looked again at `seenWallNanoseconds` and the hang recorded is still going on:
  /// the next launch reports it as lasting at least until then. Does nothing when no hang is
  /// recorded. Watchdog thread only; does nothing once the ring is closed.
  package func refreshHang(seenWallNanoseconds: UInt64) {
    guard let ring = openHandle else { return }
    crumbs_ring_refresh_hang(ring, seenWallNanoseconds)
  }

  /// The hang ended: the header says no hang again. Watchdog thread only; does nothing once the
  /// ring is closed.
  package func clearHang() {
    guard let ring = openHandle else { return }
    crumbs_ring_clear_hang(ring)
  }
}
