// CollectWatcher.swift — the collector's watch (`crumbs collect --watch`): a poll loop that runs CollectEngine's pass on
// a directory as soon as one of its processes has ended, and never otherwise busy.
//
// Entry points, in call order:
//   CollectWatcher(engine:signals:rescanSeconds:)   one inotify descriptor, nothing watched yet
//   run()                         arm() every directory, print "watching N director(ies)" (the
//                                 line a supervisor or test waits for), one pass each, then loop:
//     poll                        inotify, the SIGTERM/SIGINT signalfd, the pidfds waited on;
//                                 the timeout is the next recheck, pidfd deadline, delivery
//                                 retry or rescan, whichever comes first
//     inotify IN_CLOSE_WRITE of rings/<session>.ring → check(ring)
//     check(ring)                 RingDirectory.writerStatus: gone → the directory's pass is due;
//                                 running(pid) → wait on a pidfd of that pid (readable once the
//                                 process has exited: it is still in its exit path when the
//                                 kernel reports the close), then check again; undecided (another
//                                 pid namespace) → recheck after 5, 20, 100, 500, 2000 ms (the
//                                 writer's flock, freed just after the close, decides)
//     rescan                      every --rescan seconds: every directory's pass, arm() again
//                                 (the safety net: a ring whose last descriptor a forked child
//                                 keeps gives no event when its writer dies)
//     SIGTERM / SIGINT            the loop ends; a pass in flight stops before its next session
//                                 or delivery attempt, a request in flight within a second
//                                 (CollectEngine's file comment); exit 0
//     due passes                  one slice each, in turn (CollectEngine.sliceNanoseconds); a
//                                 directory with more to do goes back to the end of the queue, and
//                                 the poll does not wait while one is queued: a directory's long
//                                 backlog never holds up another's new crash by more than a slice
//
// Why the ring's close: the writer holds its ring open (descriptor and read-write mapping) for
// its whole life, and the kernel emits IN_CLOSE_WRITE when the last reference to a writable open
// file goes: process death of any kind, SIGKILL and the OOM killer included, and a clean exit.
// A clean exit is processed too: the session is counted, as the client would count it.
//
// Directories: one whose rings/ exists is watched there; one that does not exist yet, or has no
// rings/ yet, is watched at its nearest existing ancestor (IN_CREATE, IN_MOVED_TO) and moved to
// its rings/ once that appears; a deleted rings/ (IN_IGNORED) goes back to the ancestor.
//
// Bounded: one inotify descriptor; at most `maxWaits` pidfds, one per ring, each closed when
// readable or after `waitSeconds`; at most one recheck per ring; no state grows with the number
// of events. Safe beside the apps' clients and other collectors: claiming is
// RingDirectory+Leftovers' (one report per session); a pass that loses a claim simply skips it.
// Not signal-safe (an ordinary program: the command line, or a test).

import Crumbs
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

