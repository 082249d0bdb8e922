// StartGate.swift — releasing many child processes at one moment, without timing.
//
// The test makes a gate (a FIFO it holds open for reading and writing, so a child's open never
// blocks), starts children that each wait at it (crumbs_test_wait_at_gate: open, print "ready",
// read until end of file), reads "ready" from every child, then releases them: closing the only
// write end gives every waiting reader end of file at once.

import CrumbsPlatform
import SystemPackage

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package final class StartGate {
  /// The FIFO's path, to pass to the children.
  package let path: String
  private var descriptor: Int32

  package init(in directory: TestDirectory, name: String = "start-gate") throws {
    path = directory.file(name)
    guard mkfifo(path, 0o600) == 0 else {
      throw SystemCallError(call: "mkfifo", path: path, errno: Errno(rawValue: errno))
    }
    // O_RDWR on a FIFO does not block on Linux; O_CLOEXEC keeps the children from holding a
    // write end, which would keep them from ever seeing end of file.
    descriptor = try Syscall.open(path, O_RDWR)
  }

  /// Waits until every child printed "ready" (at most `seconds` each), then releases them all.
  /// Returns the children that never became ready (empty when all did).
  @discardableResult
  package func release(_ children: [ChildProcess], seconds: Double = 120) -> [ChildProcess] {
    let late = children.filter { $0.readLine(seconds: seconds) != "ready" }
    open()
    return late
  }

  /// Releases whoever waits.
  package func open() {
    if descriptor >= 0 { Syscall.close(descriptor) }
    descriptor = -1
  }

  deinit { open() }
}
