// ThreadDumpResponder.swift — the client's answer to `crumbs threads PID`: a thread that sleeps
// in poll until a request comes, takes the live capture, and writes it next to the ring.
//
// Entry points, in call order:
//   ThreadDumpResponder.start(ring:)   the request signal installed (ThreadDumpRequests: the ring
//                                      header names it) and the thread "crumbs.threads" started
//   [thread] run                       poll on the request pipe and a stop pipe, nothing else: no
//                                      wake-up while no one asks; per wake-up, answer(cookies)
//   answer(_:)                         one capture for every request waiting (they coalesce),
//                                      written by ThreadDumpAnswers as
//                                      `<session>.threads-<cookie>.json`, 0600, by temporary
//                                      file and rename (the asker sees a whole file or none)
//   stop()                             the header back to 0, the thread joined, the answers no
//                                      one took deleted
//
// Bounds: one capture at a time (one thread); at most `ThreadDumpAnswers.maxPresent` answers
// present at once (a request beyond that gets none and its asker times out; answers nobody
// took are removed after 30 s), as many cookies taken per wake-up, and the request pipe drops
// what passes its size. A flood of signals costs reads of the pipe, never unbounded files, and
// no more captures than answers some asker can take away.
//
// A separate small type with one entry point (`start`) and one exit (`stop`), so a watchdog
// thread could take over its loop. Not signal-safe.

import CrumbsPlatform
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

final class ThreadDumpResponder: Sendable {
  private let requests: ThreadDumpRequests
  private let answers: ThreadDumpAnswers
  private let stopPipe: (read: Int32, write: Int32)
  private let thread = Mutex<BackgroundThread?>(nil)

  /// The request signal (also in the ring header).
  var signal: Int32 { requests.signal }

  private init(requests: ThreadDumpRequests, ring: BreadcrumbRing, stopPipe: (read: Int32, write: Int32)) {
    self.requests = requests
    self.answers = ThreadDumpAnswers(ringPath: ring.path, sessionID: ring.sessionID)
    self.stopPipe = stopPipe
  }

  /// Installs the request signal for `ring` and starts answering. Throws when no signal is free
  /// or a thread cannot be made (then nothing stays installed).
  static func start(ring: BreadcrumbRing) throws(ThreadDumpRequestError) -> ThreadDumpResponder {
    let requests = try ThreadDumpRequests.install(ring: ring)
    let stopPipe: (read: Int32, write: Int32)
    do throws(SystemCallError) {
      stopPipe = try Syscall.wakePipe()
    } catch {
      requests.uninstall()
      throw .system(error)
    }
    let responder = ThreadDumpResponder(requests: requests, ring: ring, stopPipe: stopPipe)
    do throws(SystemCallError) {
      let thread = try BackgroundThread.startJoinable(name: "crumbs.threads") { responder.run() }
      responder.thread.withLock { $0 = thread }
    } catch {
      requests.uninstall()
      Syscall.close(stopPipe.read)
      Syscall.close(stopPipe.write)
      throw .system(error)
    }
    return responder
  }

  /// Stops answering: the header names no signal from now on, the thread ends, and answers no
  /// one read are deleted. Idempotent.
  func stop() {
    guard let thread = thread.withLock({ $0.take() }) else { return }
    Syscall.signalWakePipe(stopPipe.write)
    thread.join()
    requests.uninstall()
    Syscall.close(stopPipe.read)
    Syscall.close(stopPipe.write)
    answers.removeAll()
  }

  private func run() {
    // Whatever the app's threads block, a request always finds this one to run its handler on.
    Syscall.unblockSignalOnThisThread(requests.signal)
    while true {
      var descriptors = [
        pollfd(fd: requests.descriptor, events: Int16(POLLIN), revents: 0),
        pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
      ]
      do {
        try Syscall.poll(&descriptors, timeoutMilliseconds: -1)
      } catch {
        return  // poll itself failed (EBADF, ENOMEM): no dumps rather than a spinning thread
      }
      if descriptors[1].revents != 0 { return }
      if descriptors[0].revents != 0 { answer(requests.take(limit: ThreadDumpAnswers.maxPresent)) }
    }
  }

  /// Answers `cookies` with one capture, within the bound on answers present.
  func answer(_ cookies: [UInt32]) {
    answers.write(cookies) { () throws(LiveThreadCaptureError) in try LiveThreadCapture.capture() }
  }
}
