// CurrentThread.swift — the calling thread as the C side sees it, for the after-the-fact
// modules (non-fatal reports): they never call CrumbsSignalPath themselves. Not signal-safe.

import CrumbsSignalPath

package enum CurrentThread {
  /// The kernel's id of the calling thread (gettid), the id breadcrumbs and crash records use.
  package static var id: UInt32 { crumbs_current_thread_id() }

  /// The caller's return addresses, its own caller's first, followed by frame pointers within
  /// the thread's stack: at most `limit`.
  package static func returnAddresses(limit: Int = 128) -> [UInt64] {
    var addresses = [UInt64](repeating: 0, count: max(0, limit))
    let count = Int(crumbs_capture_current_stack(&addresses, UInt32(clamping: addresses.count)))
    addresses.removeSubrange(min(count, addresses.count)...)
    return addresses
  }
}
