// RingLifetimeTests.swift — a ring's life ends (close) while others may still hold it.
//
// Checked: appends racing `close` from several threads, through every way in (the object, a
// BreadcrumbTarget, the process-wide ring, a live snapshot); two threads closing at once; every
// call after close being a no-op; a pointer from crumbs_installed_ring staying valid across many
// re-installs; and, in a real crashing child, a crash after the crash handler's ring was closed
// leaving a complete record. Nothing here sleeps: threads wait for each other on counters.

import CrumbsSignalPath
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// Counts threads that reached a point; others spin (yielding) until enough have.
final class ArrivalCounter: Sendable {
  private let count = Atomic<Int>(0)

  func arrive() { count.add(1, ordering: .releasing) }

  /// Whether anyone has arrived yet.
  var anyArrived: Bool { count.load(ordering: .acquiring) > 0 }

  func wait(for expected: Int) {
    while count.load(ordering: .acquiring) < expected { sched_yield() }
  }

  /// Arrives, then waits until `expected` threads have: releases them within a few instructions
  /// of each other.
  func arriveAndWait(for expected: Int) {
    arrive()
    wait(for: expected)
  }
}

@Suite("Ring lifetimes")
struct RingLifetimeTests {
  /// A ring of 64 slots of 128 bytes: cheap to make hundreds of.
  static func smallRing(in directory: TestDirectory, _ name: String) throws -> BreadcrumbRing {
    var options = RingOptions()
    options.slotCount = 64
    options.slotSize = 128
    return try BreadcrumbRing.create(at: directory.file(name), options: options)
  }

  @Test(
    "appends from several threads racing close: no crash, and the file is left clean",
    arguments: [false, true])
  func closeRacesAppends(installed: Bool) throws {
    let body = {
      let directory = TestDirectory()
      let writers = 3
      let appendsAfterClose = 200
      for iteration in 0..<100 {
        let ring = try Self.smallRing(in: directory, "\(iteration).ring")
        if installed { ring.install() }
        let appending = ArrivalCounter()
        let closed = ArrivalCounter()
        onThreads(writers + 1) { thread in
          guard thread < writers else {
            // The closer: once every writer is appending, close under them.
            appending.wait(for: writers)
            ring.close(clean: true)
            closed.arrive()
            return
          }
          let target = BreadcrumbTarget.ring(ring)
          var afterClose = 0
          var count = 0
          while afterClose < appendsAfterClose {
            let seenClosed = closed.anyArrived
            switch (thread + count) % 4 {
            case 0: ring.append("object \(count)", attributes: ["n": String(count)])
            case 1:
              _ = target.accepts(level: .info, type: .manual)
              target.compose("composed", level: .info, type: .manual, attributeBytes: 8) {
                $0.add("n", String(count))
              }
              target.markMemoryWarning()
            // Not installed, the process-wide ring is another test's: leave it alone.
            case 2 where installed: addBreadcrumb("process-wide \(count)")
            default:
              if count % 16 == 3 { _ = ring.snapshot() }
              ring.setFilter(minimumLevel: .debug, enabledTypes: nil)
            }
            if count == 0 { appending.arrive() }
            count += 1
            if seenClosed { afterClose += 1 }
          }
        }
        #expect(!ring.isInstalled)
        let file = try RingReader.read(file: ring.path)
        #expect(file.header.state == .clean, "iteration \(iteration)")
      }
    }
    if installed { try ProcessWideState.exclusive(body) } else { try body() }
  }

  @Test("two threads closing at once: one closes, the other returns, nothing is freed twice")
  func concurrentClose() throws {
    let directory = TestDirectory()
    for iteration in 0..<1_000 {
      let ring = try Self.smallRing(in: directory, "\(iteration).ring")
      ring.append("before close")
      let ready = ArrivalCounter()
      onThreads(2) { thread in
        ready.arriveAndWait(for: 2)
        ring.close(clean: thread == 0)
      }
      let file = try RingReader.read(file: ring.path)
      #expect(file.breadcrumbs.map(\.message) == ["before close"], "iteration \(iteration)")
    }
  }

  @Test("every call after close is a harmless no-op")
  func callsAfterClose() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let ring = try Self.smallRing(in: directory, "closed.ring")
      let other = try Self.smallRing(in: directory, "other.ring")
      defer { other.close() }
      ring.install()
      ring.append("before close")
      ring.close(clean: true)
      #expect(!ring.isInstalled, "close uninstalls the process-wide ring")
      other.install()

      ring.append("after close", level: .fatal)
      ring.install()
      #expect(!ring.isInstalled)
      #expect(other.isInstalled, "installing a closed ring does not replace the installed one")
      ring.setFilter(minimumLevel: .error, enabledTypes: [])
      ring.markMemoryWarning()
      let target = BreadcrumbTarget.ring(ring)
      target.append("after close, through a target", level: .error, type: .manual)
      #expect(!target.accepts(level: .fatal, type: .manual))
      #expect(!target.compose("composed", level: .fatal, type: .manual, attributeBytes: 0) { _ in })
      target.markMemoryWarning()
      #expect(ring.snapshot().breadcrumbs.isEmpty)
      ring.close(clean: false)

      let file = try RingReader.read(file: ring.path)
      #expect(file.header.state == .clean, "the second close changed nothing")
      #expect(file.breadcrumbs.map(\.message) == ["before close"])
      #expect(!file.header.receivedMemoryWarning)
      #expect(other.snapshot().breadcrumbs.isEmpty)
    }
  }

  @Test("a pointer from crumbs_installed_ring stays valid across more than four re-installs")
  func installedPointerOutlivesReinstalls() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let rings = try (0..<6).map { try Self.smallRing(in: directory, "\($0).ring") }
      defer { rings.forEach { $0.close() } }
      rings[0].install()
      let held = try #require(crumbs_installed_ring())
      for ring in rings.dropFirst() { ring.install() }
      #expect(rings[5].isInstalled)
      // The reader that loaded the pointer before the re-installs still sees the first ring.
      #expect(held.pointee.header == rings[0].handle.pointee.header)
      let appended = crumbs_ring_add(
        held, BreadcrumbLevel.info.rawValue, BreadcrumbType.manual.rawValue, 0, "late", nil, 0)
      #expect(appended)
      #expect(rings[0].snapshot().breadcrumbs.map(\.message) == ["late"])
      #expect(rings[1...].allSatisfy { $0.snapshot().breadcrumbs.isEmpty })
    }
  }

  @Test(
    "a crash after the handler's ring was closed leaves a complete record",
    arguments: ["closed-handler-ring", "closed-installed-ring"])
  func crashAfterHandlerRingClosed(scenario: String) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      scenario, variant: ChildVariant(release: false, backtracer: false), directory: directory)
    let context = "\(scenario): \(run.lines.joined(separator: " | "))"
    #expect(run.signal == SIGSEGV, "\(context)")
    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(record.status == .complete, "\(context)")
    #expect(record.signal.number == SIGSEGV)
    #expect(record.nestedSignal == nil, "the handler did not fault: \(context)")
    // The ring was closed clean before the crash: the file keeps what it had then.
    let ring = try RingReader.read(file: try #require(run.ringPath))
    #expect(ring.header.state == .clean, "\(context)")
    #expect(ring.breadcrumbs.contains { $0.message == run.facts["last-breadcrumb"] }, "\(context)")
  }
}
