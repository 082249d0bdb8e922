// SortedByTimeTests.swift — the reader's time order (BreadcrumbSlots.sortByTime), which sorts
// the entries and leaves their text where it is: the same order as a plain sort by (ticks,
// thread, sequence, decoded order), every breadcrumb kept whole, for orders that are already
// sorted, reversed, one long cycle, many short ones, and shuffled.

import Testing

@testable import CrumbsRecorder

@Suite struct SortedByTimeTests {
  func crumb(_ index: Int, ticks: UInt64, thread: UInt32 = 1, sequence: UInt32 = 0) -> Breadcrumb {
    Breadcrumb(
      id: UInt64(index), threadSequence: sequence, threadID: thread, wallTimeNanoseconds: 0,
      monotonicNanoseconds: 0, ticks: ticks, level: .info, type: .manual,
      // Heap-allocated text (longer than a small string) and attributes: a wrong move would
      // show as a wrong or released string.
      message: "breadcrumb number \(index), long enough to live on the heap",
      attributes: [.init(key: "index", value: "value \(index) of a long attribute string")],
      messageTruncated: false, attributesTruncated: false, fromSignalHandler: false)
  }

  func reference(_ crumbs: [Breadcrumb]) -> [Breadcrumb] {
    crumbs.enumerated().sorted { lhs, rhs in
      let (l, r) = (lhs.element, rhs.element)
      if l.ticks != r.ticks { return l.ticks < r.ticks }
      if l.threadID != r.threadID { return l.threadID < r.threadID }
      if l.threadSequence != r.threadSequence { return l.threadSequence < r.threadSequence }
      return lhs.offset < rhs.offset
    }.map(\.element)
  }

  @Test(arguments: ["sorted", "reversed", "rotated", "swapped pairs", "shuffled", "ties"])
  func theOrderIsThatOfAPlainSort(_ shape: String) {
    let count = 257
    var generator = SystemRandomNumberGenerator()
    let ticks: [UInt64] =
      switch shape {
      case "sorted": (0..<count).map { UInt64($0) }
      case "reversed": (0..<count).map { UInt64(count - $0) }
      case "rotated": (0..<count).map { UInt64(($0 + 100) % count) }
      case "swapped pairs": (0..<count).map { UInt64($0 ^ 1) }
      case "ties": (0..<count).map { _ in UInt64.random(in: 0..<4, using: &generator) }
      default: (0..<count).map { UInt64($0) }.shuffled(using: &generator)
      }
    let crumbs = ticks.enumerated().map { index, tick in
      crumb(index, ticks: tick, thread: UInt32(index % 3), sequence: UInt32(index))
    }
    let expected = reference(crumbs)
    var slots = BreadcrumbSlots(crumbs)
    slots.sortByTime()
    #expect(slots.breadcrumbs == expected)
    var empty = BreadcrumbSlots([])
    empty.sortByTime()
    #expect(empty.breadcrumbs.isEmpty)
  }
}
