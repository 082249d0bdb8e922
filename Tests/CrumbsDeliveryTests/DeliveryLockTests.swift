// DeliveryLockTests.swift — one deliverer per store: across processes and threads, and never
// held by a child process the app happened to start (a forked or spawned child holds copies of
// every descriptor until it execs, and with them any flock).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import CrumbsTestSupportC
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// The first time a request goes out (while the pass holds the delivery lock), forks a child
/// that keeps a copy of the lock file's descriptor, as any child of the app does until it execs.
final class ForkingDelegate: ReportUploaderDelegate {
  let lockPath: String
  let child = Mutex<(pid: Int32, release: Int32, heldDescriptor: Int32)?>(nil)

  init(lockPath: String) { self.lockPath = lockPath }

  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    child.withLock { child in
      guard child == nil,
        let lockDescriptor = ((try? Syscall.directoryEntries("/proc/self/fd")) ?? []).compactMap(Int32.init)
          .first(where: { Syscall.readLink("/proc/self/fd/\($0)") == lockPath })
      else { return }
      var ends: [Int32] = [-1, -1]
      guard pipe(&ends) == 0 else { return }
      let pid = crumbs_test_fork_blocked_child(ends[0], lockDescriptor)
      close(ends[0])
      child = (pid, ends[1], lockDescriptor)
    }
    return request
  }

  /// Lets the child exit and reaps it.
  func endChild() {
    child.withLock { child in
      guard let (pid, release, _) = child else { return }
      close(release)
      var status: Int32 = 0
      while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
  }
}

@Suite struct DeliveryLockTests {
  @Test func aChildForkedDuringAPassHoldsNoLockAfterIt() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 503)
    defer { server.stop() }
    let delegate = ForkingDelegate(lockPath: fixture.store.path + "/.delivery.lock")
    defer { delegate.endChild() }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], delegate: delegate)

    let first = uploader.deliverPendingNow()
    #expect(!first.lockBusy)
    #expect(first.results.count == 1)
    let forked = try #require(delegate.child.withLock { $0 })
    #expect(forked.pid > 0)
    // The child still runs and still has a copy of the lock file's descriptor; the next pass
    // (here, the same process) must get the lock all the same.
    #expect(kill(forked.pid, 0) == 0)
    let second = uploader.deliverPendingNow()
    #expect(!second.lockBusy, "a forked child kept the delivery lock")
  }

  @Test func anotherProcessHoldingTheLockMakesThePassWait() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)])
    let lockPath = fixture.store.path + "/.delivery.lock"
    let holder = try Subprocess(
      "/usr/bin/env",
      [
        "python3", "-c",
        "import fcntl, signal, sys\n"
          + "f = open(sys.argv[1], 'a')\n"
          + "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
          + "print('locked', flush=True)\n"
          + "signal.pause()\n",
        lockPath,
      ])
    #expect(holder.readLine(seconds: 60) == "locked")
    let busy = uploader.deliverPendingNow()
    #expect(busy.lockBusy)
    #expect(busy.results.isEmpty)
    #expect(server.requests.isEmpty)

    holder.signal(SIGTERM)
    holder.wait(seconds: 60)
    let free = uploader.deliverPendingNow()
    #expect(!free.lockBusy)
    #expect(free.results.count == 1)
  }

  @Test func twoUploadersInOneProcessTakeTurns() throws {
    let fixture = try ReportFixture()
    #expect(DeliveryLock.take(store: fixture.store.path))
    // Held here: another uploader of this process finds it busy, as one of another process would.
    let uploader = ReportUploader(store: fixture.store, destinations: [])
    #expect(uploader.deliverPendingNow().lockBusy)
    #expect(!DeliveryLock.take(store: fixture.store.path))
    DeliveryLock.release(store: fixture.store.path)
    #expect(!uploader.deliverPendingNow().lockBusy)
  }
}
