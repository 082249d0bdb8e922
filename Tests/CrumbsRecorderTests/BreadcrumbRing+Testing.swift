// BreadcrumbRing+Testing.swift — white-box entry points for the ring tests (through
// @testable import): build a ring at any head or wrap position and see its lanes, so tests can
// walk every layout. Test-only, so the product carries none of it.

import CrumbsSignalPath
@testable import CrumbsRecorder

extension BreadcrumbRing {
  /// Puts the head of every general lane (or every important lane) at `position`, as if that
  /// many breadcrumbs had been appended to it.
  func setLaneHeadsForTesting(_ position: UInt64, important: Bool = false) {
    let lanes = Int(handle.pointee.header.pointee.lane_count)
    for index in 0..<lanes where (handle.pointee.lanes[index].important != 0) == important {
      handle.pointee.lanes[index].head = position
    }
  }

  /// Lane layout: (slot count, important) per lane.
  var lanesForTesting: [(slotCount: Int, important: Bool)] {
    (0..<Int(handle.pointee.header.pointee.lane_count)).map {
      (Int(handle.pointee.lanes[$0].slot_count), handle.pointee.lanes[$0].important != 0)
    }
  }
}