package struct CollectWatcher {
  let engine: CollectEngine
  let signals: Int32
  let rescanNanoseconds: UInt64
  let inotify: Int32

  /// Most pidfds held at once (one per ring whose writer is seen running after its close).
  static let maxWaits = 256
  /// How long a pidfd is kept: a writer still running this long after the close event was not
  /// exiting (the close was another process's probe of its ring).
  static let waitSeconds: UInt64 = 10
  /// Rechecks after a close event whose writer cannot be told apart (milliseconds after it).
  static let recheckSteps: [UInt64] = [5, 20, 100, 500, 2000]
  /// A delivery lock held by another process: try again this soon.
  static let busyRetryNanoseconds: UInt64 = 1_000_000_000

  static let ringsMask = UInt32(IN_CLOSE_WRITE | IN_MOVE_SELF | IN_ONLYDIR)
  static let ancestorMask = UInt32(IN_CREATE | IN_MOVED_TO | IN_MOVE_SELF | IN_ONLYDIR)

  private struct Wait {
    var directory: Int
    var ring: String
    var deadline: UInt64
  }

  private struct Recheck {
    var directory: Int
    var step: Int
    var due: UInt64
  }

  /// Watch descriptor → the folder it watches.
  private var watches: [Int32: String] = [:]
  /// Per directory: whether its rings/ (not an ancestor) is watched.
  private var watchingRings: [Bool]
  /// pidfd → what it waits for.
  private var waits: [Int32: Wait] = [:]
  /// Ring path → its next recheck.
  private var rechecks: [String: Recheck] = [:]
  /// Directory → when a pass is due again for delivery (monotonic ns).
  private var deliveryDue: [Int: UInt64] = [:]
  /// Directories due a pass, in the order they became due (each at most once).
  private var due = DueQueue()
  private var nextRescan: UInt64 = 0

  package init(engine: CollectEngine, signals: Int32, rescanSeconds: Double) throws(CollectError) {
    self.engine = engine
    self.signals = signals
    rescanNanoseconds = UInt64(rescanSeconds * 1e9)
    watchingRings = Array(repeating: false, count: engine.directories.count)
    do {
      inotify = try Syscall.inotifyDescriptor()
    } catch {
      throw CollectError(description: "cannot watch: \(error)")
    }
  }

  /// Watches until SIGTERM or SIGINT is read from `signals` (see the file comment).
  package mutating func run() throws(CollectError) {
    defer {
      for fd in waits.keys { Syscall.close(fd) }
      Syscall.close(inotify)
    }
    arm()
    let count = engine.directories.count
    engine.output.line("watching \(count) director\(count == 1 ? "y" : "ies")")
    due.insertAll(engine.directories.indices)
    nextRescan = SystemClock.monotonicNanoseconds() &+ rescanNanoseconds
    while true {
      runDuePasses()
      if engine.stopRequested { break }
      var descriptors = [
        pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
        pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
      ]
      descriptors += waits.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
      do {
        try Syscall.poll(&descriptors, timeoutMilliseconds: due.isEmpty ? timeoutMilliseconds() : 0)
      } catch {
        throw CollectError(description: "\(error)")
      }
      if descriptors[1].revents != 0 { break }
      if descriptors[0].revents != 0 { readEvents() }
      for descriptor in descriptors.dropFirst(2) where descriptor.revents != 0 {
        guard let wait = waits.removeValue(forKey: descriptor.fd) else { continue }
        Syscall.close(descriptor.fd)
        check(wait.ring, directory: wait.directory)
      }
      handleTimers()
    }
    let taken = Syscall.takeSignals(signals)
    engine.output.line("stopping (\(taken.map { SignalNames.name($0) }.joined(separator: ", ")))")
  }

  // MARK: - Watches

  /// Watches each directory's rings/ when it exists, else its nearest existing ancestor; drops
  /// watches nothing needs any more. A directory whose rings/ is newly watched is due a pass.
  private mutating func arm() {
    var wanted: [String: UInt32] = [:]
    var rings: [Bool] = []
    for directory in engine.directories {
      if Syscall.isDirectory(directory.ringsPath) {
        wanted[directory.ringsPath, default: 0] |= Self.ringsMask
        rings.append(true)
      } else {
        var ancestor = directory.path
        while !Syscall.isDirectory(ancestor), ancestor != "/" {
          ancestor = Syscall.directoryName(of: ancestor)
        }
        wanted[ancestor, default: 0] |= Self.ancestorMask
        rings.append(false)
      }
    }
    var armed: [Int32: String] = [:]
    for (path, mask) in wanted {
      do {
        armed[try Syscall.addWatch(inotify, path, mask: mask)] = path
      } catch {
        engine.output.problem("cannot watch \(path): \(error) (the rescan still looks)")
      }
    }
    for (watch, _) in watches where armed[watch] == nil { Syscall.removeWatch(inotify, watch) }
    watches = armed
    for (index, now) in rings.enumerated() where now && !watchingRings[index] { due.insert(index) }
    watchingRings = rings
  }

  private mutating func readEvents() {
    var rearm = false
    for event in Syscall.inotifyEvents(inotify) {
      if event.overflowed {
        due.insertAll(engine.directories.indices)
        rearm = true
        continue
      }
      guard let folder = watches[event.watch] else { continue }  // a watch already dropped
      if event.watchRemoved || event.mask & UInt32(IN_MOVE_SELF) != 0 {
        watches[event.watch] = nil
        rearm = true
        continue
      }
      guard event.mask & UInt32(IN_CLOSE_WRITE) != 0 else {
        rearm = true  // something appeared in an ancestor: maybe a directory or its rings/
        continue
      }
      guard event.name.hasSuffix(".ring") else { continue }
      for (index, directory) in engine.directories.enumerated() where directory.ringsPath == folder {
        check(folder + "/" + event.name, directory: index)
      }
    }
    if rearm { arm() }
  }

  // MARK: - One ring's writer

  /// Decides what the close of `ring` calls for (see the file comment).
  private mutating func check(_ ring: String, directory: Int) {
    let now = SystemClock.monotonicNanoseconds()
    switch RingDirectory.writerStatus(ofRing: ring) {
    case .gone:
      rechecks[ring] = nil
      due.insert(directory)
    case .running(let pid):
      if let (fd, _) = waits.first(where: { $0.value.ring == ring }) {
        waits[fd]?.deadline = now &+ Self.waitSeconds * 1_000_000_000
        return
      }
      guard waits.count < Self.maxWaits, let fd = Syscall.processDescriptor(pid) else {
        scheduleRecheck(ring, directory: directory, after: rechecks[ring].map { $0.step + 1 } ?? 0, now: now)
        return
      }
      // The pid may have ended and been reused between the header's check and pidfd_open:
      // asked again now that the pidfd is held, a `running` answer means this is the writer.
      guard case .running = RingDirectory.writerStatus(ofRing: ring) else {
        Syscall.close(fd)
        due.insert(directory)
        return
      }
      waits[fd] = Wait(directory: directory, ring: ring, deadline: now &+ Self.waitSeconds * 1_000_000_000)
    case .undecided:
      scheduleRecheck(ring, directory: directory, after: rechecks[ring].map { $0.step + 1 } ?? 0, now: now)
    }
  }

  private mutating func scheduleRecheck(_ ring: String, directory: Int, after step: Int, now: UInt64) {
    guard step < Self.recheckSteps.count else {
      rechecks[ring] = nil  // the rescan is the safety net
      return
    }
    rechecks[ring] = Recheck(
      directory: directory, step: step, due: now &+ Self.recheckSteps[step] * 1_000_000)
  }

  // MARK: - Time

  private func timeoutMilliseconds() -> Int32 {
    let now = SystemClock.monotonicNanoseconds()
    var next = nextRescan
    for recheck in rechecks.values { next = min(next, recheck.due) }
    for wait in waits.values { next = min(next, wait.deadline) }
    for time in deliveryDue.values { next = min(next, time) }
    guard next > now else { return 0 }
    return Int32(min((next - now + 999_999) / 1_000_000, 3_600_000))
  }

  private mutating func handleTimers() {
    let now = SystemClock.monotonicNanoseconds()
    for (ring, recheck) in rechecks where recheck.due <= now {
      check(ring, directory: recheck.directory)
      if rechecks[ring]?.step == recheck.step { rechecks[ring] = nil }
    }
    for (fd, wait) in waits where wait.deadline <= now {
      Syscall.close(fd)
      waits[fd] = nil
    }
    for (index, time) in deliveryDue where time <= now {
      deliveryDue[index] = nil
      due.insert(index)
    }
    if nextRescan <= now {
      arm()
      due.insertAll(engine.directories.indices)
      nextRescan = now &+ rescanNanoseconds
    }
  }

  /// One round: a slice for each directory due now; those with more to do are due again after
  /// the others (and after the events that came in meanwhile).
  private mutating func runDuePasses() {
    var unfinished: [Int] = []
    for _ in 0..<due.count {
      guard let index = due.popFirst() else { break }
      if engine.stopRequested { return }
      let pass = engine.pass(index, quiet: true)
      deliveryDue[index] = nil
      let now = SystemClock.monotonicNanoseconds()
      if pass.unfinished {
        unfinished.append(index)
      } else if pass.lockBusy {
        deliveryDue[index] = now &+ Self.busyRetryNanoseconds
      } else if pass.pending > 0, let next = pass.nextDueUnixNano {
        let wall = SystemClock.wallNanoseconds()
        deliveryDue[index] = now &+ min(next > wall ? next - wall : 0, rescanNanoseconds)
      }
    }
    due.insertAll(unfinished)
  }
}

/// Directory indices waiting for a pass, first come first served, each at most once.
struct DueQueue {
  private var order: [Int] = []

  var isEmpty: Bool { order.isEmpty }
  var count: Int { order.count }

  mutating func insert(_ index: Int) { if !order.contains(index) { order.append(index) } }
  mutating func insertAll(_ indices: some Sequence<Int>) { for index in indices { insert(index) } }
  mutating func popFirst() -> Int? { order.isEmpty ? nil : order.removeFirst() }
}
