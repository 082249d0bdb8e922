// Threads.swift — running test bodies on many threads at once, and the invariants every
// reader of a stress-test ring must see.

import Foundation
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// Runs `body(index)` on `count` new threads at once and waits for all of them.
package func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
  let group = DispatchGroup()
  for index in 0..<count {
    group.enter()
    Thread.detachNewThread {
      body(index)
      group.leave()
    }
  }
  group.wait()
}

/// Checks what every reader must guarantee about "t=T n=N" breadcrumbs: each one is intact
/// (message agrees with its attributes) and each thread's counters only go up.
package func checkStressInvariants(
  _ breadcrumbs: [Breadcrumb], sourceLocation: SourceLocation = #_sourceLocation
) {
  var lastCounter: [String: Int] = [:]
  for crumb in breadcrumbs where crumb.message.hasPrefix("t=") {
    let thread = crumb.attributes.first { $0.key == "t" }?.value ?? "?"
    let counter = Int(crumb.attributes.first { $0.key == "n" }?.value ?? "") ?? -1
    #expect(crumb.message == "t=\(thread) n=\(counter)", sourceLocation: sourceLocation)
    if let previous = lastCounter[thread] {
      #expect(
        counter > previous, "thread \(thread) went from \(previous) to \(counter)",
        sourceLocation: sourceLocation)
    }
    lastCounter[thread] = counter
  }
}
